//! Bearer-token authentication for the service.
//!
//! Tokens come from the environment variable (comma-separated) and/or the file (one a line,
//! `#` comments) the config names. A presented token is compared with every configured token
//! through SHA-256 digests and a constant-time comparison, so neither the content nor the
//! length of a token leaks through timing.
//!
//! On failure: a configured source that is unset, unreadable or holds no token stops startup
//! (a service meant to be protected never runs open); a request without a valid token is
//! refused. Tokens never appear in errors or logs.

use std::path::Path;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::ServerConfig;

/// Shortest token accepted: anything shorter is guessable.
const MIN_TOKEN_LEN: usize = 16;

#[derive(Clone, Default)]
pub struct Tokens {
    digests: Vec<[u8; 32]>,
}

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("`server.tokens_env` names `{0}`, which is not set or empty")]
    EnvUnset(String),
    #[error("cannot read `server.tokens_file` `{path}`: {message}")]
    File { path: String, message: String },
    #[error("the configured token sources hold no token")]
    Empty,
    #[error("a token from {0} is shorter than {MIN_TOKEN_LEN} characters")]
    TooShort(String),
}

fn digest(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

impl Tokens {
    /// The tokens the config names; none when it names no source (loopback-only service).
    pub fn load(config: &ServerConfig) -> Result<Self, TokenError> {
        let mut tokens: Vec<(String, &'static str)> = Vec::new();
        if let Some(variable) = &config.tokens_env {
            let value = std::env::var(variable).ok().filter(|value| !value.trim().is_empty());
            let value = value.ok_or_else(|| TokenError::EnvUnset(variable.clone()))?;
            tokens.extend(value.split(',').map(|token| (token.trim().to_owned(), "the environment")));
        }
        if let Some(path) = &config.tokens_file {
            tokens.extend(read_file(path)?.into_iter().map(|token| (token, "the tokens file")));
        }
        tokens.retain(|(token, _)| !token.is_empty());
        if (config.tokens_env.is_some() || config.tokens_file.is_some()) && tokens.is_empty() {
            return Err(TokenError::Empty);
        }
        if let Some((_, source)) = tokens.iter().find(|(token, _)| token.len() < MIN_TOKEN_LEN) {
            return Err(TokenError::TooShort((*source).to_owned()));
        }
        Ok(Tokens { digests: tokens.iter().map(|(token, _)| digest(token.as_bytes())).collect() })
    }

    pub fn from_list(tokens: &[&str]) -> Self {
        Tokens { digests: tokens.iter().map(|token| digest(token.as_bytes())).collect() }
    }

    /// Whether requests must carry a token.
    pub fn required(&self) -> bool {
        !self.digests.is_empty()
    }

    /// Checks an `Authorization` header value (`Bearer TOKEN`). The scheme is case-insensitive
    /// and may be followed by several spaces (RFC 7235: `auth-scheme 1*SP token68`), so
    /// `BEARER TOKEN` and `bearer  TOKEN` pass; the token itself is compared exactly.
    pub fn accepts(&self, authorization: Option<&[u8]>) -> bool {
        if !self.required() {
            return true;
        }
        let Some(token) = authorization.and_then(bearer_token) else { return false };
        let presented = digest(token);
        // Every configured digest is compared, so the time does not say which one matched.
        self.digests.iter().fold(0u8, |matched, known| matched | known.ct_eq(&presented).unwrap_u8()) == 1
    }
}

/// The token of a `Bearer` credential, or `None` for another scheme or an empty token.
fn bearer_token(header: &[u8]) -> Option<&[u8]> {
    const SCHEME: &[u8] = b"bearer";
    let (scheme, rest) = header.split_at_checked(SCHEME.len())?;
    if !scheme.eq_ignore_ascii_case(SCHEME) || rest.first() != Some(&b' ') {
        return None;
    }
    let start = rest.iter().position(|byte| *byte != b' ')?;
    Some(&rest[start..])
}

fn read_file(path: &Path) -> Result<Vec<String>, TokenError> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| TokenError::File { path: path.display().to_string(), message: error.to_string() })?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_owned)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_configured_tokens_pass() {
        let tokens = Tokens::from_list(&["alpha-token-0123456789", "beta-token-0123456789"]);
        assert!(tokens.accepts(Some(b"Bearer alpha-token-0123456789")));
        assert!(tokens.accepts(Some(b"Bearer beta-token-0123456789")));
        for bad in [&b"Bearer alpha-token-012345678"[..], b"alpha-token-0123456789", b"Basic abc", b"Bearer ", b""] {
            assert!(!tokens.accepts(Some(bad)), "{}", String::from_utf8_lossy(bad));
        }
        assert!(!tokens.accepts(None));
        assert!(Tokens::default().accepts(None), "no tokens configured: loopback-only, open");
    }

    #[test]
    fn the_scheme_is_case_insensitive_and_the_token_is_not() {
        // RFC 7235: the auth-scheme is case-insensitive and 1*SP separates it from the token.
        let tokens = Tokens::from_list(&["alpha-token-0123456789"]);
        for good in [
            &b"Bearer alpha-token-0123456789"[..],
            b"bearer alpha-token-0123456789",
            b"BEARER alpha-token-0123456789",
            b"bEaReR alpha-token-0123456789",
            b"Bearer   alpha-token-0123456789",
        ] {
            assert!(tokens.accepts(Some(good)), "{}", String::from_utf8_lossy(good));
        }
        for bad in [
            &b"Bearer ALPHA-TOKEN-0123456789"[..],
            b"Bearer\talpha-token-0123456789",
            b"Bearers alpha-token-0123456789",
            b"Bearer",
            b"Bearer    ",
            b"Bear alpha-token-0123456789",
            b"Basic alpha-token-0123456789",
        ] {
            assert!(!tokens.accepts(Some(bad)), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn sources_are_read_and_bad_ones_refused() {
        let path = std::env::temp_dir().join(format!("permit-tokens-{}", std::process::id()));
        std::fs::write(&path, "# operators\nfirst-token-0123456789\n\n  second-token-0123456789  \n").unwrap();
        let config = ServerConfig { tokens_file: Some(path.clone()), ..ServerConfig::default() };
        let tokens = Tokens::load(&config).unwrap();
        assert!(tokens.accepts(Some(b"Bearer second-token-0123456789")));
        std::fs::write(&path, "# nothing\n").unwrap();
        assert!(matches!(Tokens::load(&config), Err(TokenError::Empty)));
        std::fs::write(&path, "short\n").unwrap();
        let error = Tokens::load(&config).err().unwrap().to_string();
        assert!(!error.contains("short\n") && error.contains("shorter than 16"), "{error}");
        std::fs::remove_file(&path).unwrap();
        let config = ServerConfig {
            tokens_env: Some("PERMIT_TEST_TOKENS_UNSET_VARIABLE".to_owned()),
            ..ServerConfig::default()
        };
        assert!(matches!(Tokens::load(&config), Err(TokenError::EnvUnset(_))));
    }
}
