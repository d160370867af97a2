//! Brace expansion as bash performs it, on a word's source text, before any other expansion.
//!
//! Decides which words one source word becomes: `a{b,c}d` is `abd acd`, `{"x",}` is `x`,
//! `{1..3}` is `1 2 3`. Quoted and escaped braces and commas are literal, `${` is a parameter,
//! and `$(…)`, `` `…` `` and `$((…))` are skipped whole, as bash skips them. The results keep
//! their quotes: quote removal, tilde and parameter expansion happen afterwards, word by word,
//! in the shell walker. An unquoted word that brace expansion leaves empty is dropped, as bash
//! drops it.
//!
//! Hand-written: brush-parser's brace grammar does not honour quotes inside members (its own
//! TODO), which is exactly where the red team hid flags. Checked against real bash in
//! `tests/expansion_vs_bash.rs`. Fails closed: more than [`MAX_WORDS`] results, or a source it
//! cannot scan (an unterminated quote), is an error, and the caller treats the word as unknown.

/// At most this many words come out of one source word.
pub const MAX_WORDS: usize = 256;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BraceError {
    #[error("brace expansion makes more than {MAX_WORDS} words")]
    TooMany,
    #[error("an unterminated quote or substitution")]
    Unterminated,
}

/// The words `word` becomes after brace expansion (quotes kept). A word with no brace
/// expression comes back alone and unchanged.
pub fn brace_expand(word: &str) -> Result<Vec<String>, BraceError> {
    if !word.contains('{') {
        return Ok(vec![word.to_owned()]);
    }
    let mut out = Vec::new();
    expand_into(word, &mut out)?;
    // An unquoted word left empty is removed; a quoted empty word (`''`) stays.
    out.retain(|word| !word.is_empty());
    Ok(out)
}

fn expand_into(word: &str, out: &mut Vec<String>) -> Result<(), BraceError> {
    let Some((open, close, members)) = find_brace_expression(word)? else {
        push(out, word.to_owned())?;
        return Ok(());
    };
    let preamble = &word[..open];
    let postscript = &word[close + 1..];
    // The postscript may hold more brace expressions; expand it once and reuse it.
    let mut tails = Vec::new();
    expand_into(postscript, &mut tails)?;
    for member in members {
        let mut heads = Vec::new();
        expand_into(&member, &mut heads)?;
        for head in &heads {
            for tail in &tails {
                push(out, format!("{preamble}{head}{tail}"))?;
            }
        }
    }
    Ok(())
}

fn push(out: &mut Vec<String>, word: String) -> Result<(), BraceError> {
    if out.len() >= MAX_WORDS {
        return Err(BraceError::TooMany);
    }
    out.push(word);
    Ok(())
}

/// Byte offsets of the characters outside quotes, escapes and substitutions, with the byte.
fn unquoted_bytes(word: &str) -> Result<Vec<(usize, u8)>, BraceError> {
    let bytes = word.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'\\' => index += 2,
            b'\'' => index = skip_single_quoted(bytes, index + 1)?,
            b'"' => index = skip_double_quoted(bytes, index + 1)?,
            b'`' => index = skip_backquoted(bytes, index + 1)?,
            b'$' if bytes.get(index + 1) == Some(&b'\'') => index = skip_ansi_c(bytes, index + 2)?,
            b'$' if bytes.get(index + 1) == Some(&b'(') => index = skip_nested(bytes, index + 2, b'(', b')')?,
            b'$' if bytes.get(index + 1) == Some(&b'{') => index = skip_nested(bytes, index + 2, b'{', b'}')?,
            byte => {
                out.push((index, byte));
                index += 1;
            }
        }
    }
    Ok(out)
}

fn skip_single_quoted(bytes: &[u8], from: usize) -> Result<usize, BraceError> {
    bytes[from.min(bytes.len())..]
        .iter()
        .position(|byte| *byte == b'\'')
        .map(|offset| from + offset + 1)
        .ok_or(BraceError::Unterminated)
}

fn skip_ansi_c(bytes: &[u8], mut index: usize) -> Result<usize, BraceError> {
    while index < bytes.len() {
        match bytes[index] {
            b'\\' => index += 2,
            b'\'' => return Ok(index + 1),
            _ => index += 1,
        }
    }
    Err(BraceError::Unterminated)
}

fn skip_double_quoted(bytes: &[u8], mut index: usize) -> Result<usize, BraceError> {
    while index < bytes.len() {
        match bytes[index] {
            b'\\' => index += 2,
            b'"' => return Ok(index + 1),
            b'`' => index = skip_backquoted(bytes, index + 1)?,
            b'$' if bytes.get(index + 1) == Some(&b'(') => index = skip_nested(bytes, index + 2, b'(', b')')?,
            b'$' if bytes.get(index + 1) == Some(&b'{') => index = skip_nested(bytes, index + 2, b'{', b'}')?,
            _ => index += 1,
        }
    }
    Err(BraceError::Unterminated)
}

fn skip_backquoted(bytes: &[u8], mut index: usize) -> Result<usize, BraceError> {
    while index < bytes.len() {
        match bytes[index] {
            b'\\' => index += 2,
            b'`' => return Ok(index + 1),
            _ => index += 1,
        }
    }
    Err(BraceError::Unterminated)
}

/// Skips to after the bracket closing one already opened, honouring quotes inside.
fn skip_nested(bytes: &[u8], mut index: usize, open: u8, close: u8) -> Result<usize, BraceError> {
    let mut depth = 1usize;
    while index < bytes.len() {
        match bytes[index] {
            b'\\' => index += 2,
            b'\'' => index = skip_single_quoted(bytes, index + 1)?,
            b'"' => index = skip_double_quoted(bytes, index + 1)?,
            b'`' => index = skip_backquoted(bytes, index + 1)?,
            byte if byte == open => {
                depth += 1;
                index += 1;
            }
            byte if byte == close => {
                depth -= 1;
                index += 1;
                if depth == 0 {
                    return Ok(index);
                }
            }
            _ => index += 1,
        }
    }
    Err(BraceError::Unterminated)
}

/// The first brace expression in `word`: `(open, close, members)` with byte offsets of the `{`
/// and its `}`. Members of a list keep their source text; a sequence is generated.
fn find_brace_expression(word: &str) -> Result<Option<(usize, usize, Vec<String>)>, BraceError> {
    let unquoted = unquoted_bytes(word)?;
    for (position, &(open, byte)) in unquoted.iter().enumerate() {
        if byte != b'{' {
            continue;
        }
        // Find the matching `}` among unquoted braces, noting top-level commas.
        let mut depth = 0usize;
        let mut commas = Vec::new();
        let mut close = None;
        for &(offset, byte) in &unquoted[position + 1..] {
            match byte {
                b'{' => depth += 1,
                b'}' if depth == 0 => {
                    close = Some(offset);
                    break;
                }
                b'}' => depth -= 1,
                b',' if depth == 0 => commas.push(offset),
                _ => {}
            }
        }
        let Some(close) = close else { continue };
        if !commas.is_empty() {
            let mut members = Vec::with_capacity(commas.len() + 1);
            let mut start = open + 1;
            for comma in commas {
                members.push(word[start..comma].to_owned());
                start = comma + 1;
            }
            members.push(word[start..close].to_owned());
            return Ok(Some((open, close, members)));
        }
        if let Some(sequence) = sequence(&word[open + 1..close])? {
            return Ok(Some((open, close, sequence)));
        }
        // Not a brace expression (`{}`, `{x}`): the `{` is literal; keep looking after it.
    }
    Ok(None)
}

/// `1..5`, `a..e`, `10..1..3`, `01..10` (zero-padded), as bash generates them.
fn sequence(inner: &str) -> Result<Option<Vec<String>>, BraceError> {
    let parts: Vec<&str> = inner.split("..").collect();
    if !(parts.len() == 2 || parts.len() == 3) {
        return Ok(None);
    }
    let step = match parts.get(2) {
        Some(step) => match parse_integer(step) {
            Some(step) => step.unsigned_abs().max(1),
            None => return Ok(None),
        },
        None => 1,
    };
    if let (Some(start), Some(end)) = (parse_integer(parts[0]), parse_integer(parts[1])) {
        let count = start.abs_diff(end) / step + 1;
        if count > MAX_WORDS as u64 {
            return Err(BraceError::TooMany);
        }
        let padded = |text: &str| {
            let digits = text.trim_start_matches(['-', '+']);
            digits.len() > 1 && digits.starts_with('0')
        };
        let width = if padded(parts[0]) || padded(parts[1]) { parts[0].len().max(parts[1].len()) } else { 0 };
        let mut out = Vec::with_capacity(count as usize);
        let mut value = start;
        for _ in 0..count {
            out.push(if width > 0 {
                if value < 0 {
                    format!("-{:0>width$}", value.unsigned_abs(), width = width - 1)
                } else {
                    format!("{value:0>width$}")
                }
            } else {
                value.to_string()
            });
            value = if start <= end { value + step as i64 } else { value - step as i64 };
        }
        return Ok(Some(out));
    }
    let letter = |text: &str| {
        let mut chars = text.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) if c.is_ascii_alphabetic() => Some(c as u8),
            _ => None,
        }
    };
    if let (Some(start), Some(end)) = (letter(parts[0]), letter(parts[1])) {
        let count = u64::from(start.abs_diff(end)) / step + 1;
        let mut out = Vec::with_capacity(count as usize);
        let mut value = i64::from(start);
        for _ in 0..count {
            // bash steps through the ASCII table, so `Z..a` passes `[`, `\`, `]`, `^`, `_`, `` ` ``.
            out.push(char::from(value as u8).to_string());
            value = if start <= end { value + step as i64 } else { value - step as i64 };
        }
        return Ok(Some(out));
    }
    Ok(None)
}

fn parse_integer(text: &str) -> Option<i64> {
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if digits.is_empty() || digits.len() > 9 || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand(word: &str) -> Vec<String> {
        brace_expand(word).unwrap()
    }

    #[test]
    fn lists_and_products() {
        assert_eq!(expand("a{b,c}d"), ["abd", "acd"]);
        assert_eq!(expand("{a,b}{1,2}"), ["a1", "a2", "b1", "b2"]);
        assert_eq!(expand("{a,{b,c}}"), ["a", "b", "c"]);
        assert_eq!(expand("x{,}"), ["x", "x"]);
        assert_eq!(expand("{,}"), Vec::<String>::new());
    }

    #[test]
    fn quoted_members_still_expand() {
        assert_eq!(expand("{\"x\",}"), ["\"x\""]);
        assert_eq!(expand("{\\-o,}"), ["\\-o"]);
        assert_eq!(expand("{'-',}-output=x"), ["'-'-output=x", "-output=x"]);
    }

    #[test]
    fn quoted_braces_and_commas_are_literal() {
        assert_eq!(expand("'{a,b}'"), ["'{a,b}'"]);
        assert_eq!(expand("\"{a,b}\""), ["\"{a,b}\""]);
        assert_eq!(expand("\\{a,b}"), ["\\{a,b}"]);
        assert_eq!(expand("{a\\,b}"), ["{a\\,b}"]);
        assert_eq!(expand("${a,b}"), ["${a,b}"]);
        assert_eq!(expand("{}"), ["{}"]);
        assert_eq!(expand("{x}"), ["{x}"]);
        assert_eq!(expand("{x}{a,b}"), ["{x}a", "{x}b"]);
        assert_eq!(expand("$(echo {a,b})"), ["$(echo {a,b})"]);
    }

    #[test]
    fn sequences() {
        assert_eq!(expand("{1..3}"), ["1", "2", "3"]);
        assert_eq!(expand("{3..1}"), ["3", "2", "1"]);
        assert_eq!(expand("{01..3}"), ["01", "02", "03"]);
        assert_eq!(expand("{1..10..4}"), ["1", "5", "9"]);
        assert_eq!(expand("{a..c}"), ["a", "b", "c"]);
        assert_eq!(expand("{a..1}"), ["{a..1}"]);
        assert_eq!(brace_expand("{1..100000}"), Err(BraceError::TooMany));
        assert_eq!(brace_expand("{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}"), Err(BraceError::TooMany));
    }
}
