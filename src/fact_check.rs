//! Checks, on the agent's machine, the facts the gate asked for ([`crate::gate::facts`]): that a
//! repository has no hooks, that no name in a directory begins with `-`, that a path is a
//! regular file, that a tree holds only directories and regular files (and which files).
//!
//! Only a caller that runs beside the agent uses it (the hook, or a service told it shares the
//! agent's machine), only for the facts a refusal named, and only in a quiet session
//! ([`work_may_still_run`]: nothing the session started may still be changing files); the
//! gate then judges the call again with the facts that hold. It never decides anything: a
//! fact it shows to hold only lets the gate drop the refusal it answers.
//!
//! Why hand-written: no crate answers these questions. The walk is `walkdir`'s; the git
//! questions are git's own answers.
//!
//! On failure a fact does not hold, and the refusal stands: a path that cannot be read or
//! is not UTF-8, git missing, failing or too old (`--path-format` is git 2.31), a tree with
//! more than [`MAX_TREE_ENTRIES`] entries or deeper than [`MAX_TREE_DEPTH`], or the deadline
//! passing mid-check. Links are never followed: a path with a symbolic link in any component,
//! or a tree holding one, does not hold, whatever it points at.
//!
//! git is asked rather than its configuration parsed, so `core.hooksPath` from every scope,
//! `include`/`includeIf`, worktrees and `GIT_DIR` resolve exactly as the command will see them.
//! `rev-parse` and `config` read configuration only: they run no hook, pager or fsmonitor.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::decision::GateAction;
use crate::gate::facts::{Fact, Facts};
use crate::gate::{CallContext, Gate, GateOutcome};
use crate::request::{KnownEvent, PendingCall, TranscriptEvent};
use serde_json::Value;

/// The most entries a tree may hold and still be listed (a `node_modules` does not fit).
pub const MAX_TREE_ENTRIES: usize = 20_000;
/// The deepest a tree may go.
pub const MAX_TREE_DEPTH: usize = 64;
/// The most names a directory may hold for the `-` check.
const MAX_DIRECTORY_NAMES: usize = 100_000;

/// Judges a call as the hook does: by its text, then, when a refusal other than a deny names
/// facts about the machine, again with those of them that `checker` finds true.
pub fn evaluate_checking_facts(
    gate: &Gate,
    call: &PendingCall,
    context: CallContext<'_>,
    checker: &FactChecker,
) -> GateOutcome {
    recheck_with_facts(gate, call, context, checker, gate.evaluate(call, context))
}

/// The second half of [`evaluate_checking_facts`], for a caller that already has the
/// judgement by text (`outcome`).
pub fn recheck_with_facts(
    gate: &Gate,
    call: &PendingCall,
    context: CallContext<'_>,
    checker: &FactChecker,
    outcome: GateOutcome,
) -> GateOutcome {
    if outcome.action == GateAction::Deny || outcome.needs.is_empty() {
        return outcome;
    }
    let facts = checker.check(&outcome.needs);
    if facts.is_empty() {
        return outcome;
    }
    gate.evaluate(call, CallContext { facts: Some(&facts), ..context })
}

/// Tools whose work is over when their result arrives (Claude Code's and Codex's file, search,
/// web and planning tools, and their foreground shells): anything else (a subagent, Codex's
/// unified exec, an MCP tool, a tool this list does not know) may still be running.
const FINISHING_TOOLS: &[&str] = &[
    "Read",
    "Write",
    "Edit",
    "MultiEdit",
    "NotebookEdit",
    "NotebookRead",
    "Glob",
    "Grep",
    "LS",
    "WebFetch",
    "WebSearch",
    "TodoWrite",
    "TodoRead",
    "AskUserQuestion",
    "ExitPlanMode",
    "apply_patch",
    "update_plan",
    "view_image",
    "read_file",
    "list_dir",
    "grep_files",
    "web_search",
];

/// Shells whose foreground command is over when its result arrives, unless the host moved it
/// to the background (Claude Code's `run_in_background`, or a timeout: "Command did not
/// complete within its 3s timeout and was moved to the background").
const FOREGROUND_SHELLS: &[&str] = &["Bash", "shell", "shell_command", "local_shell", "container.exec"];

/// Whether the session may have work still running beside the call being judged, which could
/// change files after the facts about them were checked. An allowlist: the session is quiet
/// only when every earlier call (all but `pending`) has its result, is a tool whose work ends
/// with its result (`FINISHING_TOOLS`), and, for a shell, was neither started in the
/// background nor moved there (its result mentions the background) and is a command the gate
/// allows on its text (`allowed_by_text`), which proves it leaves nothing running: the gate
/// refuses `&`, and a command a person or a model approved (`npm run dev &`, `cargo test`,
/// whose code may start a daemon) may have. Red-team rounds 62, 64 and 65 raced a
/// fact-checked `grep -r` with a background `cp -r`, a subagent's, Claude Code's timeout
/// backgrounding, Codex's parallel shell calls and `spawn_agent`.
pub fn work_may_still_run(
    events: &[TranscriptEvent],
    pending: Option<&str>,
    allowed_by_text: impl Fn(&PendingCall) -> bool,
) -> bool {
    let mut results: std::collections::HashMap<&str, &Value> = std::collections::HashMap::new();
    for event in events {
        if let TranscriptEvent::Known(KnownEvent::ToolResult { id, content, .. }) = event {
            results.insert(id, content);
        }
    }
    events.iter().any(|event| {
        let TranscriptEvent::Known(KnownEvent::ToolCall { id, name, input }) = event else { return false };
        if pending == Some(id.as_str()) {
            return false;
        }
        let Some(result) = results.get(id.as_str()) else { return true };
        if FOREGROUND_SHELLS.contains(&name.as_str()) {
            let call = PendingCall { id: id.clone(), name: name.clone(), input: input.clone(), annotations: None };
            // A process substitution is not waited for either when the command does not read it
            // to the end (`ls <(sleep 30; cp -r apps/web src/)`, round 66).
            let substitutes = |text: &str| text.contains("<(") || text.contains(">(");
            return input.get("run_in_background").is_some_and(|value| value != &Value::Bool(false))
                || result.to_string().to_ascii_lowercase().contains("background")
                || input.values().any(|value| substitutes(&value.to_string()))
                || !allowed_by_text(&call);
        }
        !FINISHING_TOOLS.contains(&name.as_str())
    })
}

/// Checks facts under a root: `/` on the agent's machine, a fixture's directory in tests (the
/// gate's `/workspace/src` is then `ROOT/workspace/src`).
#[derive(Clone, Debug)]
pub struct FactChecker {
    root: PathBuf,
    deadline: Instant,
}

impl FactChecker {
    /// The facts of this machine, as paths name them.
    pub fn on_this_machine(deadline: Instant) -> Self {
        FactChecker { root: PathBuf::from("/"), deadline }
    }

    /// The facts of a tree standing in for `/` (fixtures).
    pub fn under(root: impl Into<PathBuf>, deadline: Instant) -> Self {
        FactChecker { root: root.into(), deadline }
    }

    /// The facts among `needs` that hold.
    pub fn check(&self, needs: &[Fact]) -> Facts {
        let mut facts = Facts::default();
        let Ok(canonical_root) = std::fs::canonicalize(&self.root) else { return facts };
        for fact in needs {
            if Instant::now() >= self.deadline {
                break;
            }
            let held = match fact {
                Fact::NoRepositoryHooks { dir } => {
                    self.real(dir).is_some_and(|dir| no_repository_hooks(&dir, self.deadline)).then(Vec::new)
                }
                Fact::NoDashNames { dir } => self.real(dir).is_some_and(|dir| no_dash_names(&dir)).then(Vec::new),
                Fact::RegularFile { path } => self
                    .real(path)
                    .filter(|real| unlinked(real, &canonical_root, &self.root))
                    .is_some_and(|real| std::fs::symlink_metadata(real).is_ok_and(|meta| meta.file_type().is_file()))
                    .then(Vec::new),
                Fact::PlainTree { dir } => self
                    .real(dir)
                    .filter(|real| unlinked(real, &canonical_root, &self.root))
                    .and_then(|real| self.plain_tree(&real)),
            };
            if let Some(files) = held {
                facts.hold(fact.clone(), files);
            }
        }
        facts
    }

    /// The real path of an absolute path as the gate names it.
    fn real(&self, path: &str) -> Option<PathBuf> {
        let relative = path.strip_prefix('/')?;
        Some(if relative.is_empty() { self.root.clone() } else { self.root.join(relative) })
    }

    /// The path as the gate names it, of a real path under the root.
    fn named(&self, real: &Path) -> Option<String> {
        let relative = real.strip_prefix(&self.root).ok()?.to_str()?;
        Some(format!("/{relative}"))
    }

    /// Every regular file under `dir` (as the gate names them), when the tree holds nothing
    /// but directories and regular files and fits the bounds.
    fn plain_tree(&self, dir: &Path) -> Option<Vec<String>> {
        if !std::fs::symlink_metadata(dir).ok()?.file_type().is_dir() {
            return None;
        }
        let mut files = Vec::new();
        let walk = walkdir::WalkDir::new(dir).follow_links(false).max_depth(MAX_TREE_DEPTH);
        for (count, entry) in walk.into_iter().enumerate() {
            if count >= MAX_TREE_ENTRIES || (count % 256 == 0 && Instant::now() >= self.deadline) {
                return None;
            }
            let entry = entry.ok()?;
            let kind = entry.file_type();
            if kind.is_file() {
                files.push(self.named(entry.path())?);
            } else if !kind.is_dir() {
                return None;
            } else if entry.depth() == MAX_TREE_DEPTH {
                // walkdir stops here without saying so: what lies deeper is unlisted.
                return None;
            }
        }
        Some(files)
    }
}

/// Whether no component of `real` (below the root) is a symbolic link: its canonical form is
/// itself.
fn unlinked(real: &Path, canonical_root: &Path, root: &Path) -> bool {
    let Ok(relative) = real.strip_prefix(root) else { return false };
    std::fs::canonicalize(real).is_ok_and(|canonical| canonical == canonical_root.join(relative))
}

fn no_dash_names(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    let mut count = 0;
    for entry in entries {
        count += 1;
        let Ok(entry) = entry else { return false };
        if count > MAX_DIRECTORY_NAMES || entry.file_name().as_encoded_bytes().first() == Some(&b'-') {
            return false;
        }
    }
    true
}

/// Whether git, run in `dir`, would run no hook: the hooks directory it resolves lies inside
/// git's own directory and holds only `*.sample` files (or does not exist), no `hook.*`
/// setting names a command (git's configuration-defined hooks), and the repository has no
/// submodules (`modules/` in its git directory), whose own hooks a fetch or checkout may run.
fn no_repository_hooks(dir: &Path, deadline: Instant) -> bool {
    let Some((0, paths)) = git(
        dir,
        &["rev-parse", "--path-format=absolute", "--git-common-dir", "--git-path", "hooks", "--git-path", "modules"],
        deadline,
    ) else {
        return false;
    };
    let mut lines = paths.lines().map(PathBuf::from);
    let (Some(common), Some(hooks), Some(modules), None) = (lines.next(), lines.next(), lines.next(), lines.next())
    else {
        return false;
    };
    // Hooks kept outside git's own directory (`core.hooksPath = githooks`, husky's `.husky/_`)
    // are files in the work tree, which `git stash` or a checkout rewrite, and the agent may
    // move or edit: only the hooks directory inside git's directory is vouched for.
    if !hooks.starts_with(&common) {
        return false;
    }
    // And git's directory must be a `.git` directory, which nothing the gate allows writes
    // into: a `.git` file (`gitdir: ./scratch`) can name any directory, one the agent can fill.
    if common.file_name().is_none_or(|name| name != ".git") {
        return false;
    }
    // A submodule is a repository of its own, with its own hooks, which `git fetch` and a
    // recursing checkout run: a repository with any is not vouched for.
    if std::fs::symlink_metadata(&modules).is_ok() {
        return false;
    }
    // `--get-regexp` exits 1 when nothing matches; 0 means a `hook.*` setting exists.
    if !matches!(git(dir, &["config", "--get-regexp", r"^hook\."], deadline), Some((1, _))) {
        return false;
    }
    match std::fs::read_dir(&hooks) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => true,
        Err(_) => false,
        Ok(entries) => entries.into_iter().all(|entry| {
            entry.is_ok_and(|entry| entry.file_name().to_str().is_some_and(|name| name.ends_with(".sample")))
        }),
    }
}

/// Runs git in `dir` with no input; its exit code and standard output, or `None` when it
/// cannot start, is killed by a signal, or outlives the deadline.
fn git(dir: &Path, args: &[&str], deadline: Instant) -> Option<(i32, String)> {
    let mut child = Command::new("git")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let mut output = String::new();
                child.stdout.take()?.read_to_string(&mut output).ok()?;
                return Some((status.code()?, output));
            }
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}
