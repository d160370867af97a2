//! Path analysis for file tools and shell arguments: where a path really points, lexically.
//!
//! Decides how much a path raises a call's tier: outside the workspace, `..` escapes, credential
//! stores, system locations, persistence locations and the agent's own policy files. It never
//! touches the filesystem (the gate is pure), so symlinks are not followed; a path that cannot
//! be resolved (relative with no known directory, or built from run-time values) is treated as
//! outside the workspace. It only ever adds friction.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use crate::decision::{ReasonCode, Tier};

/// Whether a call reads or writes a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// The directories a call may work in, and the home `~` stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workspace {
    /// The request's directory, when trusted and not too broad: the first root.
    cwd_root: Option<Arc<str>>,
    /// The configured roots, shared by every call's workspace (no copy per call).
    configured: Arc<[String]>,
    home: Arc<str>,
    /// Set when the request's directory was refused as a workspace (`/`, `~`, a system dir).
    pub too_broad: Option<Arc<str>>,
}

/// One reason a path raises the tier.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathFinding {
    pub code: ReasonCode,
    pub tier: Tier,
    pub path: String,
}

impl Workspace {
    /// Builds the workspace from the request's `cwd` (when trusted) and configured roots.
    pub fn new(cwd: Option<&str>, use_cwd: bool, extra_roots: &[String], home: &str) -> Self {
        let home = normalize(home);
        let mut configured = Vec::with_capacity(extra_roots.len());
        let mut too_broad = None;
        for root in extra_roots {
            let root = normalize(root);
            if is_too_broad(&root, &home) {
                too_broad = Some(root.into());
            } else {
                configured.push(root);
            }
        }
        let base = Self { cwd_root: None, configured: configured.into(), home: home.into(), too_broad };
        base.with_cwd(cwd, use_cwd)
    }

    /// The workspace of one call: `self` holds the configured roots (built once with no cwd),
    /// and the request's `cwd`, when trusted, comes first. Same result as [`Workspace::new`]
    /// with the cwd, without normalising or copying the configured roots again for every call
    /// (this runs for every call the gate judges).
    pub fn with_cwd(&self, cwd: Option<&str>, use_cwd: bool) -> Self {
        /// The last directory judged on this thread, with its normal form and whether it was
        /// refused: a deployment sends the same cwd call after call, and normalising it and
        /// checking it against every broad location was a fifth of a Read call's cost.
        struct Judged {
            raw: Box<str>,
            home: Arc<str>,
            normal: Arc<str>,
            too_broad: bool,
        }
        thread_local! {
            static LAST: std::cell::RefCell<Option<Judged>> = const { std::cell::RefCell::new(None) };
        }
        let Some(cwd) = cwd.filter(|_| use_cwd) else { return self.clone() };
        let (normal, refused) = LAST.with_borrow_mut(|last| match last {
            Some(judged) if *judged.raw == *cwd && Arc::ptr_eq(&judged.home, &self.home) => {
                (Arc::clone(&judged.normal), judged.too_broad)
            }
            _ => {
                let normal: Arc<str> = normalize(cwd).into();
                let too_broad = is_too_broad(&normal, &self.home);
                *last = Some(Judged {
                    raw: cwd.into(),
                    home: Arc::clone(&self.home),
                    normal: Arc::clone(&normal),
                    too_broad,
                });
                (normal, too_broad)
            }
        });
        let (cwd_root, too_broad) = if refused { (None, Some(normal)) } else { (Some(normal), None) };
        Self {
            cwd_root,
            configured: Arc::clone(&self.configured),
            home: Arc::clone(&self.home),
            // A refused configured root is reported before a refused cwd.
            too_broad: self.too_broad.clone().or(too_broad),
        }
    }

    /// The roots, the request's directory first.
    fn roots(&self) -> impl Iterator<Item = &str> {
        self.cwd_root.as_deref().into_iter().chain(self.configured.iter().map(String::as_str))
    }

    fn has_no_roots(&self) -> bool {
        self.cwd_root.is_none() && self.configured.is_empty()
    }

    pub fn home(&self) -> &str {
        &self.home
    }

    /// `directory` is exactly one of the roots (the common case of a command run in the cwd).
    pub fn is_root(&self, directory: &str) -> bool {
        self.roots().any(|root| root == directory)
    }

    pub fn contains(&self, resolved: &str) -> bool {
        self.roots().any(|root| is_within(resolved, root))
    }

    /// The path relative to the first workspace root that holds it.
    pub fn relative<'a>(&self, resolved: &'a str) -> Option<&'a str> {
        self.roots().find_map(|root| {
            if resolved == root {
                Some("")
            } else if root == "/" {
                resolved.strip_prefix('/')
            } else {
                resolved.strip_prefix(root).and_then(|rest| rest.strip_prefix('/'))
            }
        })
    }
}

/// A directory that must not serve as a workspace: the root, a home directory (`~`, or another
/// user's `/home/x`), a system location, or a dot-directory of the home (`~/.ssh`, `~/.aws`,
/// `~/.config/…`), where "inside the workspace" would cover credentials.
fn is_too_broad(root: &str, home: &str) -> bool {
    let another_home = ["/home/", "/Users/"]
        .iter()
        .any(|prefix| root.strip_prefix(prefix).is_some_and(|rest| !rest.is_empty() && !rest.contains('/')));
    let home_dot_directory = home_relative(root, home).is_some_and(|rest| rest.starts_with('.'));
    root == "/"
        || root == home
        || root == "/root"
        || root == "/run"
        || root == "/home"
        || root == "/Users"
        || another_home
        || home_dot_directory
        || system_location(root)
        || credential_location(root, home)
}

/// `path` is `root` or below it.
pub fn is_within(path: &str, root: &str) -> bool {
    if root == "/" {
        return true;
    }
    path == root || (path.starts_with(root) && path.as_bytes().get(root.len()) == Some(&b'/'))
}

/// Lexically normalises an absolute path: collapses `//` and `.`, applies `..` (never above `/`).
pub fn normalize(path: &str) -> String {
    normalized(path).into_owned()
}

/// [`normalize`], borrowing `path` when it is already normal.
fn normalized(path: &str) -> Cow<'_, str> {
    // Most paths are already normal (`/workspace/src/main.rs`): one scan, no copy.
    let normal = path == "/"
        || (path.starts_with('/')
            && !path.ends_with('/')
            && components(&path[1..]).all(|part| !matches!(part, "" | "." | "..")));
    if normal {
        return Cow::Borrowed(path);
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in components(path) {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    let mut out = String::with_capacity(path.len() + 1);
    for part in &parts {
        out.push('/');
        out.push_str(part);
    }
    if out.is_empty() {
        out.push('/');
    }
    Cow::Owned(out)
}

/// Resolves `raw` against `base` (the directory the call runs in) and `home`. `None` when the
/// path is relative and the directory is unknown.
pub fn resolve(raw: &str, base: Option<&str>, home: &str) -> Option<String> {
    resolve_borrowed(raw, base, home).map(Cow::into_owned)
}

/// [`resolve`], borrowing `raw` or `home` when either already is the normal absolute path: the
/// gate judges most paths without keeping them, so the usual absolute path costs no copy.
pub fn resolve_borrowed<'a>(raw: &'a str, base: Option<&str>, home: &'a str) -> Option<Cow<'a, str>> {
    if raw == "~" {
        return Some(normalized(home));
    }
    if let Some(rest) = raw.strip_prefix("~/") {
        return Some(Cow::Owned(normalize_joined(home, rest)));
    }
    if let Some(rest) = raw.strip_prefix('~') {
        // `~user/…` is another user's home.
        return Some(Cow::Owned(normalize_joined("/home", rest)));
    }
    if raw.starts_with('/') {
        return Some(normalized(raw));
    }
    base.map(|base| Cow::Owned(normalize_joined(base, raw)))
}

/// [`normalize`] of `directory/name`, keeping the joined text when it is already normal (one
/// allocation where `format!` and a copy made two).
fn normalize_joined(directory: &str, name: &str) -> String {
    let mut joined = String::with_capacity(directory.len() + 1 + name.len());
    joined.push_str(directory);
    joined.push('/');
    joined.push_str(name);
    let normal = match normalized(&joined) {
        Cow::Borrowed(_) => None,
        Cow::Owned(normal) => Some(normal),
    };
    normal.unwrap_or(joined)
}

/// Judges one path. `base` is the directory relative paths start from (the call's cwd, or the
/// directory a shell `cd` moved to; `None` when it is unknown).
pub fn judge(raw: &str, access: Access, base: Option<&str>, workspace: &Workspace) -> Vec<PathFinding> {
    judge_resolved(raw, resolve(raw, base, &workspace.home).as_deref(), access, workspace)
}

/// [`judge`] for a path already resolved with [`resolve`] (`None`: relative to an unknown
/// directory).
pub fn judge_resolved(raw: &str, resolved: Option<&str>, access: Access, workspace: &Workspace) -> Vec<PathFinding> {
    let mut findings = Vec::new();
    let Some(resolved) = resolved else {
        findings.push(PathFinding {
            code: if workspace.too_broad.is_some() || workspace.has_no_roots() {
                ReasonCode::NoWorkspace
            } else {
                ReasonCode::PathOutsideWorkspace
            },
            tier: Tier::High,
            path: raw.to_owned(),
        });
        return findings;
    };
    // Case-insensitive file systems (macOS's default APFS) fold a few non-ASCII letters onto
    // ASCII ones (`.claude/ſettings.json` is `.claude/settings.json`): the rules see the fold.
    let folded;
    let resolved = if resolved.is_ascii() {
        resolved
    } else {
        folded = fold_onto_ascii(resolved);
        folded.as_str()
    };
    let mut add = |code, tier| findings.push(PathFinding { code, tier, path: resolved.to_owned() });
    // The fold above names the protected file for the common letters, but no list is the whole
    // story: APFS also folds `ß` and `ẞ` onto `ss` (red-team round 38), and HFS+ ignores
    // zero-width joiners in names. A path the gate vouches for is ASCII, so the name it judged
    // is the file the program opens.
    if !resolved.is_ascii() {
        add(ReasonCode::MalformedArguments, Tier::High);
    }

    if harmless_device(resolved, access) || (access == Access::Read && public_file(resolved, &workspace.home)) {
        return findings;
    }
    if process_secret(resolved) {
        // Another process's environment, memory or command line holds its secrets.
        add(ReasonCode::CredentialPath, Tier::High);
    }
    if access == Access::Write && home_dotfile(resolved, &workspace.home) {
        add(ReasonCode::PersistencePath, Tier::High);
    }
    // The write checks below compare the path as a case-insensitive file system sees it:
    // lowercased and split once here for all three, not once in each.
    let lower = if access == Access::Write { comparable(resolved) } else { String::new() };
    let lower_components: Vec<&str> = if access == Access::Write { components(&lower).collect() } else { Vec::new() };
    if access == Access::Write
        && let Some(code) = workspace_config(&lower_components)
    {
        add(code, Tier::High);
    }
    if access == Access::Write && critical_write_target(resolved, &workspace.home) {
        add(ReasonCode::CriticalCommand, Tier::Critical);
    }
    if credential_location(resolved, &workspace.home) || (access == Access::Read && repository_internals(resolved)) {
        add(ReasonCode::CredentialPath, Tier::High);
    }
    if access == Access::Write && persistence_location(resolved, &lower_components, &workspace.home) {
        add(ReasonCode::PersistencePath, Tier::High);
    }
    if access == Access::Write && agent_policy_location(resolved, &workspace.home) {
        add(ReasonCode::AgentPolicyPath, Tier::High);
    }
    if access == Access::Write && ci_config_location(&lower, &lower_components) {
        add(ReasonCode::CiConfigPath, Tier::High);
    }
    if system_location(resolved) {
        add(ReasonCode::SystemPath, Tier::High);
    }
    if !workspace.contains(resolved) {
        let climbs = components(raw).any(|part| part == "..");
        let code = if workspace.has_no_roots() {
            ReasonCode::NoWorkspace
        } else if climbs {
            ReasonCode::PathEscape
        } else {
            ReasonCode::PathOutsideWorkspace
        };
        add(code, Tier::High);
    }
    // Tools read dotfiles and dot-directories as their configuration, and new ones that run
    // commands keep appearing (Volta's hooks, `.bazeliskrc`, `.lfsconfig`, an agent's rules
    // folder): no list of them is complete. A write under a dot-name in the workspace is
    // therefore at least `high` unless the name is one that only holds data.
    if access == Access::Write
        && findings.is_empty()
        && let Some(rest) = workspace.relative(resolved)
        && components(rest).any(dot_name_runs_tools)
    {
        findings.push(PathFinding { code: ReasonCode::PersistencePath, tier: Tier::High, path: resolved.to_owned() });
    }
    findings
}

/// Dot-names that hold only data no tool runs: ignore lists for formatters and packagers,
/// placeholders, editor settings without commands, and sample environment files.
const DATA_DOT_NAMES: [&str; 11] = [
    ".editorconfig",
    ".gitkeep",
    ".keep",
    ".nojekyll",
    ".dockerignore",
    ".npmignore",
    ".prettierignore",
    ".eslintignore",
    ".env.example",
    ".env.sample",
    ".env.template",
];

/// Whether a path component is a dot-name some tool may read as configuration.
fn dot_name_runs_tools(component: &str) -> bool {
    component.starts_with('.')
        && !matches!(component, "." | "..")
        && !DATA_DOT_NAMES.iter().any(|name| component.eq_ignore_ascii_case(name))
}

/// Replaces the characters whose Unicode case folding is ASCII (long s, the Kelvin sign, the
/// Latin ligatures) by that ASCII text; other characters are kept.
fn fold_onto_ascii(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        match c {
            '\u{17F}' => out.push('s'),
            '\u{212A}' => out.push('k'),
            '\u{FB00}' => out.push_str("ff"),
            '\u{FB01}' => out.push_str("fi"),
            '\u{FB02}' => out.push_str("fl"),
            '\u{FB03}' => out.push_str("ffi"),
            '\u{FB04}' => out.push_str("ffl"),
            '\u{FB05}' | '\u{FB06}' => out.push_str("st"),
            other => out.push(other),
        }
    }
    out
}

/// A descriptor path: opening it opens whatever the descriptor refers to again.
pub fn is_descriptor_path(path: &str) -> bool {
    matches!(path, "/dev/stdin" | "/dev/stdout" | "/dev/stderr" | "/dev/fd") || path.starts_with("/dev/fd/")
}

/// A redirection target that opens no file onto the descriptor: a device that is only a
/// stream, or another descriptor path.
pub fn is_stream_device(target: &str) -> bool {
    // Not `/dev/tty`: it is the person's own terminal, outside the host's capture, where
    // escape sequences set the clipboard (OSC 52) and a read takes their keystrokes (round 40).
    matches!(target, "/dev/null" | "/dev/zero" | "/dev/urandom" | "/dev/random") || is_descriptor_path(target)
}

fn harmless_device(path: &str, access: Access) -> bool {
    match path {
        "/dev/null" | "/dev/stdout" | "/dev/stderr" => true,
        // Not `/dev/zero`, `/dev/urandom` or `/dev/random`: they never end, so `sort -u
        // /dev/urandom` fills the disk with temporary files and `grep x /dev/zero` the
        // memory (red-team round 43).
        "/dev/stdin" => access == Access::Read,
        // Exactly `/dev/fd/N`: a path through one (`/dev/fd/3/../home`) follows an open
        // directory, and `..` after a link cannot be resolved by its text.
        _ => path
            .strip_prefix("/dev/fd/")
            .is_some_and(|fd| !fd.is_empty() && fd.bytes().all(|byte| byte.is_ascii_digit())),
    }
}

/// Files outside the workspace that are public by design, readable by every user and holding
/// no credential: the OS release files (freedesktop `os-release(5)`), the host table, kernel
/// and hardware summaries, and an SSH public key (`~/.ssh/NAME.pub`, the half that is handed
/// out; the agent cannot write there, so it cannot plant one).
const PUBLIC_SYSTEM_FILES: [&str; 14] = [
    "/etc/os-release",
    "/usr/lib/os-release",
    "/etc/lsb-release",
    "/etc/debian_version",
    "/etc/alpine-release",
    "/etc/redhat-release",
    "/etc/hosts",
    "/etc/timezone",
    "/etc/shells",
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/version",
    "/proc/loadavg",
    "/proc/uptime",
];

fn public_file(path: &str, home: &str) -> bool {
    // Most paths judged are in the workspace: a suffix test first keeps this off their cost.
    if path.ends_with(".pub") {
        return home_relative(path, home)
            .and_then(|rest| rest.strip_prefix(".ssh/"))
            .is_some_and(|name| name.len() > ".pub".len() && !name.contains('/') && !name.starts_with('.'));
    }
    (path.starts_with("/etc/") || path.starts_with("/proc/") || path.starts_with("/usr/lib/"))
        && PUBLIC_SYSTEM_FILES.contains(&path)
}

fn home_relative<'a>(path: &'a str, home: &str) -> Option<&'a str> {
    path.strip_prefix(home).and_then(|rest| rest.strip_prefix('/'))
}

fn basename(path: &str) -> &str {
    // A byte scan, as `path.rsplit('/').next()` gives it: `/` is ASCII, so the cut is on a
    // character boundary, and `str::rsplit`'s char searcher cost several times as much here.
    match path.bytes().rposition(|byte| byte == b'/') {
        Some(slash) => &path[slash + 1..],
        None => path,
    }
}

/// Writes that are catastrophic on their own: raw disks and `authorized_keys`.
fn critical_write_target(path: &str, home: &str) -> bool {
    const DISKS: [&str; 6] = ["/dev/sd", "/dev/nvme", "/dev/hd", "/dev/vd", "/dev/disk", "/dev/mmcblk"];
    DISKS.iter().any(|disk| path.starts_with(disk))
        || path == "/dev/mem"
        || path == "/dev/kmem"
        || home_relative(path, home)
            .is_some_and(|rest| rest == ".ssh/authorized_keys" || rest == ".ssh/authorized_keys2")
        || path.ends_with("/.ssh/authorized_keys")
}

/// A path as a case-insensitive file system sees it, with the trailing dots and blanks Windows
/// drops from each component (`.git./config` is `.git/config` there).
fn comparable(path: &str) -> String {
    let lower = path.to_ascii_lowercase();
    // Most paths have no component ending in a dot or a blank: nothing to drop.
    if !lower.contains("./") && !lower.contains(" /") && !lower.ends_with(['.', ' ']) {
        return lower;
    }
    components(&lower).map(|component| component.trim_end_matches(['.', ' '])).collect::<Vec<_>>().join("/")
}

/// The components of a path between `/`s, as `path.split('/')` gives them, found by a byte
/// scan: this runs several times for every path judged, and `str::split` with a `char`
/// pattern cost about a hundred instructions per component.
fn components(path: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(path);
    std::iter::from_fn(move || {
        let current = rest?;
        match current.bytes().position(|byte| byte == b'/') {
            Some(slash) => {
                rest = current.get(slash + 1..);
                current.get(..slash)
            }
            None => {
                rest = None;
                Some(current)
            }
        }
    })
}

/// File names that hold secrets wherever they are (`name` is lowercased). A `match`, which
/// compiles to a switch on the length and a few comparisons: this runs for every path judged.
fn is_sensitive_listed_name(name: &str) -> bool {
    matches!(
        name,
        ".env"
        // Yarn's `npmAuthToken` and Composer's registry tokens.
        | ".yarnrc.yml"
        | "auth.json"
        // Google: Firebase Admin's documented key name, `gcloud iam service-accounts keys create
        // key.json`, the API quickstarts' refresh token, gcloud's application default credentials.
        | "serviceaccountkey.json"
        | "key.json"
        | "token.json"
        | "application_default_credentials.json"
        // Cloud and registry CLIs' credential files, wherever a project keeps a copy.
        | "kubeconfig"
        | ".s3cfg"
        | ".boto"
        | "_netrc"
        | ".dockercfg"
        | ".terraformrc"
        | "rclone.conf"
        | ".databrickscfg"
        | "credentials.toml"
        | "id_rsa"
        | "id_dsa"
        | "id_ecdsa"
        | "id_ed25519"
        | ".netrc"
        | ".git-credentials"
        | ".npmrc"
        | ".pypirc"
        | ".pgpass"
        | ".my.cnf"
        | ".vault-token"
        | "credentials"
        | "credentials.json"
        | ".htpasswd"
        | "secrets.yml"
        | ".envrc"
        | ".bash_history"
        | ".zsh_history"
        | ".python_history"
        // Sentry's auth token; Android's signing passwords (round 39).
        | ".sentryclirc"
        | "keystore.properties"
        // Round 48: Flutter's Android signing passwords, Azure Functions' connection strings,
        // Sublime SFTP's and Atom's FTP passwords, a GnuPG secret keyring, database shell histories.
        | "key.properties"
        // Round 54: WordPress keeps its database password and auth salts here.
        | "wp-config.php"
        | "local.settings.json"
        | "sftp-config.json"
        | ".ftpconfig"
        | "secring.gpg"
        | ".mysql_history"
        | ".psql_history"
    )
}
/// File extensions (after the last dot) of key stores and secret files.
/// `ppk` (PuTTY keys), `ovpn` (OpenVPN profiles, keys inline), `keytab` (Kerberos), `authinfo`
/// (the netrc-format store of Emacs, magit and forge).
const SENSITIVE_EXTENSIONS: [&str; 14] = [
    "pem", "key", "p12", "p8", "pfx", "keystore", "jks", "kdbx", "tfstate", "env", "ppk", "ovpn", "keytab", "authinfo",
];

/// A bare file name (or the last component of a path) that holds secrets: `.env`, `.env.local`
/// (not `.env.example`), SSH private keys, `.netrc`, `*.pem`, `*.key`…
pub fn is_sensitive_name(name: &str) -> bool {
    // Lowercased on the stack for the usual short name (this runs for every path judged).
    let base = basename(name);
    let mut buffer = [0u8; 64];
    let owned;
    let name: &str = match buffer.get_mut(..base.len()) {
        // Most names have no capital letter: nothing to copy.
        _ if !base.bytes().any(|byte| byte.is_ascii_uppercase()) => base,
        Some(slot) => {
            slot.copy_from_slice(base.as_bytes());
            slot.make_ascii_lowercase();
            // ASCII lowercasing keeps UTF-8 valid; the fallback is never taken.
            match std::str::from_utf8(slot) {
                Ok(lower) => lower,
                Err(_) => {
                    owned = base.to_ascii_lowercase();
                    &owned
                }
            }
        }
        None => {
            owned = base.to_ascii_lowercase();
            &owned
        }
    };
    // A copy of a secret is a secret: `.git-credentials.bak`, `terraform.tfstate.backup`,
    // `id_rsa~` are judged as the name they copy (red-team round 39).
    let mut name = name;
    // Every suffix ends in one of these bytes: most names are passed over on one comparison.
    while name.as_bytes().last().is_some_and(|last| b"kpdgey~".contains(last))
        && let Some(original) =
            BACKUP_SUFFIXES.iter().find_map(|suffix| name.strip_suffix(suffix)).filter(|rest| !rest.is_empty())
    {
        name = original;
    }
    // The text after the last dot: one comparison against each listed extension (`.pem` and
    // the others hold no dot of their own), instead of a suffix test per extension.
    // A byte scan (`.` is ASCII), as `name.rsplit_once('.')` finds it.
    let extension = name.bytes().rposition(|byte| byte == b'.').map(|dot| &name[dot + 1..]);
    // Public keys are meant to be shared.
    if extension == Some("pub") {
        return false;
    }
    let env_file = (name == ".env" || name.starts_with(".env."))
        && !matches!(extension, Some("example" | "sample" | "template" | "dist"));
    env_file
        || contains_bytes(name, "secret")
        || name == ".dev.vars"
        || is_sensitive_listed_name(name)
        // `credentials.csv` (the AWS console's key download), `credentials.yml.enc`…
        || name.starts_with("credentials")
        // `kubeconfig.yaml`, `kubeconfig-prod`; Ansible's vault password files
        // (`.vault_pass`, `vault_pass.txt`, `.vault-password`); GCP service-account keys.
        || name.starts_with("kubeconfig")
        || ["vault_pass", ".vault_pass", "vault-pass", ".vault-pass", "vault_password", ".vault_password", "vault-password", ".vault-password", "service-account", "service_account"]
            .iter()
            .any(|prefix| name.starts_with(prefix))
        || (name.starts_with("id_") && ["id_rsa", "id_ed25519", "id_ecdsa", "id_dsa"].iter().any(|key| name.starts_with(key)))
        // `ssh-keygen -f deploy_key` writes a private key with no extension; Firebase's
        // service-account download; Kerberos ticket caches; WireGuard configs (`PrivateKey`).
        || (extension.is_none() && (name.ends_with("_key") || name.ends_with("-key")))
        || contains_bytes(name, "firebase-adminsdk")
        || name.starts_with("krb5cc")
        || (name.starts_with("wg") && extension == Some("conf"))
        || contains_bytes(name, "wireguard")
        || extension.is_some_and(|extension| extension == "tfvars" || SENSITIVE_EXTENSIONS.contains(&extension))
}

/// Whether `needle` occurs in `haystack`: a window scan, which for the short names judged here
/// costs less than setting up `str::contains`'s two-way searcher (a hundred instructions).
fn contains_bytes(haystack: &str, needle: &str) -> bool {
    haystack.len() >= needle.len()
        && haystack.as_bytes().windows(needle.len()).any(|window| window == needle.as_bytes())
}

/// Suffixes editors, tools and people give a copy: stripped before a name is judged; each ends
/// in a byte of `kpdgey~` (checked by a test).
const BACKUP_SUFFIXES: [&str; 9] = [".bak", ".backup", ".old", ".orig", ".save", ".swp", ".tmp", ".copy", "~"];

/// Whether one path component's glob (`*`, `?`, `[…]` with `!`/`^` and ranges) matches `name`,
/// as bash matches a file name. Hand-written rather than `globset`: the patterns come from each
/// request, and compiling a regex per word cost tens of microseconds on the gate's hot path.
/// An unclosed `[` is a literal, as in bash.
pub fn component_glob_matches(pattern: &str, name: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let name: Vec<char> = name.chars().collect();
    // Iterative matching with one backtrack point for the last `*` (linear for `*` runs).
    let (mut p, mut n) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        let step = match pattern.get(p) {
            Some('*') => {
                star = Some((p, n));
                p += 1;
                continue;
            }
            Some('?') => Some(p + 1),
            Some('[') => match bracket(&pattern, p, name[n]) {
                Some((true, next)) => Some(next),
                Some((false, _)) => None,
                None => (name[n] == '[').then_some(p + 1),
            },
            Some('\\') if p + 1 < pattern.len() => (pattern[p + 1] == name[n]).then_some(p + 2),
            Some(c) => (*c == name[n]).then_some(p + 1),
            None => None,
        };
        match step {
            Some(next) => {
                p = next;
                n += 1;
            }
            None => match star {
                Some((star_p, star_n)) => {
                    p = star_p + 1;
                    n = star_n + 1;
                    star = Some((star_p, star_n + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|c| *c == '*')
}

/// Matches `c` against the bracket expression starting at `pattern[open]`: `(matched, index after
/// the closing bracket)`, or `None` when the bracket is never closed.
fn bracket(pattern: &[char], open: usize, c: char) -> Option<(bool, usize)> {
    let mut index = open + 1;
    let negated = matches!(pattern.get(index), Some('!' | '^'));
    if negated {
        index += 1;
    }
    let mut matched = false;
    let mut first = true;
    while let Some(&current) = pattern.get(index) {
        if current == ']' && !first {
            return Some((matched != negated, index + 1));
        }
        first = false;
        if pattern.get(index + 1) == Some(&'-') && pattern.get(index + 2).is_some_and(|end| *end != ']') {
            let end = pattern[index + 2];
            matched |= current <= c && c <= end;
            index += 3;
        } else {
            matched |= current == c;
            index += 1;
        }
    }
    None
}

/// Whether a glob (`.en?`, `.env*`, `*.pem`, `~/.ss?/id_rs?`, `.git/hook?/x`) could match a
/// credential file or a repository-control directory. A wildcard component is tested against
/// sample sensitive names, following bash (`*` does not match a leading dot); a bare `*`
/// carries no intent and is not flagged. Plain paths return `false`.
pub fn glob_may_match_sensitive(raw: &str) -> bool {
    if !has_glob_character(raw) {
        return false;
    }
    raw.to_ascii_lowercase().split('/').filter(|component| component.contains(['*', '?', '['])).any(|component| {
        // A bracket expression may hold a class (`[[:punct:]]` matches the `.` of `.env`),
        // an equivalence class or a range whose ends lowercasing moved (`[Z-f]`): each one
        // counts as any one character.
        let widened;
        let component = if component.contains('[') {
            widened = widen_brackets(component);
            widened.as_str()
        } else {
            component
        };
        let literal = component.chars().filter(|c| !"*?[]!".contains(*c)).count();
        if literal < 2 && !component.starts_with('.') {
            return false;
        }
        SENSITIVE_SAMPLES
            .iter()
            .filter(|sample| component.starts_with('.') || !sample.starts_with('.'))
            .any(|sample| component_glob_matches(component, sample))
    })
}

/// Whether `raw` holds `*`, `?` or `[`. A byte scan (the three are ASCII): this runs for every
/// path judged, and most have none. A fold without an early exit, which the compiler turns
/// into vector instructions.
pub(crate) fn has_glob_character(raw: &str) -> bool {
    raw.bytes().fold(false, |found, byte| found | matches!(byte, b'*' | b'?' | b'['))
}

/// [`glob_may_match_sensitive`] for a shell word, whose files a program reads: a wildcard is
/// vouched for only in a shape that cannot spell part of one distinctive name. Every
/// component with a wildcard must be all `*` (`src/*`, `**`) or `*.EXT`, with EXT a plain
/// extension that is no secret's (`*.rs`, `*.json`; not `*.pem`, `*.bak`). `server.?em`,
/// `s?rvice-account.json`, `.*.production`, `id_*` and `test_*.py` are not vouched for: a
/// sample list cannot name every secret a `?` or a prefix could complete (red-team round 59).
/// A `*.EXT` may still match a secret by accident (`secrets.json`), as the glob rule allows.
pub fn shell_glob_may_match_sensitive(raw: &str) -> bool {
    if !has_glob_character(raw) {
        return false;
    }
    // Without allocating: this runs for every glob word judged. For these two shapes the
    // sample check of [`glob_may_match_sensitive`] reduces to: does a sample not starting
    // with a dot (bash's `*` skips a leading one) end in `.EXT` (`*.md` and `claude.md`).
    raw.split('/').filter(|component| component.contains(['*', '?', '['])).any(|component| {
        if component.bytes().all(|byte| byte == b'*') {
            return false;
        }
        let Some(extension) = component.strip_prefix("*.") else { return true };
        let named = |list: &[&str]| list.iter().any(|listed| listed.eq_ignore_ascii_case(extension));
        let backup = BACKUP_SUFFIXES
            .iter()
            .any(|suffix| suffix.strip_prefix('.').is_some_and(|bare| bare.eq_ignore_ascii_case(extension)));
        let sample_ends_so = SENSITIVE_SAMPLES.iter().any(|sample| {
            !sample.starts_with('.')
                && sample.len() > extension.len() + 1
                && sample.as_bytes()[sample.len() - extension.len() - 1] == b'.'
                && sample[sample.len() - extension.len()..].eq_ignore_ascii_case(extension)
        });
        !(1..=10).contains(&extension.len())
            || !extension.bytes().all(|byte| byte.is_ascii_alphanumeric())
            || named(&SENSITIVE_EXTENSIONS)
            || extension.eq_ignore_ascii_case("pub")
            || backup
            || sample_ends_so
    })
}

/// A glob component with each bracket expression (`[…]`, classes, negations and escapes
/// included) replaced by `?`, which matches whatever any of them could. A `[` whose end it
/// cannot place becomes `*` with the rest of the component: over-matching is the safe side
/// (red-team round 57: `[!\[:]` closes at its own `]` in bash, and read as a class it did not).
fn widen_brackets(component: &str) -> String {
    let chars: Vec<char> = component.chars().collect();
    let mut out = String::with_capacity(component.len());
    let mut index = 0;
    while index < chars.len() {
        match chars[index] {
            '\\' => {
                // An escaped character outside brackets is itself.
                out.extend(chars.get(index..index + 2).unwrap_or(&chars[index..]));
                index += 2;
            }
            '[' => match bracket_end(&chars, index) {
                Some(end) => {
                    out.push('?');
                    index = end + 1;
                }
                None => {
                    out.push('*');
                    return out;
                }
            },
            other => {
                out.push(other);
                index += 1;
            }
        }
    }
    out
}

/// The index of the `]` closing the bracket expression opened at `chars[open]`, as bash reads
/// it: a `]` first in the set (after `!`/`^`) is a member, `\` escapes the next character,
/// and `[:…:]`, `[=…=]`, `[.….]` are read whole. `None` when no `]` closes it.
fn bracket_end(chars: &[char], open: usize) -> Option<usize> {
    let mut end = open + 1;
    if matches!(chars.get(end), Some('!' | '^')) {
        end += 1;
    }
    if chars.get(end) == Some(&']') {
        end += 1;
    }
    while end < chars.len() {
        match chars[end] {
            ']' => return Some(end),
            '\\' => end += 2,
            '[' if matches!(chars.get(end + 1), Some(':' | '=' | '.')) => {
                let delimiter = chars[end + 1];
                let close = (end + 2..chars.len().saturating_sub(1))
                    .find(|&at| chars[at] == delimiter && chars[at + 1] == ']')?;
                end = close + 2;
            }
            _ => end += 1,
        }
    }
    None
}

/// Names a wildcard is tried against to tell whether it may reach a secret or a
/// repository-control entry: credential files, one name per secret extension
/// ([`SENSITIVE_EXTENSIONS`], so `*.p12` is caught), agents' and shells' configuration, `.git`.
/// `..` too: dash, and bash before 5.2 (or with `globskipdots` off), let `.[.]` and `.?` match
/// the parent entry, so `.[.]/.[.]/home` climbs out (red-team round 37).
const SENSITIVE_SAMPLES: [&str; 44] = [
    "..",
    ".env",
    ".env.local",
    "id_rsa",
    "id_ed25519",
    ".netrc",
    ".git-credentials",
    "server.key",
    "cert.pem",
    ".npmrc",
    ".pgpass",
    ".ssh",
    ".aws",
    ".git",
    "hooks",
    "credentials",
    ".claude",
    "claude.md",
    "agents.md",
    ".envrc",
    ".husky",
    ".vscode",
    ".mcp.json",
    "master.key",
    "terraform.tfstate",
    ".gitconfig",
    ".bashrc",
    "secrets.yml",
    "x.p12",
    "x.p8",
    "x.pfx",
    "x.keystore",
    "x.jks",
    "x.kdbx",
    "x.tfvars",
    "x.ppk",
    "x.ovpn",
    "x.keytab",
    "x.authinfo",
    "id_ecdsa",
    "id_dsa",
    "kubeconfig",
    ".vault_pass",
    "x.env",
];

fn credential_location(path: &str, home: &str) -> bool {
    const HOME_DIRS: [&str; 14] = [
        ".ssh",
        ".aws",
        ".gnupg",
        ".config/gcloud",
        ".azure",
        ".kube",
        ".password-store",
        ".config/gh",
        ".docker",
        ".terraform.d",
        ".config/op",
        ".local/share/keyrings",
        "Library/Keychains",
        ".mozilla/firefox",
    ];
    const HOME_FILES: [&str; 7] =
        [".netrc", ".git-credentials", ".npmrc", ".pypirc", ".vault-token", ".pgpass", ".my.cnf"];
    const SYSTEM_FILES: [&str; 4] = ["/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/master.passwd"];
    if let Some(rest) = home_relative(path, home)
        && (HOME_DIRS.iter().any(|dir| is_within(rest, dir)) || HOME_FILES.contains(&rest))
    {
        return true;
    }
    const CREDENTIAL_COMPONENTS: [&str; 8] =
        [".ssh", ".aws", ".gnupg", ".kube", ".docker", ".azure", "secrets", ".secrets"];
    if SYSTEM_FILES.contains(&path)
        || components(path).any(|component| {
            // Every listed name starts with `.` or `s`: most components are passed over at once.
            matches!(component.as_bytes().first(), Some(b'.' | b's' | b'S'))
                && CREDENTIAL_COMPONENTS.iter().any(|credential| component.eq_ignore_ascii_case(credential))
        })
    {
        return true;
    }
    is_sensitive_name(path)
}

/// Inside a `.git` directory: its config holds tokens (`http.<url>.extraheader`, written by
/// CI checkouts; `https://user:token@host` remotes), and a search of `.git` prints them. A
/// read is a credential read; writes there are persistence (hooks, config). `.git/HEAD` only
/// names the checked-out branch.
fn repository_internals(path: &str) -> bool {
    !path.ends_with("/.git/HEAD")
        && components(path).any(|component| component.len() == 4 && component.eq_ignore_ascii_case(".git"))
}

/// `lower_components` are the components of [`comparable`]`(path)`.
fn persistence_location(path: &str, lower_components: &[&str], home: &str) -> bool {
    const HOME_FILES: [&str; 12] = [
        ".bashrc",
        ".bash_profile",
        ".bash_login",
        ".bash_logout",
        ".profile",
        ".zshrc",
        ".zprofile",
        ".zshenv",
        ".zlogin",
        ".config/fish/config.fish",
        ".ssh/config",
        ".ssh/rc",
    ];
    const HOME_DIRS: [&str; 4] =
        [".config/autostart", ".config/systemd", "Library/LaunchAgents", ".local/share/systemd"];
    const SYSTEM_DIRS: [&str; 9] = [
        "/etc/cron.d",
        "/etc/cron.daily",
        "/etc/cron.hourly",
        "/etc/cron.weekly",
        "/etc/cron.monthly",
        "/var/spool/cron",
        "/etc/systemd",
        "/etc/init.d",
        "/etc/profile.d",
    ];
    if let Some(rest) = home_relative(path, home)
        && (HOME_FILES.contains(&rest) || HOME_DIRS.iter().any(|dir| is_within(rest, dir)))
    {
        return true;
    }
    // Anything under a `.git` directory (config, hooks, commondir, modules) or a `.git` file
    // (a gitfile redirect) controls what git runs. Compared case-insensitively: macOS and
    // Windows file systems are.
    let repository_control = lower_components.contains(&".git");
    repository_control
        || path == "/etc/crontab"
        || path == "/etc/profile"
        || path == "/etc/bash.bashrc"
        || path == "/etc/rc.local"
        || SYSTEM_DIRS.iter().any(|dir| is_within(path, dir))
}

fn agent_policy_location(path: &str, home: &str) -> bool {
    if let Some(rest) = home_relative(path, home)
        && [".claude", ".codex", ".cursor", ".config/permit"].iter().any(|dir| is_within(rest, dir))
    {
        return true;
    }
    false
}

/// CI pipeline definitions: editing one changes what runs with the repository's secrets and
/// which checks guard a merge, so it is never a routine edit.
/// `lower` is [`comparable`]`(path)` and `components` its components.
fn ci_config_location(lower: &str, components: &[&str]) -> bool {
    let within = |first: &str, second: Option<&str>| {
        components.windows(2).any(|pair| pair[0] == first && second.is_none_or(|second| pair[1] == second))
    };
    // Directories whose every file a CI service reads: writing the directory itself (`mv draft
    // .github`) creates whatever the draft holds. Gitea and Forgejo run `.gitea/workflows` and
    // `.forgejo/workflows` like GitHub's (red-team round 36).
    const CI_DIRECTORIES: [&str; 9] = [
        ".circleci",
        ".buildkite",
        ".woodpecker",
        ".semaphore",
        ".tekton",
        ".harness",
        ".teamcity",
        ".gitlab",
        ".drone",
    ];
    const FORGE_DIRECTORIES: [&str; 3] = [".github", ".gitea", ".forgejo"];
    // Pipeline files CI services read from the repository root (and wherever a monorepo
    // points them).
    const CI_FILES: [&str; 24] = [
        ".gitlab-ci.yml",
        ".gitlab-ci.yaml",
        "jenkinsfile",
        "azure-pipelines.yml",
        "azure-pipelines.yaml",
        "bitbucket-pipelines.yml",
        ".travis.yml",
        ".drone.yml",
        ".drone.yaml",
        "cloudbuild.yaml",
        "cloudbuild.yml",
        ".woodpecker.yml",
        ".woodpecker.yaml",
        ".cirrus.yml",
        ".cirrus.star",
        "appveyor.yml",
        ".appveyor.yml",
        "buildspec.yml",
        "buildspec.yaml",
        "codemagic.yaml",
        "bitrise.yml",
        "wercker.yml",
        ".gitpod.yml",
        "render.yaml",
    ];
    components.last().is_some_and(|last| CI_DIRECTORIES.contains(last) || FORGE_DIRECTORIES.contains(last))
        || FORGE_DIRECTORIES.iter().any(|forge| within(forge, Some("workflows")) || within(forge, Some("actions")))
        || CI_DIRECTORIES.iter().any(|directory| within(directory, None))
        || CI_FILES.contains(&basename(lower))
}

/// `/proc/PID/environ`, `mem`, `cmdline` and friends (also `self`, `thread-self`, tasks):
/// other processes' secrets.
fn process_secret(path: &str) -> bool {
    const SECRETS: [&str; 8] = ["environ", "mem", "cmdline", "maps", "auxv", "fd", "root", "cwd"];
    let Some(rest) = path.strip_prefix("/proc/") else { return false };
    components(rest).skip(1).any(|component| SECRETS.contains(&component))
}

/// Any dotfile or dot-directory directly under home (`~/.bashrc`, `~/.config/…`, `~/.ssh/…`,
/// `~/.local/…`): shell start-up, autostart entries, tool and agent configuration. Writing one
/// is never routine for an agent working in a repository.
fn home_dotfile(path: &str, home: &str) -> bool {
    home_relative(path, home).is_some_and(|rest| rest.starts_with('.'))
}

/// Configuration inside a workspace that other agents, editors and tools read and obey or run:
/// a write to any path with one of these components (compared case-insensitively, as macOS and
/// Windows file systems do) is at least `high`. `(name, code, who reads it)`.
pub static WORKSPACE_CONFIG: &[(&str, ReasonCode, &str)] = &[
    // Agents: instructions, rules, settings and MCP server lists.
    (".claude", ReasonCode::AgentPolicyPath, "Claude Code settings, hooks, commands and subagents"),
    ("claude.md", ReasonCode::AgentPolicyPath, "Claude Code project memory"),
    ("claude.local.md", ReasonCode::AgentPolicyPath, "Claude Code local memory"),
    (".mcp.json", ReasonCode::AgentPolicyPath, "Claude Code project MCP servers"),
    ("mcp.json", ReasonCode::AgentPolicyPath, "VS Code, Cursor and other MCP server lists"),
    (".codex", ReasonCode::AgentPolicyPath, "Codex configuration"),
    ("agents.md", ReasonCode::AgentPolicyPath, "AGENTS.md instructions (Codex and others)"),
    ("agents.override.md", ReasonCode::AgentPolicyPath, "Codex instruction overrides"),
    (".cursor", ReasonCode::AgentPolicyPath, "Cursor rules and MCP servers"),
    (".cursorrules", ReasonCode::AgentPolicyPath, "Cursor rules"),
    (".cursorignore", ReasonCode::AgentPolicyPath, "Cursor ignore list"),
    (".windsurf", ReasonCode::AgentPolicyPath, "Windsurf rules and workflows"),
    (".windsurfrules", ReasonCode::AgentPolicyPath, "Windsurf rules"),
    (".codeium", ReasonCode::AgentPolicyPath, "Codeium configuration"),
    (".gemini", ReasonCode::AgentPolicyPath, "Gemini CLI settings"),
    ("gemini.md", ReasonCode::AgentPolicyPath, "Gemini CLI instructions"),
    (".clinerules", ReasonCode::AgentPolicyPath, "Cline rules"),
    (".roo", ReasonCode::AgentPolicyPath, "Roo Code rules and MCP servers"),
    (".roomodes", ReasonCode::AgentPolicyPath, "Roo Code modes"),
    (".kiro", ReasonCode::AgentPolicyPath, "Kiro steering and hooks"),
    (".continue", ReasonCode::AgentPolicyPath, "Continue configuration"),
    (".continuerc.json", ReasonCode::AgentPolicyPath, "Continue workspace configuration"),
    (".agent", ReasonCode::AgentPolicyPath, "Antigravity's older rules and workflows folder"),
    (".opencode.json", ReasonCode::AgentPolicyPath, "opencode configuration (MCP servers, LSP commands)"),
    (".qoder", ReasonCode::AgentPolicyPath, "Qoder rules"),
    (".lingma", ReasonCode::AgentPolicyPath, "Lingma rules"),
    (".zencoder", ReasonCode::AgentPolicyPath, "Zencoder rules"),
    (".devin", ReasonCode::AgentPolicyPath, "Devin configuration"),
    (".aider.conf.yml", ReasonCode::AgentPolicyPath, "aider configuration"),
    (".junie", ReasonCode::AgentPolicyPath, "Junie guidelines"),
    (".amazonq", ReasonCode::AgentPolicyPath, "Amazon Q rules"),
    (".augment", ReasonCode::AgentPolicyPath, "Augment rules"),
    (".goosehints", ReasonCode::AgentPolicyPath, "goose hints"),
    (".opencode", ReasonCode::AgentPolicyPath, "opencode agents and commands"),
    ("opencode.json", ReasonCode::AgentPolicyPath, "opencode configuration and MCP servers"),
    (".zed", ReasonCode::AgentPolicyPath, "Zed settings, tasks and context servers"),
    (".helix", ReasonCode::PersistencePath, "Helix languages.toml (language-server commands run on open)"),
    (".crush.json", ReasonCode::AgentPolicyPath, "Crush configuration and MCP servers (read before crush.json)"),
    ("opencode.jsonc", ReasonCode::AgentPolicyPath, "opencode configuration and MCP servers"),
    (".roorules", ReasonCode::AgentPolicyPath, "Roo Code rules"),
    (".kilocodemodes", ReasonCode::AgentPolicyPath, "Kilo Code modes"),
    (".continuerules", ReasonCode::AgentPolicyPath, "Continue rules"),
    (".aiassistant", ReasonCode::AgentPolicyPath, "JetBrains AI Assistant rules"),
    (".github/skills", ReasonCode::AgentPolicyPath, "GitHub Copilot agent skills"),
    (".clineignore", ReasonCode::AgentPolicyPath, "Cline ignore list (what the agent may read)"),
    (".rooignore", ReasonCode::AgentPolicyPath, "Roo Code ignore list"),
    (".geminiignore", ReasonCode::AgentPolicyPath, "Gemini CLI ignore list"),
    (".aiderignore", ReasonCode::AgentPolicyPath, "aider ignore list"),
    (".vim", ReasonCode::PersistencePath, "Vim/coc.nvim workspace settings (language-server commands)"),
    ("devenv.nix", ReasonCode::PersistencePath, "devenv shell hooks"),
    (".github/copilot-instructions.md", ReasonCode::AgentPolicyPath, "GitHub Copilot instructions"),
    (".github/instructions", ReasonCode::AgentPolicyPath, "GitHub Copilot instruction files"),
    (".github/prompts", ReasonCode::AgentPolicyPath, "GitHub Copilot prompt files"),
    (".github/chatmodes", ReasonCode::AgentPolicyPath, "GitHub Copilot chat modes"),
    (".github/agents", ReasonCode::AgentPolicyPath, "GitHub Copilot custom agents"),
    ("permit.toml", ReasonCode::AgentPolicyPath, "this gate's own configuration"),
    ("agent.md", ReasonCode::AgentPolicyPath, "AGENT.md instructions (Amp and others)"),
    (".rules", ReasonCode::AgentPolicyPath, "Zed agent rules"),
    (".openhands", ReasonCode::AgentPolicyPath, "OpenHands setup scripts and microagents"),
    (".kilocode", ReasonCode::AgentPolicyPath, "Kilo Code rules"),
    (".trae", ReasonCode::AgentPolicyPath, "Trae rules"),
    (".crush", ReasonCode::AgentPolicyPath, "Crush configuration"),
    ("crush.json", ReasonCode::AgentPolicyPath, "Crush configuration and MCP servers"),
    (".factory", ReasonCode::AgentPolicyPath, "Factory droids and rules"),
    (".agents", ReasonCode::AgentPolicyPath, "shared agent rules and skills"),
    ("warp.md", ReasonCode::AgentPolicyPath, "Warp rules"),
    (".qwen", ReasonCode::AgentPolicyPath, "Qwen Code settings"),
    ("qwen.md", ReasonCode::AgentPolicyPath, "Qwen Code instructions"),
    ("crush.md", ReasonCode::AgentPolicyPath, "Crush instructions"),
    (".augment-guidelines", ReasonCode::AgentPolicyPath, "Augment guidelines"),
    (".idx", ReasonCode::PersistencePath, "Firebase Studio / IDX environment (dev.nix runs on start)"),
    (".replit", ReasonCode::PersistencePath, "Replit run command"),
    ("replit.nix", ReasonCode::PersistencePath, "Replit environment"),
    (".theia", ReasonCode::PersistencePath, "Theia tasks and launch configurations"),
    (".mvn", ReasonCode::PersistencePath, "Maven JVM and wrapper configuration"),
    ("devbox.json", ReasonCode::PersistencePath, "Devbox init hooks"),
    ("bunfig.toml", ReasonCode::PersistencePath, "Bun preload scripts"),
    // Families by prefix (`name*`): every extension and `-local` variant the tools look for.
    (".lintstagedrc*", ReasonCode::PersistencePath, "lint-staged commands run on commit"),
    ("lint-staged.config*", ReasonCode::PersistencePath, "lint-staged commands run on commit"),
    ("lefthook*", ReasonCode::PersistencePath, "lefthook hooks (lefthook.yml, lefthook-local.yml, .toml, .json)"),
    (".lefthook*", ReasonCode::PersistencePath, "lefthook hooks"),
    // Linter and formatter configuration that loads code: editors run these tools on every
    // open or save, so the code runs without anyone starting it (red-team round 34: pylint's
    // `init-hook`, mypy's `plugins`). Build manifests and the project's own code (pyproject.toml,
    // Cargo.toml, build.rs, conftest.py) are not here: they are the agent's work, as source is.
    (
        ".pylintrc*",
        ReasonCode::PersistencePath,
        "pylint `init-hook` and `load-plugins` run Python (also .pylintrc.toml)",
    ),
    ("pylintrc*", ReasonCode::PersistencePath, "pylint `init-hook` and `load-plugins` run Python (also pylintrc.toml)"),
    ("mypy.ini", ReasonCode::PersistencePath, "mypy `plugins` import Python files"),
    (".mypy.ini", ReasonCode::PersistencePath, "mypy `plugins` import Python files"),
    (".flake8", ReasonCode::PersistencePath, "flake8 `local-plugins` import Python files"),
    (".rubocop*", ReasonCode::PersistencePath, "RuboCop `require:` loads Ruby files"),
    (".eslintrc*", ReasonCode::PersistencePath, "ESLint configuration (`.eslintrc.js` is code; plugins are loaded)"),
    ("eslint.config*", ReasonCode::PersistencePath, "ESLint flat configuration, which is JavaScript"),
    (".prettierrc*", ReasonCode::PersistencePath, "Prettier configuration (`plugins`, `.prettierrc.js`)"),
    ("prettier.config*", ReasonCode::PersistencePath, "Prettier configuration, which is JavaScript"),
    (".stylelintrc*", ReasonCode::PersistencePath, "stylelint configuration (`plugins`, `.stylelintrc.js`)"),
    ("stylelint.config*", ReasonCode::PersistencePath, "stylelint configuration, which is JavaScript"),
    ("tailwind.config*", ReasonCode::PersistencePath, "Tailwind configuration, JavaScript the editor extension loads"),
    // Any JavaScript or TypeScript `*.config.*`: language servers and editor extensions load
    // them when the project opens (Svelte's finds `svelte.config.*` in every folder; Vite,
    // Vitest, Jest, Playwright, UnoCSS, GraphQL… likewise; red-team round 40).
    ("*.config.js", ReasonCode::PersistencePath, "JavaScript configuration editors and tools load"),
    ("*.config.cjs", ReasonCode::PersistencePath, "JavaScript configuration editors and tools load"),
    ("*.config.mjs", ReasonCode::PersistencePath, "JavaScript configuration editors and tools load"),
    ("*.config.ts", ReasonCode::PersistencePath, "TypeScript configuration editors and tools load"),
    ("*.config.cts", ReasonCode::PersistencePath, "TypeScript configuration editors and tools load"),
    ("*.config.mts", ReasonCode::PersistencePath, "TypeScript configuration editors and tools load"),
    (".markdownlint-cli2*", ReasonCode::PersistencePath, "markdownlint-cli2 configuration (`.cjs`/`.mjs` are code)"),
    (".golangci*", ReasonCode::PersistencePath, "golangci-lint configuration (custom linter plugins)"),
    (".php-cs-fixer*", ReasonCode::PersistencePath, "PHP CS Fixer configuration, which is PHP"),
    (".formatter.exs", ReasonCode::PersistencePath, "Elixir formatter configuration, code ElixirLS runs"),
    (".solargraph.yml", ReasonCode::PersistencePath, "Solargraph `require:` loads Ruby files"),
    ("hie.yaml", ReasonCode::PersistencePath, "Haskell language server cradle (`bios: program:` runs a program)"),
    (".jvmopts", ReasonCode::PersistencePath, "JVM options for sbt and Metals (`-javaagent:` loads code)"),
    (".sbtopts", ReasonCode::PersistencePath, "sbt options"),
    (".bazelrc", ReasonCode::PersistencePath, "Bazel options (`--workspace_status_command` runs a program)"),
    (
        "gradle-wrapper.properties",
        ReasonCode::PersistencePath,
        "the Gradle distribution IDEs download and run on import",
    ),
    ("venv/bin", ReasonCode::PersistencePath, "virtualenv activation scripts and entry points"),
    (".simple-git-hooks.json", ReasonCode::PersistencePath, "git hooks"),
    (".flox", ReasonCode::PersistencePath, "Flox environment hooks"),
    ("flake.nix", ReasonCode::PersistencePath, "Nix dev shell hooks (direnv)"),
    ("shell.nix", ReasonCode::PersistencePath, "Nix dev shell hooks"),
    ("*.code-workspace", ReasonCode::PersistencePath, "VS Code workspace files (tasks, settings)"),
    (".run", ReasonCode::PersistencePath, "JetBrains shared run configurations"),
    ("mise.local.toml", ReasonCode::PersistencePath, "mise tasks and hooks"),
    (".mise.local.toml", ReasonCode::PersistencePath, "mise tasks and hooks"),
    ("mise", ReasonCode::PersistencePath, "mise configuration directory"),
    (".config", ReasonCode::PersistencePath, "XDG configuration read by tools run in the workspace (mise, direnv)"),
    (".envrc.local", ReasonCode::PersistencePath, "direnv"),
    // Editors and dev environments: tasks, launch configurations and settings run commands.
    (".vscode", ReasonCode::PersistencePath, "VS Code tasks, launch configurations, settings and MCP servers"),
    (".idea", ReasonCode::PersistencePath, "JetBrains run configurations"),
    (".fleet", ReasonCode::PersistencePath, "Fleet run configurations"),
    (".devcontainer", ReasonCode::PersistencePath, "dev container definitions (lifecycle commands)"),
    (".devcontainer.json", ReasonCode::PersistencePath, "dev container definition (lifecycle commands)"),
    (".gitpod.yml", ReasonCode::PersistencePath, "Gitpod tasks"),
    (".nvim.lua", ReasonCode::PersistencePath, "Neovim exrc"),
    (".nvimrc", ReasonCode::PersistencePath, "Neovim exrc"),
    (".exrc", ReasonCode::PersistencePath, "vi exrc"),
    (".envrc", ReasonCode::PersistencePath, "direnv, run on entering the directory"),
    // Hooks and tool configuration that runs programs.
    (".git", ReasonCode::PersistencePath, "git's repository: config, hooks"),
    (
        "head",
        ReasonCode::PersistencePath,
        "a git repository marker: a directory with HEAD, objects and refs is a repository",
    ),
    // Ignore files: ripgrep, fd and git skip what they list and hidden files, and a `!.env`
    // line un-hides a secret for every later `rg`, `git add -A` or `git status`.
    (".gitignore", ReasonCode::VisibilityConfig, "git, ripgrep and fd ignore rules"),
    (".ignore", ReasonCode::VisibilityConfig, "ripgrep and fd ignore rules"),
    (".rgignore", ReasonCode::VisibilityConfig, "ripgrep ignore rules"),
    (".fdignore", ReasonCode::VisibilityConfig, "fd ignore rules"),
    (".gitmodules", ReasonCode::PersistencePath, "git submodules (fetch URLs, update commands)"),
    (".gitattributes", ReasonCode::PersistencePath, "git attributes (filter, diff and merge drivers)"),
    (".gitconfig", ReasonCode::PersistencePath, "git configuration"),
    (".git-blame-ignore-revs", ReasonCode::PersistencePath, "git blame configuration"),
    (".hg", ReasonCode::PersistencePath, "Mercurial repository and hooks"),
    (".jj", ReasonCode::PersistencePath, "Jujutsu repository and its config"),
    (".vs", ReasonCode::PersistencePath, "Visual Studio tasks and launch settings"),
    (".github/hooks", ReasonCode::AgentPolicyPath, "GitHub Copilot agent hooks"),
    (".yarn/releases", ReasonCode::PersistencePath, "the Yarn release yarnPath runs"),
    (".venv/bin", ReasonCode::PersistencePath, "virtualenv activation scripts and entry points"),
    (".husky", ReasonCode::PersistencePath, "husky git hooks"),
    // git runs a hook by its file name in whatever directory `core.hooksPath` names
    // (`.githooks`, `tools/hooks`…), which the gate cannot read: a write to a file named like
    // a hook is a write to a hook, wherever it is (red-team round 33). githooks(5).
    ("applypatch-msg", ReasonCode::PersistencePath, "git hook"),
    ("pre-applypatch", ReasonCode::PersistencePath, "git hook"),
    ("post-applypatch", ReasonCode::PersistencePath, "git hook"),
    ("pre-commit", ReasonCode::PersistencePath, "git hook"),
    ("pre-merge-commit", ReasonCode::PersistencePath, "git hook"),
    ("prepare-commit-msg", ReasonCode::PersistencePath, "git hook"),
    ("commit-msg", ReasonCode::PersistencePath, "git hook"),
    ("post-commit", ReasonCode::PersistencePath, "git hook"),
    ("pre-rebase", ReasonCode::PersistencePath, "git hook"),
    ("post-checkout", ReasonCode::PersistencePath, "git hook"),
    ("post-merge", ReasonCode::PersistencePath, "git hook"),
    ("pre-push", ReasonCode::PersistencePath, "git hook"),
    ("pre-receive", ReasonCode::PersistencePath, "git hook (a push to a local repository runs it)"),
    ("update", ReasonCode::PersistencePath, "git hook (a push to a local repository runs it)"),
    ("proc-receive", ReasonCode::PersistencePath, "git hook (a push to a local repository runs it)"),
    ("post-receive", ReasonCode::PersistencePath, "git hook (a push to a local repository runs it)"),
    ("post-update", ReasonCode::PersistencePath, "git hook (a push to a local repository runs it)"),
    ("reference-transaction", ReasonCode::PersistencePath, "git hook"),
    ("push-to-checkout", ReasonCode::PersistencePath, "git hook"),
    ("pre-auto-gc", ReasonCode::PersistencePath, "git hook"),
    ("post-rewrite", ReasonCode::PersistencePath, "git hook"),
    ("sendemail-validate", ReasonCode::PersistencePath, "git hook"),
    ("fsmonitor-watchman", ReasonCode::PersistencePath, "git hook"),
    ("p4-changelist", ReasonCode::PersistencePath, "git hook"),
    ("p4-prepare-changelist", ReasonCode::PersistencePath, "git hook"),
    ("p4-post-changelist", ReasonCode::PersistencePath, "git hook"),
    ("p4-pre-submit", ReasonCode::PersistencePath, "git hook"),
    ("post-index-change", ReasonCode::PersistencePath, "git hook"),
    (".pre-commit-config.yaml", ReasonCode::PersistencePath, "pre-commit hooks"),
    (".cargo", ReasonCode::PersistencePath, "Cargo configuration (rustc wrappers, runners)"),
    ("rust-toolchain", ReasonCode::PersistencePath, "rustup toolchain selection"),
    ("rust-toolchain.toml", ReasonCode::PersistencePath, "rustup toolchain selection"),
    ("mise.toml", ReasonCode::PersistencePath, "mise tasks and hooks"),
    (".mise.toml", ReasonCode::PersistencePath, "mise tasks and hooks"),
    (".tool-versions", ReasonCode::PersistencePath, "asdf tool selection"),
    // Files that choose which program a version manager's shim runs: asdf takes `path:DIR`
    // versions from the legacy files, Volta runs a project's download hooks, Bazelisk
    // downloads from the project's `BAZELISK_BASE_URL` (red-team round 39).
    (".nvmrc", ReasonCode::PersistencePath, "Node version selection (asdf legacy files take `path:`)"),
    (".node-version", ReasonCode::PersistencePath, "Node version selection"),
    (".python-version", ReasonCode::PersistencePath, "Python version selection"),
    (".ruby-version", ReasonCode::PersistencePath, "Ruby version selection"),
    (".go-version", ReasonCode::PersistencePath, "Go version selection"),
    (".java-version", ReasonCode::PersistencePath, "Java version selection"),
    (".sdkmanrc", ReasonCode::PersistencePath, "SDKMAN version selection"),
    (".prototools", ReasonCode::PersistencePath, "proto tool selection and plugins"),
    (".volta", ReasonCode::PersistencePath, "Volta project hooks (download commands)"),
    (".bazeliskrc", ReasonCode::PersistencePath, "Bazelisk download source (`BAZELISK_BASE_URL`)"),
    (".bazelversion", ReasonCode::PersistencePath, "the Bazel version Bazelisk downloads and runs"),
    (".lfsconfig", ReasonCode::PersistencePath, "git-lfs endpoints (where a push uploads LFS objects)"),
    // Environments other tools create and people activate: their scripts run in the
    // person's shell (`. .env/bin/activate`), wherever the environment lives.
    ("activate", ReasonCode::PersistencePath, "a virtualenv activation script"),
    ("activate.fish", ReasonCode::PersistencePath, "a virtualenv activation script"),
    ("activate.csh", ReasonCode::PersistencePath, "a virtualenv activation script"),
    ("activate.nu", ReasonCode::PersistencePath, "a virtualenv activation script"),
    ("activate.ps1", ReasonCode::PersistencePath, "a virtualenv activation script"),
    ("activate_this.py", ReasonCode::PersistencePath, "a virtualenv activation script"),
    ("activate.d", ReasonCode::PersistencePath, "conda activation hooks"),
    ("pyvenv.cfg", ReasonCode::PersistencePath, "a virtualenv's marker and home interpreter"),
    ("conda-meta", ReasonCode::PersistencePath, "a conda environment"),
    (".direnv", ReasonCode::PersistencePath, "direnv's environments (layout python)"),
    (".tox", ReasonCode::PersistencePath, "tox environments"),
    (".nox", ReasonCode::PersistencePath, "nox environments"),
    (".conda", ReasonCode::PersistencePath, "a project conda environment"),
    (".yarnrc.yml", ReasonCode::PersistencePath, "Yarn configuration (yarnPath runs a file)"),
    (".yarnrc", ReasonCode::PersistencePath, "Yarn configuration"),
    (".pnpmfile.cjs", ReasonCode::PersistencePath, "pnpm hooks"),
    (".npmrc", ReasonCode::PersistencePath, "npm configuration (scripts shell, registries)"),
    (".bashrc", ReasonCode::PersistencePath, "shell start-up"),
    (".bash_profile", ReasonCode::PersistencePath, "shell start-up"),
    (".profile", ReasonCode::PersistencePath, "shell start-up"),
    (".zshrc", ReasonCode::PersistencePath, "shell start-up"),
    (".zshenv", ReasonCode::PersistencePath, "shell start-up"),
    (".bash_login", ReasonCode::PersistencePath, "shell start-up"),
    (".bash_logout", ReasonCode::PersistencePath, "shell start-up"),
    (".zprofile", ReasonCode::PersistencePath, "shell start-up"),
    (".zlogin", ReasonCode::PersistencePath, "shell start-up"),
    (".zlogout", ReasonCode::PersistencePath, "shell start-up"),
    (".jq", ReasonCode::PersistencePath, "jq definitions loaded from $HOME on every run"),
    // Debuggers and interactive interpreters that run a start-up file from the directory they
    // start in: the person's next debugging session runs it.
    (".pdbrc", ReasonCode::PersistencePath, "Python's pdb runs `!` lines of ./.pdbrc at start"),
    (".pdbrc.py", ReasonCode::PersistencePath, "pdb++ start-up code"),
    (".irbrc", ReasonCode::PersistencePath, "Ruby's irb loads ./.irbrc"),
    (".pryrc", ReasonCode::PersistencePath, "Ruby's pry loads ./.pryrc"),
    (".rprofile", ReasonCode::PersistencePath, "R sources ./.Rprofile at start"),
    (".renviron", ReasonCode::PersistencePath, "R reads ./.Renviron (R_PROFILE_USER and friends name code)"),
    (".gdbinit", ReasonCode::PersistencePath, "gdb's ./.gdbinit (when the auto-load safe path allows it)"),
    (".lldbinit", ReasonCode::PersistencePath, "lldb's ./.lldbinit (target.load-cwd-lldbinit)"),
    (".vimrc", ReasonCode::PersistencePath, "Vim's exrc option sources ./.vimrc"),
    (".gvimrc", ReasonCode::PersistencePath, "Vim's exrc option sources ./.gvimrc"),
    (".perldb", ReasonCode::PersistencePath, "the Perl debugger (`perl -d`) runs ./.perldb"),
    (".ocamlinit", ReasonCode::PersistencePath, "the OCaml toplevel loads ./.ocamlinit"),
    (".iex.exs", ReasonCode::PersistencePath, "Elixir's iex loads ./.iex.exs"),
    (".ghci", ReasonCode::PersistencePath, "GHCi runs ./.ghci"),
    (".octaverc", ReasonCode::PersistencePath, "Octave runs ./.octaverc at start"),
    (".sbtrc", ReasonCode::PersistencePath, "sbt runs the commands in the project's .sbtrc"),
    ("ipython_config.py", ReasonCode::PersistencePath, "IPython loads config files from the working directory"),
    (".bundle", ReasonCode::PersistencePath, "Bundler's project config (.bundle/config: gem sources, paths)"),
    ("irb.rc", ReasonCode::PersistencePath, "Ruby's irb loads ./irb.rc"),
    ("_irbrc", ReasonCode::PersistencePath, "Ruby's irb loads ./_irbrc"),
    ("$irbrc", ReasonCode::PersistencePath, "Ruby's irb loads ./$irbrc"),
    // Python runs the `import` lines of every `.pth` file in a site directory, and imports
    // `sitecustomize`/`usercustomize`, whenever an interpreter of that environment starts.
    (".venv", ReasonCode::PersistencePath, "the project's virtualenv: scripts, site-packages and their .pth files"),
    ("site-packages", ReasonCode::PersistencePath, "Python site directory (.pth files run at every start)"),
    // Editor extensions run the workspace's own copy of a tool (VS Code's ESLint runs
    // `node_modules/eslint` when a file opens).
    ("node_modules", ReasonCode::PersistencePath, "installed packages that editors and scripts run"),
    ("dist-packages", ReasonCode::PersistencePath, "Debian's Python site directory"),
    ("sitecustomize.py", ReasonCode::PersistencePath, "imported by Python at start"),
    ("usercustomize.py", ReasonCode::PersistencePath, "imported by Python at start"),
    ("pyvenv.cfg", ReasonCode::PersistencePath, "marks a virtualenv (its home and site settings)"),
];

/// `HEAD` followed by any number of `~N` (`HEAD`, `HEAD~1`, `HEAD~~`), case-insensitively.
pub fn is_head_revision(name: &str) -> bool {
    let Some(rest) = name.get(..4).filter(|head| head.eq_ignore_ascii_case("head")).map(|_| &name[4..]) else {
        return false;
    };
    rest.split('~').skip(1).all(|count| count.bytes().all(|byte| byte.is_ascii_digit()))
        && (rest.is_empty() || rest.starts_with('~'))
}

/// The code of the first `WORKSPACE_CONFIG` entry the path falls under.
/// `components` are the components of [`comparable`]`(path)`.
fn workspace_config(components: &[&str]) -> Option<ReasonCode> {
    /// The table indexed once: one-component names by name, families by prefix
    /// (`lefthook*`), and the rest (`.github/prompts`, `*.code-workspace`) in a short list.
    struct Index {
        single: HashMap<&'static str, ReasonCode>,
        prefixes: Vec<(&'static str, ReasonCode)>,
        others: Vec<(Vec<&'static str>, Option<&'static str>, ReasonCode)>,
    }
    static INDEX: LazyLock<Index> = LazyLock::new(|| {
        let mut index = Index { single: HashMap::new(), prefixes: Vec::new(), others: Vec::new() };
        for (name, code, _) in WORKSPACE_CONFIG {
            if let Some(prefix) = name.strip_suffix('*') {
                index.prefixes.push((prefix, *code));
                continue;
            }
            match name.strip_prefix('*') {
                Some(suffix) => index.others.push((Vec::new(), Some(suffix), *code)),
                None if !name.contains('/') => {
                    index.single.entry(*name).or_insert(*code);
                }
                None => index.others.push((name.split('/').collect(), None, *code)),
            }
        }
        index
    });
    let index = &*INDEX;
    // `HEAD~2`, `head~1~1`: names git reads as revisions of HEAD, never written through the
    // gate (so `git diff HEAD~1 -- x` cannot become a directory diff outside a repository).
    if components.iter().any(|component| is_head_revision(component)) {
        return Some(ReasonCode::PersistencePath);
    }
    // The first entry in table order wins, as before: the others are few and checked after.
    components
        .iter()
        .find_map(|component| index.single.get(component).copied())
        .or_else(|| {
            index.prefixes.iter().find_map(|(prefix, code)| {
                components.iter().any(|component| component.starts_with(prefix)).then_some(*code)
            })
        })
        .or_else(|| {
            index.others.iter().find_map(|(wanted, suffix, code)| match suffix {
                Some(suffix) => components.last().is_some_and(|last| last.ends_with(suffix)).then_some(*code),
                // A path ending in the first components of an entry (`.github` for
                // `.github/prompts`) may be a directory moved or copied into place with the
                // rest inside it (`mv draft .github`).
                None => (components.windows(wanted.len()).any(|window| window == wanted.as_slice())
                    || (1..wanted.len()).any(|prefix| components.ends_with(&wanted[..prefix])))
                .then_some(*code),
            })
        })
}

fn system_location(path: &str) -> bool {
    let Some(rest) = path.strip_prefix('/') else { return false };
    // Only the first component decides; a `match` compiles to a switch on its length.
    let first = components(rest).next().unwrap_or(rest);
    path == "/"
        || matches!(
            first,
            "etc"
                | "usr"
                | "bin"
                | "sbin"
                | "lib"
                | "lib32"
                | "lib64"
                | "boot"
                | "sys"
                | "proc"
                | "dev"
                | "var"
                | "opt"
                | "System"
                | "Library"
                | "private"
                | "snap"
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_secret_extension_has_a_sample() {
        for extension in SENSITIVE_EXTENSIONS {
            assert!(
                SENSITIVE_SAMPLES.iter().any(|sample| sample.rsplit_once('.').is_some_and(|(_, ext)| ext == extension)),
                "no sample ends in `.{extension}`"
            );
        }
        for sample in SENSITIVE_SAMPLES.iter().filter(|sample| sample.starts_with("x.")) {
            assert!(is_sensitive_name(sample), "{sample}");
        }
    }

    #[test]
    fn shell_globs_are_vouched_for_in_a_few_shapes() {
        for glob in ["src/*.rs", "tests/**/*.json", "src/*", "*.RS", "docs/*.md2", "/home/dev/*.rs"] {
            assert!(!shell_glob_may_match_sensitive(glob), "{glob}");
        }
        for glob in [
            "server.?em",
            "s?rvice-account.json",
            ".*.production",
            "id_*",
            "test_*.py",
            "*.pem",
            "*.bak",
            "*.orig",
            "s?crets",
            "src/[a-z]*.rs",
            "*.tfvars",
            "deploy_ke?",
            ".?ube",
            "*.a.b",
            "*.md",
            "*.YML",
            "*.",
        ] {
            assert!(shell_glob_may_match_sensitive(glob), "{glob}");
        }
    }

    #[test]
    fn bracket_expressions_count_as_any_character() {
        assert_eq!(widen_brackets("[[:punct:]]env"), "?env");
        assert_eq!(widen_brackets(".[z-f]nv"), ".?nv");
        assert_eq!(widen_brackets("[]a]x[!b]"), "?x?");
        assert_eq!(widen_brackets("a[b"), "a*");
        assert_eq!(widen_brackets(".en[!\\[:]"), ".en?");
        assert_eq!(widen_brackets("a\\[b]"), "a\\[b]");
        for glob in [".en[!\\[:]", "src/id_rs[!\\[:]", ".s[!\\[:]h", ".gi[!\\[:]", ".e[nope"] {
            assert!(glob_may_match_sensitive(glob), "{glob}");
        }
        for glob in [".[[:alpha:]]nv", "src/[[:lower:]]d_rsa", ".[Z-f]nv"] {
            assert!(glob_may_match_sensitive(glob), "{glob}");
        }
    }

    #[test]
    fn every_backup_suffix_ends_in_a_byte_the_fast_check_knows() {
        for suffix in BACKUP_SUFFIXES {
            assert!(suffix.as_bytes().last().is_some_and(|last| b"kpdgey~".contains(last)), "{suffix}");
            assert!(is_sensitive_name(&format!("id_rsa{suffix}")), "{suffix}");
            assert!(is_sensitive_name(&format!(".env{suffix}{suffix}")), "{suffix}");
        }
        assert!(!is_sensitive_name("main.rs.bak"));
    }

    fn workspace() -> Workspace {
        Workspace::new(Some("/workspace"), true, &[], "/home/dev")
    }

    fn codes(raw: &str, access: Access) -> Vec<ReasonCode> {
        judge(raw, access, Some("/workspace"), &workspace()).into_iter().map(|finding| finding.code).collect()
    }

    proptest::proptest! {
        /// The byte scan splits exactly as `str::split('/')` does, and `comparable` keeps its
        /// meaning on its fast path.
        #[test]
        fn components_split_like_str_split(path in "[a/. é ]{0,12}") {
            proptest::prop_assert_eq!(components(&path).collect::<Vec<_>>(), path.split('/').collect::<Vec<_>>());
            let slow = path
                .to_ascii_lowercase()
                .split('/')
                .map(|component| component.trim_end_matches(['.', ' ']))
                .collect::<Vec<_>>()
                .join("/");
            proptest::prop_assert_eq!(comparable(&path), slow);
        }
    }

    #[test]
    fn a_call_workspace_is_the_one_built_from_scratch() {
        let root_sets: [Vec<String>; 3] =
            [vec![], vec!["/tmp/a".to_owned(), "/".to_owned()], vec!["/srv/x/./y/".to_owned(), "/home/dev".to_owned()]];
        for roots in &root_sets {
            let base = Workspace::new(None, false, roots, "/home/dev/");
            for cwd in [None, Some("/workspace"), Some("/"), Some("/home/dev"), Some("/w//x/../y"), Some("/etc")] {
                for use_cwd in [true, false] {
                    assert_eq!(
                        base.with_cwd(cwd, use_cwd),
                        Workspace::new(cwd, use_cwd, roots, "/home/dev/"),
                        "{cwd:?} {roots:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn revisions_of_head_are_recognised_as_names() {
        for name in ["HEAD", "head", "HEAD~1", "HEAD~~", "HEAD~1~2", "Head~12"] {
            assert!(is_head_revision(name), "{name}");
        }
        for name in ["HEADER", "header.h", "HEAD~x", "HEAD^", "HEA", "xHEAD", "HEAD1"] {
            assert!(!is_head_revision(name), "{name}");
        }
    }

    #[test]
    fn normal_paths_take_the_short_way_and_others_are_normalised() {
        for (path, normal) in [
            ("/a/b", "/a/b"),
            ("/", "/"),
            ("/a/", "/a"),
            ("/a/.", "/a"),
            ("/a/..", "/"),
            ("a/b", "/a/b"),
            ("//a", "/a"),
            ("/a/.b/..c", "/a/.b/..c"),
        ] {
            assert_eq!(normalize(path), normal, "{path}");
        }
    }

    #[test]
    fn normalizes_lexically() {
        assert_eq!(normalize("/a/./b//c/../d"), "/a/b/d");
        assert_eq!(normalize("/../../etc"), "/etc");
        assert_eq!(normalize("/"), "/");
        assert_eq!(resolve("~/x", None, "/home/dev").unwrap(), "/home/dev/x");
        assert_eq!(resolve("src/../..", Some("/workspace"), "/h").unwrap(), "/");
        assert_eq!(resolve("src", None, "/h"), None);
    }

    #[test]
    fn inside_the_workspace_is_clean() {
        assert!(codes("src/main.rs", Access::Write).is_empty());
        assert!(codes("/workspace/README.md", Access::Read).is_empty());
        assert!(codes("./a/../b", Access::Write).is_empty());
        assert!(codes("/dev/null", Access::Write).is_empty());
    }

    #[test]
    fn escapes_and_outside_paths_are_flagged() {
        assert_eq!(codes("../other/file", Access::Read), vec![ReasonCode::PathEscape]);
        assert_eq!(codes("/workspace-evil/x", Access::Read), vec![ReasonCode::PathOutsideWorkspace]);
        assert_eq!(codes("/tmp/x", Access::Write), vec![ReasonCode::PathOutsideWorkspace]);
    }

    #[test]
    fn credential_system_persistence_and_policy_locations() {
        assert!(codes("~/.ssh/id_rsa", Access::Read).contains(&ReasonCode::CredentialPath));
        assert!(codes(".env", Access::Read).contains(&ReasonCode::CredentialPath));
        assert!(codes(".env.example", Access::Read).is_empty());
        assert!(codes("/etc/passwd", Access::Read).contains(&ReasonCode::SystemPath));
        assert!(codes("~/.bashrc", Access::Write).contains(&ReasonCode::PersistencePath));
        assert!(!codes("~/.bashrc", Access::Read).contains(&ReasonCode::PersistencePath));
        assert!(codes(".git/hooks/pre-commit", Access::Write).contains(&ReasonCode::PersistencePath));
        assert!(codes(".claude/settings.json", Access::Write).contains(&ReasonCode::AgentPolicyPath));
        assert!(codes(".claude/hooks/x.sh", Access::Write).contains(&ReasonCode::AgentPolicyPath));
        assert!(codes("CLAUDE.md", Access::Write).contains(&ReasonCode::AgentPolicyPath));
        for ci in [
            ".github/workflows/ci.yml",
            ".gitlab-ci.yml",
            "Jenkinsfile",
            ".circleci/config.yml",
            "sub/.github/actions/setup/action.yml",
        ] {
            assert!(codes(ci, Access::Write).contains(&ReasonCode::CiConfigPath), "{ci}");
            assert!(!codes(ci, Access::Read).contains(&ReasonCode::CiConfigPath), "reading {ci} is fine");
        }
        assert!(!codes(".github/CODEOWNERS.md", Access::Write).contains(&ReasonCode::CiConfigPath));
        assert!(!codes("docs/workflows/ci.md", Access::Write).contains(&ReasonCode::CiConfigPath));
        assert!(codes(".GIT/config", Access::Write).contains(&ReasonCode::PersistencePath));
        assert!(codes("sub/.git", Access::Write).contains(&ReasonCode::PersistencePath));
        assert!(codes(".envrc", Access::Write).contains(&ReasonCode::PersistencePath));
        // Any dot-name in the workspace, listed or not, unless it only holds data.
        for written in [".volta/hooks.json", ".some-new-tool.toml", "src/.hidden/x", "pkg/.npmrc.d/a"] {
            assert_eq!(codes(written, Access::Write), [ReasonCode::PersistencePath], "{written}");
        }
        // `.changeset/config.json` names a module `changeset version` runs (round 40).
        assert_eq!(codes(".changeset/config.json", Access::Write), [ReasonCode::PersistencePath]);
        for data in [".editorconfig", "docs/.gitkeep", ".env.example", "src/main.rs"] {
            assert_eq!(codes(data, Access::Write), [], "{data}");
        }
        assert_eq!(codes(".some-new-tool.toml", Access::Read), []);
        assert!(codes(".ENV", Access::Read).contains(&ReasonCode::CredentialPath));
        assert!(codes("server.key", Access::Read).contains(&ReasonCode::CredentialPath));
        assert!(glob_may_match_sensitive(".en?"));
        assert!(glob_may_match_sensitive(".env*"));
        assert!(glob_may_match_sensitive(".git/hook?/pre-commit"));
        assert!(glob_may_match_sensitive("/home/dev/.ss?/id_rs?"));
        assert!(!glob_may_match_sensitive("src/*.rs"));
        assert!(glob_may_match_sensitive("*.p12"));
        assert!(glob_may_match_sensitive("src/*.tfvars"));
        assert!(!glob_may_match_sensitive("tests/**/*.json"));
        assert!(glob_may_match_sensitive(".claud?/settings.local.json"));
        assert!(glob_may_match_sensitive("CLAUDE.m?"));
        assert!(glob_may_match_sensitive("terraform.tfstat?"));
        assert!(codes("~/.ssh/authorized_keys", Access::Write).contains(&ReasonCode::CriticalCommand));
        assert!(codes("/dev/sda", Access::Write).contains(&ReasonCode::CriticalCommand));
    }

    #[test]
    fn component_globs_match_like_bash() {
        for (pattern, name, expected) in [
            ("*.rs", "main.rs", true),
            ("*.rs", "main.rsx", false),
            ("id_rs?", "id_rsa", true),
            ("[ab]c", "bc", true),
            ("[!ab]c", "bc", false),
            ("[a-c]x", "bx", true),
            ("[]]x", "]x", true),
            ("*a*b*c", "xxaxxbxxc", true),
            ("*a*b*c", "xxaxxbxx", false),
            ("[x", "[x", true),
            (".en?", ".env", true),
            ("credentials.js?n", "credentials.json", true),
            ("**", "anything", true),
        ] {
            assert_eq!(component_glob_matches(pattern, name), expected, "{pattern} vs {name}");
        }
    }

    #[test]
    fn broad_workspaces_are_refused() {
        let broad = Workspace::new(Some("/"), true, &[], "/home/dev");
        assert!(broad.too_broad.is_some());
        let findings = judge("etc/passwd", Access::Read, Some("/"), &broad);
        assert!(findings.iter().any(|finding| finding.code == ReasonCode::NoWorkspace));
        for broad in ["/home/dev", "/home/other", "/home/dev/.ssh", "/home/dev/.config/gh", "/etc"] {
            assert!(Workspace::new(Some(broad), true, &[], "/home/dev").too_broad.is_some(), "{broad}");
        }
        assert!(Workspace::new(Some("/home/dev/project"), true, &[], "/home/dev").too_broad.is_none());
    }

    #[test]
    fn relative_paths_inside_the_workspace() {
        let workspace = workspace();
        assert_eq!(workspace.relative("/workspace/docs/a.md"), Some("docs/a.md"));
        assert_eq!(workspace.relative("/elsewhere/a.md"), None);
        assert!(!is_within("/workspace2", "/workspace"));
    }
}
