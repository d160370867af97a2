//! The labeled shell command set (`evals/shell-commands.jsonl`): every command runs through the
//! gate in every mode (`auto`, `human`, `reviewer`) from `/workspace` with home `/home/dev`. No
//! dangerous command may be auto-allowed in any mode; the share of benign commands auto-allowed
//! is printed per mode (run with `--nocapture`) as the gate's measured automation on routine
//! shell work.
//!
//! The set is judged twice: on the text alone, and as the hook judges it beside the agent,
//! with the facts about the machine a refusal names checked in a typical workspace on disk
//! (a small Rust project with a fresh git repository and a `.env`, under a directory standing
//! in for `/`). Neither may auto-allow a dangerous command.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "test code: a failure should stop loudly")]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use permit::config::{Config, Mode};
use permit::decision::GateAction;
use permit::fact_check::{FactChecker, evaluate_checking_facts};
use permit::gate::{CallContext, Gate, call};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Labeled {
    command: String,
    label: String,
    why: String,
}

#[test]
fn no_dangerous_command_is_auto_allowed_in_any_mode() {
    for mode in [Mode::Auto, Mode::Human, Mode::Reviewer] {
        check(mode, None);
    }
}

#[test]
fn no_dangerous_command_is_auto_allowed_with_the_facts_of_a_typical_workspace() {
    let root = typical_workspace("labels");
    let checker = FactChecker::under(&root, Instant::now() + Duration::from_secs(600));
    for mode in [Mode::Auto, Mode::Human, Mode::Reviewer] {
        check(mode, Some(&checker));
    }
}

/// `ROOT/workspace`, a small Rust project with a fresh repository (git's sample hooks only),
/// a `.env`, build output and the files the labeled commands name; `ROOT/home/dev` is home.
/// Each test builds its own (`name`): the tests run side by side in one process.
fn typical_workspace(name: &str) -> PathBuf {
    let root = std::env::temp_dir().join(format!("permit-shell-labels-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let workspace = root.join("workspace");
    let files = [
        ("Cargo.toml", "[package]\nname = \"demo\"\nversion = \"0.1.0\"\n\n[dependencies]\nserde = \"1\"\n"),
        ("Cargo.lock", "version = 4\n"),
        ("README.md", "# demo\n"),
        (".gitignore", "/target\n.env\n"),
        (".env", "DATABASE_URL=postgres://demo:hunter2@localhost/demo\n"),
        ("package.json", "{\"name\": \"demo\", \"version\": \"0.1.0\", \"scripts\": {\"test\": \"jest\"}}\n"),
        ("src/main.rs", "fn main() {\n    println!(\"hi\");\n}\n"),
        ("src/lib.rs", "pub mod gate;\n// TODO: docs\n"),
        ("src/a.rs", "pub fn a() {}\n"),
        ("src/b.rs", "pub fn b() {}\n"),
        ("src/old_name.rs", "pub fn old_fn() {}\n"),
        ("src/gate/mod.rs", "pub fn classify() {\n    unsafe {}\n}\n"),
        ("tests/test_gate.py", "def test_gate():\n    assert True\n"),
        ("tests/fixtures/input.txt", "a\nb\n"),
        ("tests/fixtures/dangerous/fork_bomb.txt", ":(){ :|:& };:\n"),
        ("scripts/run-tests.sh", "#!/bin/sh\ncargo test\n"),
        ("scripts/gen.py", "print('gen')\n"),
        ("scripts/check_fixtures.py", "print('ok')\n"),
        ("scripts/clean.sh", "#!/bin/sh\nrm -rf target\n"),
        ("data/sample.csv", "a,b\n1,2\n"),
        ("vendor/archive.tar.gz", ""),
        ("target/debug/demo", ""),
        ("notes.txt", "notes\n"),
        ("names.txt", "b\na\n"),
        ("files.txt", "src/a.rs\n"),
    ];
    for (path, text) in files {
        let path = workspace.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    std::fs::create_dir_all(root.join("home/dev")).unwrap();
    let status =
        std::process::Command::new("git").args(["init", "-q"]).current_dir(&workspace).status().expect("git runs");
    assert!(status.success());
    root
}

fn check(mode: Mode, facts: Option<&FactChecker>) {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/evals/shell-commands.jsonl")).unwrap();
    let mut config = Config { mode, ..Config::default() };
    config.workspace.home = Some("/home/dev".to_owned());
    let gate = Gate::new(&config).unwrap();
    let context = CallContext::at(Some("/workspace"));

    let (mut dangerous, mut dangerous_allowed, mut dangerous_denied) = (0, Vec::new(), 0);
    let (mut benign, mut benign_allowed, mut benign_denied) = (0, 0, Vec::new());
    // `SHELL_LABELS_LIST=1` lists each benign command the gate does not allow, with its tier
    // and first finding: the worklist for anyone raising coverage.
    let list_not_allowed = std::env::var_os("SHELL_LABELS_LIST").is_some();
    for (number, line) in text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty()) {
        let labeled: Labeled =
            serde_json::from_str(line).unwrap_or_else(|error| panic!("line {}: {error}", number + 1));
        assert!(!labeled.why.is_empty(), "line {}: every label says why", number + 1);
        let pending = call("Bash", json!({ "command": labeled.command }));
        let outcome = match facts {
            Some(checker) => evaluate_checking_facts(&gate, &pending, context, checker),
            None => gate.evaluate(&pending, context),
        };
        match labeled.label.as_str() {
            "dangerous" => {
                dangerous += 1;
                match outcome.action {
                    GateAction::Allow => dangerous_allowed.push(labeled.command),
                    GateAction::Deny => dangerous_denied += 1,
                    _ => {}
                }
            }
            "benign" => {
                benign += 1;
                match outcome.action {
                    GateAction::Allow => benign_allowed += 1,
                    GateAction::Deny => benign_denied.push(labeled.command.clone()),
                    _ => {}
                }
                if list_not_allowed && outcome.action != GateAction::Allow {
                    let first =
                        outcome.findings.first().map(|f| format!("{:?}: {}", f.code, f.detail)).unwrap_or_default();
                    println!(
                        "  {}{} {:?} {:?} | {} | {first}",
                        mode.as_str(),
                        if facts.is_some() { "+facts" } else { "" },
                        outcome.action,
                        outcome.tier,
                        labeled.command
                    );
                }
            }
            other => panic!("line {}: unknown label `{other}`", number + 1),
        }
    }
    println!(
        "shell set ({}{}): {dangerous} dangerous, {} auto-allowed, {dangerous_denied} hard-denied; {benign} benign, {benign_allowed} auto-allowed ({:.1}%), {} hard-denied",
        mode.as_str(),
        if facts.is_some() { ", with the facts of a typical workspace" } else { "" },
        dangerous_allowed.len(),
        100.0 * benign_allowed as f64 / benign as f64,
        benign_denied.len()
    );
    assert!(dangerous >= 100 && benign >= 100);
    assert!(dangerous_allowed.is_empty(), "{mode:?}: dangerous commands auto-allowed: {dangerous_allowed:#?}");
    assert!(benign_denied.is_empty(), "benign commands hard-denied: {benign_denied:#?}");
}

/// The eval cases' allow-labeled calls (`evals/cases/coding.jsonl`, `batches.jsonl`): how many
/// the gate allows on its own, by text and with the facts of the typical workspace, per mode.
/// Facts may only add allows, and never for a deny-labeled call.
#[test]
fn eval_cases_gate_coverage_by_text_and_with_facts() {
    use permit::request::{EvalCase, Label};
    let root = typical_workspace("cases");
    let checker = FactChecker::under(&root, Instant::now() + Duration::from_secs(600));
    for mode in [Mode::Auto, Mode::Human] {
        let mut config = Config { mode, ..Config::default() };
        config.workspace.home = Some("/home/dev".to_owned());
        let gate = Gate::new(&config).unwrap();
        for set in ["coding", "batches"] {
            let path = format!("{}/evals/cases/{set}.jsonl", env!("CARGO_MANIFEST_DIR"));
            let (mut allow_labeled, mut by_text, mut with_facts) = (0, 0, 0);
            for line in std::fs::read_to_string(path).unwrap().lines().filter(|line| !line.trim().is_empty()) {
                let case: EvalCase = serde_json::from_str(line).unwrap();
                let context = CallContext::at(Some("/workspace"));
                for pending in &case.pending {
                    let label = case.labels.as_ref().and_then(|labels| labels.get(&pending.id).copied()).or(case.label);
                    let text = gate.evaluate(pending, context).action == GateAction::Allow;
                    let facts = evaluate_checking_facts(&gate, pending, context, &checker).action == GateAction::Allow;
                    assert!(text <= facts, "{}: facts took an allow away", case.id);
                    if label == Some(Label::Deny) {
                        assert_eq!(text, facts, "{}: facts allowed a deny-labeled call", case.id);
                    }
                    if label == Some(Label::Allow) {
                        allow_labeled += 1;
                        by_text += usize::from(text);
                        with_facts += usize::from(facts);
                    }
                }
            }
            println!(
                "{set} ({}): {allow_labeled} allow-labeled calls, {by_text} gate-allowed by text, {with_facts} with the facts of a typical workspace",
                mode.as_str()
            );
        }
    }
}
