//! Path analysis for file tools and shell arguments: where a path really points, lexically.
//!
//! Decides how much a path raises a call's tier: outside the workspace, `..` escapes, credential
//! stores, system locations, persistence locations and the agent's own policy files. It never
//! touches the filesystem (the gate is pure), so symlinks are not followed; a path that cannot
//! be resolved (relative with no known directory, or built from run-time values) is treated as
//! outside the workspace. It only ever adds friction.

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
    roots: Vec<String>,
    home: String,
    /// Set when the request's directory was refused as a workspace (`/`, `~`, a system dir).
    pub too_broad: Option<String>,
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
        let mut roots = Vec::with_capacity(extra_roots.len() + 1);
        let mut too_broad = None;
        let candidates = cwd.filter(|_| use_cwd).into_iter().chain(extra_roots.iter().map(String::as_str));
        for root in candidates {
            let root = normalize(root);
            if is_too_broad(&root, &home) {
                too_broad = Some(root);
            } else {
                roots.push(root);
            }
        }
        Self { roots, home, too_broad }
    }

    pub fn home(&self) -> &str {
        &self.home
    }

    /// `directory` is exactly one of the roots (the common case of a command run in the cwd).
    pub fn is_root(&self, directory: &str) -> bool {
        self.roots.iter().any(|root| root == directory)
    }

    pub fn contains(&self, resolved: &str) -> bool {
        self.roots.iter().any(|root| is_within(resolved, root))
    }

    /// The path relative to the first workspace root that holds it.
    pub fn relative<'a>(&self, resolved: &'a str) -> Option<&'a str> {
        self.roots.iter().find_map(|root| {
            if resolved == root {
                Some("")
            } else if root == "/" {
                resolved.strip_prefix('/')
            } else {
                resolved.strip_prefix(root.as_str()).and_then(|rest| rest.strip_prefix('/'))
            }
        })
    }
}

fn is_too_broad(root: &str, home: &str) -> bool {
    root == "/" || root == home || root == "/home" || root == "/Users" || system_location(root)
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
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
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
    out
}

/// Resolves `raw` against `base` (the directory the call runs in) and `home`. `None` when the
/// path is relative and the directory is unknown.
pub fn resolve(raw: &str, base: Option<&str>, home: &str) -> Option<String> {
    if raw == "~" {
        return Some(normalize(home));
    }
    if let Some(rest) = raw.strip_prefix("~/") {
        return Some(normalize(&format!("{home}/{rest}")));
    }
    if let Some(rest) = raw.strip_prefix('~') {
        // `~user/…` is another user's home.
        return Some(normalize(&format!("/home/{rest}")));
    }
    if raw.starts_with('/') {
        return Some(normalize(raw));
    }
    base.map(|base| normalize(&format!("{base}/{raw}")))
}

/// Judges one path. `base` is the directory relative paths start from (the call's cwd, or the
/// directory a shell `cd` moved to; `None` when it is unknown).
pub fn judge(raw: &str, access: Access, base: Option<&str>, workspace: &Workspace) -> Vec<PathFinding> {
    let mut findings = Vec::new();
    let Some(resolved) = resolve(raw, base, &workspace.home) else {
        findings.push(PathFinding {
            code: if workspace.too_broad.is_some() || workspace.roots.is_empty() {
                ReasonCode::NoWorkspace
            } else {
                ReasonCode::PathOutsideWorkspace
            },
            tier: Tier::High,
            path: raw.to_owned(),
        });
        return findings;
    };
    let mut add = |code, tier| findings.push(PathFinding { code, tier, path: resolved.clone() });

    if harmless_device(&resolved, access) {
        return findings;
    }
    if access == Access::Write && critical_write_target(&resolved, &workspace.home) {
        add(ReasonCode::CriticalCommand, Tier::Critical);
    }
    if credential_location(&resolved, &workspace.home) {
        add(ReasonCode::CredentialPath, Tier::High);
    }
    if access == Access::Write && persistence_location(&resolved, &workspace.home) {
        add(ReasonCode::PersistencePath, Tier::High);
    }
    if access == Access::Write && agent_policy_location(&resolved, &workspace.home) {
        add(ReasonCode::AgentPolicyPath, Tier::High);
    }
    if system_location(&resolved) {
        add(ReasonCode::SystemPath, Tier::High);
    }
    if !workspace.contains(&resolved) {
        let climbs = raw.split('/').any(|part| part == "..");
        let code = if workspace.roots.is_empty() {
            ReasonCode::NoWorkspace
        } else if climbs {
            ReasonCode::PathEscape
        } else {
            ReasonCode::PathOutsideWorkspace
        };
        add(code, Tier::High);
    }
    findings
}

fn harmless_device(path: &str, access: Access) -> bool {
    match path {
        "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty" => true,
        "/dev/zero" | "/dev/urandom" | "/dev/random" | "/dev/stdin" => access == Access::Read,
        _ => path.starts_with("/dev/fd/"),
    }
}

fn home_relative<'a>(path: &'a str, home: &str) -> Option<&'a str> {
    path.strip_prefix(home).and_then(|rest| rest.strip_prefix('/'))
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
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
    if SYSTEM_FILES.contains(&path) || path.contains("/.ssh/") || path.contains("/.aws/") {
        return true;
    }
    let name = basename(path);
    let env_file = (name == ".env" || name.starts_with(".env."))
        && ![".example", ".sample", ".template", ".dist"].iter().any(|suffix| name.ends_with(suffix));
    env_file
        || name.starts_with("id_rsa")
        || name.starts_with("id_ed25519")
        || name.starts_with("id_ecdsa")
        || name.starts_with("id_dsa")
        || [".pem", ".key", ".p12", ".pfx", ".keystore", ".jks"].iter().any(|ext| name.ends_with(ext))
}

fn persistence_location(path: &str, home: &str) -> bool {
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
    path == "/etc/crontab"
        || path == "/etc/profile"
        || path == "/etc/bash.bashrc"
        || path == "/etc/rc.local"
        || SYSTEM_DIRS.iter().any(|dir| is_within(path, dir))
        || path.contains("/.git/hooks/")
        || path.ends_with("/.git/hooks")
        || path.ends_with("/.git/config")
}

fn agent_policy_location(path: &str, home: &str) -> bool {
    if let Some(rest) = home_relative(path, home)
        && [".claude", ".codex", ".cursor", ".config/permit"].iter().any(|dir| is_within(rest, dir))
    {
        return true;
    }
    path.contains("/.claude/settings")
        || path.contains("/.codex/")
        || path.contains("/.cursor/")
        || basename(path) == "permit.toml"
        || basename(path) == ".mcp.json"
}

fn system_location(path: &str) -> bool {
    const SYSTEM_DIRS: [&str; 17] = [
        "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/boot", "/sys", "/proc", "/dev", "/var", "/opt",
        "/System", "/Library", "/private", "/snap",
    ];
    path == "/" || SYSTEM_DIRS.iter().any(|dir| is_within(path, dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> Workspace {
        Workspace::new(Some("/workspace"), true, &[], "/home/dev")
    }

    fn codes(raw: &str, access: Access) -> Vec<ReasonCode> {
        judge(raw, access, Some("/workspace"), &workspace()).into_iter().map(|finding| finding.code).collect()
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
        assert!(codes("~/.ssh/authorized_keys", Access::Write).contains(&ReasonCode::CriticalCommand));
        assert!(codes("/dev/sda", Access::Write).contains(&ReasonCode::CriticalCommand));
    }

    #[test]
    fn broad_workspaces_are_refused() {
        let broad = Workspace::new(Some("/"), true, &[], "/home/dev");
        assert!(broad.too_broad.is_some());
        let findings = judge("etc/passwd", Access::Read, Some("/"), &broad);
        assert!(findings.iter().any(|finding| finding.code == ReasonCode::NoWorkspace));
        let home = Workspace::new(Some("/home/dev"), true, &[], "/home/dev");
        assert!(home.too_broad.is_some());
    }

    #[test]
    fn relative_paths_inside_the_workspace() {
        let workspace = workspace();
        assert_eq!(workspace.relative("/workspace/docs/a.md"), Some("docs/a.md"));
        assert_eq!(workspace.relative("/elsewhere/a.md"), None);
        assert!(!is_within("/workspace2", "/workspace"));
    }
}
