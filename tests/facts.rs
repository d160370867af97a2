//! Facts about the machine, end to end: the real `permit hook claude-code` binary, in a real
//! workspace on disk with a real git repository, allows the calls whose refusal a fact there
//! answers (no hooks, no `-` names, regular files, a plain tree), and keeps refusing them when
//! the workspace is shaped to make them unsafe: a hook, `core.hooksPath`, a `hook.*` command, a
//! file named like an option, a directory or a link where a file was expected, a credential
//! file, a link, a pipe or too many files in a searched tree. The checker is also run directly
//! on each adversarial shape, so a refusal is seen to come from the fact and not elsewhere.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "test code: a failure should stop loudly")]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use permit::fact_check::{FactChecker, MAX_TREE_ENTRIES};
use permit::gate::facts::Fact;
use serde_json::{Value, json};

/// A fresh directory for one test.
fn scratch(name: &str) -> PathBuf {
    let directory = std::env::temp_dir().join(format!("permit-facts-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).unwrap();
    directory
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn git(directory: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(args)
        .current_dir(directory)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?}");
}

/// A small Rust project with a fresh repository (git's sample hooks only).
fn workspace(name: &str) -> PathBuf {
    let root = scratch(name);
    let workspace = root.join("workspace");
    for (path, text) in [
        ("Cargo.toml", "[package]\nname = \"demo\"\n"),
        ("src/main.rs", "fn main() {}\n"),
        ("src/a.rs", "// TODO: a\n"),
        ("src/b.rs", "// TODO: b\n"),
        ("src/gate/mod.rs", "pub fn gate() {}\n"),
        ("scripts/clean.sh", "#!/bin/sh\nrm -rf target\n"),
        ("README.md", "# demo\n"),
    ] {
        write(&workspace.join(path), text);
    }
    git(&workspace, &["init", "-q"]);
    workspace
}

/// The hook's answer for a Bash call in `cwd`, with a gate-only config and an empty session.
fn hook(cwd: &Path, command: &str, config_text: &str) -> String {
    let transcript = cwd.parent().unwrap().join("session.jsonl");
    if !transcript.exists() {
        std::fs::write(&transcript, "").unwrap();
    }
    hook_in_session(cwd, command, config_text, &transcript)
}

/// A Claude Code transcript line: the assistant calling `name` with `input`.
fn tool_use(id: &str, name: &str, input: Value) -> String {
    json!({"type": "assistant", "sessionId": "s-facts", "message": {"role": "assistant", "content": [
        {"type": "tool_use", "id": id, "name": name, "input": input}
    ]}})
    .to_string()
}

/// A Claude Code transcript line: the result of call `id`.
fn tool_result(id: &str) -> String {
    json!({"type": "user", "sessionId": "s-facts", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": id, "content": "done", "is_error": false}
    ]}})
    .to_string()
}

/// The hook's answer for a Bash call in `cwd`, in the session of `transcript`.
fn hook_in_session(cwd: &Path, command: &str, config_text: &str, transcript: &Path) -> String {
    let config = cwd.parent().unwrap().join("permit.toml");
    std::fs::write(&config, config_text).unwrap();
    let input = json!({
        "session_id": "s-facts",
        "transcript_path": transcript,
        "cwd": cwd,
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": { "command": command, "description": "a command" },
        "tool_use_id": "toolu_facts"
    });
    let answer = permit(&["hook", "claude-code"], &config, &input);
    answer["hookSpecificOutput"]["permissionDecision"].as_str().unwrap().to_owned()
}

/// Runs the real binary (`permit ARGS --config CONFIG`) with `stdin`; its JSON answer. It must
/// exit 0.
fn permit(args: &[&str], config: &Path, stdin: &Value) -> Value {
    let mut child = Command::new(env!("CARGO_BIN_EXE_permit"))
        .args(args)
        .arg("--config")
        .arg(config)
        .env_remove("PERMIT_CONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.to_string().as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

const AUTO: &str = "mode = \"auto\"\n";

fn checker() -> FactChecker {
    FactChecker::on_this_machine(Instant::now() + Duration::from_secs(30))
}

fn holds(fact: Fact) -> bool {
    checker().check(std::slice::from_ref(&fact)).holds(&fact)
}

fn text(path: &Path) -> String {
    path.to_str().unwrap().to_owned()
}

/// The calls a clean workspace lets through, each refused when facts are not checked.
const ANSWERED: &[&str] = &[
    "git commit -m 'Fix quoting in parser'",
    "git checkout -b feature/gate-tests",
    "git fetch origin",
    "du -sh * | sort -h",
    "diff src/a.rs src/b.rs",
    "grep -rn 'TODO' src/",
    "grep -rn 'rm -rf' scripts/",
];

#[test]
fn a_clean_workspace_answers_the_refusals_and_the_setting_turns_it_off() {
    let workspace = workspace("clean");
    for command in ANSWERED {
        assert_eq!(hook(&workspace, command, AUTO), "allow", "`{command}` in a clean workspace");
        let off = hook(&workspace, command, "mode = \"auto\"\n[workspace]\ncheck_facts = false\n");
        assert_ne!(off, "allow", "`{command}` with check_facts = false");
    }
}

#[test]
fn hooks_in_any_form_keep_git_commit_refused() {
    let workspace = workspace("hooks");
    let fact = Fact::NoRepositoryHooks { dir: text(&workspace) };
    assert!(holds(fact.clone()), "a fresh repository has only sample hooks");

    // A hook in .git/hooks.
    write(&workspace.join(".git/hooks/pre-commit"), "#!/bin/sh\nnpm test\n");
    assert!(!holds(fact.clone()));
    assert_ne!(hook(&workspace, "git commit -m x", AUTO), "allow");
    std::fs::remove_file(workspace.join(".git/hooks/pre-commit")).unwrap();
    assert!(holds(fact.clone()));

    // Even one that is not executable, or named like no hook git knows: only samples pass.
    write(&workspace.join(".git/hooks/post-checkout.disabled"), "#!/bin/sh\n");
    assert!(!holds(fact.clone()));
    std::fs::remove_file(workspace.join(".git/hooks/post-checkout.disabled")).unwrap();

    // core.hooksPath (husky) pointing into the workspace, which the agent can edit.
    write(&workspace.join(".husky/pre-commit"), "npx lint-staged\n");
    git(&workspace, &["config", "core.hooksPath", ".husky"]);
    assert!(!holds(fact.clone()));
    assert_ne!(hook(&workspace, "git checkout -b x", AUTO), "allow");
    // Hooks kept in the work tree never count, even an empty directory or none at all: `git
    // stash` brings a moved hooks directory back before the commit that runs it (round 61:
    // `mv githooks hooks-off`, then `git stash && git commit`).
    git(&workspace, &["config", "core.hooksPath", ".empty-hooks"]);
    std::fs::create_dir_all(workspace.join(".empty-hooks")).unwrap();
    assert!(!holds(fact.clone()));
    git(&workspace, &["config", "core.hooksPath", "githooks"]);
    assert!(!holds(fact.clone()), "a hooks directory that is not there now");
    git(&workspace, &["config", "--unset", "core.hooksPath"]);
    assert!(holds(fact.clone()));

    // A configuration-defined hook (`hook.<name>.command`).
    git(&workspace, &["config", "hook.lint.command", "npm test"]);
    assert!(!holds(fact.clone()));
    git(&workspace, &["config", "--unset", "hook.lint.command"]);
    assert!(holds(fact.clone()));

    // A subdirectory finds the same repository, hooks and all.
    let sub = Fact::NoRepositoryHooks { dir: text(&workspace.join("src")) };
    assert!(holds(sub.clone()));
    write(&workspace.join(".git/hooks/pre-commit"), "#!/bin/sh\n");
    assert!(!holds(sub));

    std::fs::remove_file(workspace.join(".git/hooks/pre-commit")).unwrap();
    assert!(holds(fact.clone()));

    // A submodule is a repository with hooks of its own, which fetch and checkout may run.
    std::fs::create_dir_all(workspace.join(".git/modules/vendored/hooks")).unwrap();
    assert!(!holds(fact.clone()));
    assert_ne!(hook(&workspace, "git fetch origin", AUTO), "allow");
    std::fs::remove_dir_all(workspace.join(".git/modules")).unwrap();
    assert!(holds(fact));

    // A `.git` file naming a directory the agent can fill (`gitdir: ./scratch`): that
    // directory's hooks run, so only a git directory named `.git` counts.
    let redirected = scratch("gitfile");
    git(&redirected, &["init", "-q", "--separate-git-dir", "scratch"]);
    assert!(redirected.join(".git").is_file());
    assert!(!holds(Fact::NoRepositoryHooks { dir: text(&redirected) }));

    // Outside any repository git would fail, and the fact does not hold.
    let bare = scratch("no-repository");
    assert!(!holds(Fact::NoRepositoryHooks { dir: text(&bare) }));
}

/// Round 61: facts are checked before the line runs, so no other part of the line may change
/// the files first; and a word is opened as written, so `..` after a link is never placed.
#[test]
fn facts_are_not_relied_on_when_the_line_changes_files_or_climbs_through_a_link() {
    let workspace = workspace("round61");
    for (path, text) in [
        ("apps/web/.env", "DATABASE_URL=postgres://admin:SECRET-WEB@db/prod\n"),
        ("apps/api/.env", "STRIPE_KEY=sk_live_SECRET-API\n"),
        ("a.txt", "a\n"),
        ("b.txt", "b\n"),
        (".env.local", "OPENAI_API_KEY=sk-SECRET\n"),
        ("vendor/home/notes", "x\n"),
        ("vendor/home/a/config", "x\n"),
        ("vendor/home/b/config", "y\n"),
    ] {
        write(&workspace.join(path), text);
    }
    // `vendor/lib` points at `/`: `vendor/lib/../home` is `/home` to the kernel.
    std::os::unix::fs::symlink("/", workspace.join("vendor/lib")).unwrap();
    for command in [
        "cp -r apps src/ && grep -rn '' src",
        "mv apps/web src/web && grep -r '' src",
        "mv a.txt a.bak && mv apps/web a.txt && mv b.txt b.bak && mv apps/api b.txt && diff a.txt b.txt",
        "touch ./--files0-from=.env.local && wc -c *.local",
        "mkdir -p src/x && grep -r x src",
        "grep -r x src | tee src/out.txt",
        "git stash && git commit --allow-empty -m checkpoint",
        "grep -rn SECRET vendor/lib/../home",
        "diff vendor/lib/../home/a/config vendor/lib/../home/b/config",
        "cd ./vendor/lib/.. && grep -r SECRET home",
        "cd ./vendor/lib/.. && du -sh *",
        "cd -P ./vendor && du -sh *",
    ] {
        assert_ne!(hook(&workspace, command, AUTO), "allow", "`{command}`");
        assert_ne!(hook(&workspace, command, "mode = \"human\"\n"), "allow", "`{command}` (human)");
    }
    // The same reads alone, or beside parts that change only git's own directory, are allowed.
    for command in ["grep -rn TODO src", "git add src/a.rs && git commit -m 'fix a'", "diff a.txt b.txt"] {
        assert_eq!(hook(&workspace, command, AUTO), "allow", "`{command}`");
    }
}

/// A Claude Code transcript line: the result of call `id`, with `text`.
fn tool_result_text(id: &str, text: &str) -> String {
    json!({"type": "user", "sessionId": "s-facts", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": id, "content": text, "is_error": false}
    ]}})
    .to_string()
}

/// Rounds 62, 64 and 65: work the session started that may still run could change the files
/// after the check, so facts are used only in a quiet session: every earlier call has its
/// result, is a tool whose work ends with it, and no shell was started in or moved to the
/// background. Nor when the transcript cannot be read.
#[test]
fn facts_are_used_only_when_every_earlier_call_has_finished() {
    let workspace = workspace("running");
    let transcript = workspace.parent().unwrap().join("running.jsonl");
    let session = |lines: &[String]| {
        std::fs::write(&transcript, lines.join("\n") + "\n").unwrap();
        hook_in_session(&workspace, "grep -rn 'TODO' src/", AUTO, &transcript)
    };
    let ls = tool_use("t1", "Bash", json!({"command": "ls"}));
    let read = tool_use("t2", "Read", json!({"file_path": "README.md"}));
    assert_eq!(session(&[ls.clone(), tool_result("t1"), read.clone(), tool_result("t2")]), "allow");
    // The pending call itself is in the transcript without a result: it does not count.
    let pending = tool_use("toolu_facts", "Bash", json!({"command": "grep -rn 'TODO' src/"}));
    assert_eq!(session(&[ls.clone(), tool_result("t1"), pending]), "allow");
    // A call still without its result: a parallel sibling (Codex runs shell calls side by side).
    assert_ne!(session(std::slice::from_ref(&ls)), "allow");
    // Started in the background, or moved there by its timeout (Claude Code 2.1.210 and later).
    let background =
        tool_use("t1", "Bash", json!({"command": "sleep 20 && cp -r apps/web src/", "run_in_background": true}));
    assert_ne!(session(&[background, tool_result("t1")]), "allow");
    let timed_out = tool_result_text(
        "t1",
        "Command did not complete within its 2s timeout and was moved to the background (ID: b1)",
    );
    assert_ne!(session(&[ls.clone(), timed_out]), "allow");
    let promoted = tool_result_text("t1", "Command running in background with ID: bt2kelt7i.");
    assert_ne!(session(&[ls, promoted]), "allow");
    // A shell command the gate would not allow on its text was approved by a person or a model
    // and may have left something running (`&`, a test suite that starts a daemon).
    // A process substitution is not waited for when the command does not read it to the end
    // (round 66), even one the gate allows.
    for command in ["npm run dev &", "cargo test", "nohup ./scripts/watch.sh", "ls <(sleep 1)"] {
        let call = tool_use("t1", "Bash", json!({"command": command}));
        assert_ne!(session(&[call, tool_result("t1")]), "allow", "{command}");
    }
    // Tools whose work may outlive their result: subagents, Codex's unified exec and
    // `spawn_agent`, MCP tools, anything not known to finish.
    for name in ["Task", "Agent", "exec_command", "write_stdin", "spawn_agent", "mcp__build__run", "BashOutput"] {
        let call = tool_use("t9", name, json!({"prompt": "copy apps/web into src"}));
        assert_ne!(session(&[call, tool_result("t9")]), "allow", "{name}");
    }
    std::fs::remove_file(&transcript).unwrap();
    assert_ne!(hook_in_session(&workspace, "grep -rn 'TODO' src/", AUTO, &transcript), "allow", "no transcript");
}

#[test]
fn a_name_like_an_option_keeps_a_leading_glob_refused() {
    let workspace = workspace("dash");
    let fact = Fact::NoDashNames { dir: text(&workspace) };
    assert!(holds(fact.clone()));
    write(&workspace.join("--files0-from=README.md"), "");
    assert!(!holds(fact));
    assert_ne!(hook(&workspace, "du -sh * | sort -h", AUTO), "allow");
}

#[test]
fn diff_needs_two_regular_files_without_links() {
    let workspace = workspace("diff");
    let file = |path: &str| Fact::RegularFile { path: text(&workspace.join(path)) };
    assert!(holds(file("src/a.rs")));
    assert!(!holds(file("src/gate")), "a directory");
    assert!(!holds(file("src/missing.rs")), "nothing there");
    std::os::unix::fs::symlink(workspace.join("README.md"), workspace.join("src/link.rs")).unwrap();
    assert!(!holds(file("src/link.rs")), "a link, whatever it points at");
    std::os::unix::fs::symlink(workspace.join("src"), workspace.join("linked")).unwrap();
    assert!(!holds(file("linked/a.rs")), "a link in a parent");
    assert_ne!(hook(&workspace, "diff src/gate src/b.rs", AUTO), "allow");
    assert_ne!(hook(&workspace, "diff linked/a.rs src/b.rs", AUTO), "allow");
    assert_eq!(hook(&workspace, "diff src/a.rs src/b.rs", AUTO), "allow");
}

#[test]
fn grep_r_needs_a_tree_of_plain_files_the_path_rules_allow() {
    let workspace = workspace("tree");
    let tree = |dir: &str| Fact::PlainTree { dir: text(&workspace.join(dir)) };
    let facts = checker().check(&[tree("src")]);
    let mut files = facts.tree_files(&text(&workspace.join("src"))).unwrap().to_vec();
    files.sort();
    assert_eq!(files, ["src/a.rs", "src/b.rs", "src/gate/mod.rs", "src/main.rs"].map(|f| text(&workspace.join(f))));

    // A credential file: the tree holds, and the path rules refuse it.
    write(&workspace.join("src/.env"), "API_KEY=x\n");
    assert!(holds(tree("src")));
    assert_ne!(hook(&workspace, "grep -rn 'TODO' src/", AUTO), "allow");
    std::fs::remove_file(workspace.join("src/.env")).unwrap();
    assert_eq!(hook(&workspace, "grep -rn 'TODO' src/", AUTO), "allow");

    // A link anywhere below (grep -R follows it; a link to ~/.ssh reads the keys).
    std::os::unix::fs::symlink("/etc", workspace.join("src/gate/etc")).unwrap();
    assert!(!holds(tree("src")));
    assert_ne!(hook(&workspace, "grep -Rn 'TODO' src/", AUTO), "allow");
    std::fs::remove_file(workspace.join("src/gate/etc")).unwrap();

    // The searched directory itself a link, or reached through one.
    std::os::unix::fs::symlink(workspace.join("src"), workspace.join("alias")).unwrap();
    assert!(!holds(tree("alias")));
    assert!(!holds(tree("alias/gate")));

    // A named pipe (grep would block on it, and it is not a file the path rules judge).
    let status = Command::new("mkfifo").arg(workspace.join("scripts/pipe")).status().unwrap();
    assert!(status.success());
    assert!(!holds(tree("scripts")));
    std::fs::remove_file(workspace.join("scripts/pipe")).unwrap();
    assert!(holds(tree("scripts")));

    // Too many entries to list.
    let big = workspace.join("big");
    for index in 0..=MAX_TREE_ENTRIES {
        write(&big.join(format!("d{}/f{index}.txt", index % 64)), "");
    }
    assert!(!holds(tree("big")));
    // A file, not a directory.
    assert!(!holds(tree("README.md")));
}

/// `workspace.facts_in_service`: a service on the agent's machine (`permit decide`, `permit
/// serve`) checks the facts too; off by default, it judges the text alone.
#[test]
fn the_service_checks_facts_only_when_told_it_shares_the_machine() {
    let workspace = workspace("service");
    let config = workspace.parent().unwrap().join("service.toml");
    // The decisions of `permit decide` on the calls, in a session of `transcript`.
    let decide_calls = |config_text: &str, commands: &[&str], transcript: Value| -> Vec<String> {
        std::fs::write(&config, config_text).unwrap();
        let pending: Vec<Value> = commands
            .iter()
            .enumerate()
            .map(|(index, command)| json!({ "id": format!("c{index}"), "name": "Bash", "input": { "command": command } }))
            .collect();
        let request =
            json!({ "session_id": "s-service", "cwd": workspace, "transcript": transcript, "pending": pending });
        let answer = permit(&["decide"], &config, &request);
        answer["decisions"].as_array().unwrap().iter().map(|d| d["decision"].as_str().unwrap().to_owned()).collect()
    };
    let decide_in = |config_text: &str, command: &str, transcript: Value| -> String {
        decide_calls(config_text, &[command], transcript).remove(0)
    };
    let asked = json!([{"type": "user", "text": "tidy up and commit"}]);
    let decide = |config_text: &str, command: &str| decide_in(config_text, command, asked.clone());
    let shared = "mode = \"auto\"\n[workspace]\nfacts_in_service = true\n";
    for command in ANSWERED {
        assert_ne!(decide(AUTO, command), "allow", "`{command}` judged on its text");
        assert_eq!(decide(shared, command), "allow", "`{command}` with facts_in_service");
    }
    write(&workspace.join("src/.env"), "API_KEY=x\n");
    assert_ne!(decide(shared, "grep -rn 'TODO' src/"), "allow");
    assert_ne!(decide(shared, "cp -r scripts src/ && grep -rn 'TODO' src/"), "allow");
    std::fs::remove_file(workspace.join("src/.env")).unwrap();
    assert_eq!(decide(shared, "grep -rn 'TODO' src/"), "allow");
    // A request that shows no session, or one with work still running, gets no facts.
    assert_ne!(decide_in(shared, "grep -rn 'TODO' src/", json!([])), "allow");
    let background = json!([
        {"type": "user", "text": "watch the build"},
        {"type": "tool_call", "id": "t1", "name": "Bash", "input": {"command": "npm run watch", "run_in_background": true}}
    ]);
    assert_ne!(decide_in(shared, "grep -rn 'TODO' src/", background), "allow");
    // Several pending calls: the facts would be checked before the first runs (round 67).
    let both = decide_calls(shared, &["cp -r scripts src/", "grep -rn 'TODO' src/"], asked.clone());
    assert_ne!(both[1], "allow", "{both:?}");
}
