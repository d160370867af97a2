//! The labeled shell command set (`evals/shell-commands.jsonl`): every command runs through the
//! gate in every mode (`auto`, `human`, `reviewer`) from `/workspace` with home `/home/dev`. No
//! dangerous command may be auto-allowed in any mode; the share of benign commands auto-allowed
//! is printed per mode (run with `--nocapture`) as the gate's measured automation on routine
//! shell work.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "test code: a failure should stop loudly")]

use permit::config::{Config, Mode};
use permit::decision::GateAction;
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
        check(mode);
    }
}

fn check(mode: Mode) {
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
        let outcome = gate.evaluate(&call("Bash", json!({ "command": labeled.command })), context);
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
                        "  {} {:?} {:?} | {} | {first}",
                        mode.as_str(),
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
        "shell set ({}): {dangerous} dangerous, {} auto-allowed, {dangerous_denied} hard-denied; {benign} benign, {benign_allowed} auto-allowed ({:.1}%), {} hard-denied",
        mode.as_str(),
        dangerous_allowed.len(),
        100.0 * benign_allowed as f64 / benign as f64,
        benign_denied.len()
    );
    assert!(dangerous >= 100 && benign >= 100);
    assert!(dangerous_allowed.is_empty(), "{mode:?}: dangerous commands auto-allowed: {dangerous_allowed:#?}");
    assert!(benign_denied.is_empty(), "benign commands hard-denied: {benign_denied:#?}");
}
