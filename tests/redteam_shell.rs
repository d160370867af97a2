//! The red team's shell attacks (`evals/redteam-shell.jsonl`): every line is a call whose command
//! was run in a sandbox and confirmed harmful (code execution, secret reads, persistence, agent
//! policy rewrites, exfiltration, deleting the home directory). Each pending call runs through the
//! gate in both `auto` and `human` mode from the case's `cwd` with home `/home/dev`; none may be
//! allowed by the gate on its own. The per-category counts of gate allows are printed (run with
//! `--nocapture`).
//!
//! The file is read as plain JSON (`serde_json::Value`), not through the crate's request types, so
//! this test does not depend on how the eval format evolves.
//!
//! `evals/redteam-shell-limits.jsonl` holds the confirmed attacks outside what a lexical gate can
//! see (symlinks shipped in the repository, a host that reports a directory inside the project as
//! the working directory, a search that walks into an unignored secret); README's "Known limits of the gate" says why. They are checked for
//! shape here and their gate answers are printed, but they are not required to be refused.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "test code: a failure should stop loudly")]

use std::collections::BTreeMap;

use permit::config::{Config, Mode};
use permit::decision::GateAction;
use permit::gate::{CallContext, Gate, call};
use serde_json::Value;

/// One pending call of one case.
struct Attack {
    id: String,
    category: String,
    cwd: String,
    tool: String,
    input: Value,
}

fn attacks() -> Vec<Attack> {
    load(concat!(env!("CARGO_MANIFEST_DIR"), "/evals/redteam-shell.jsonl"))
}

fn load(path: &str) -> Vec<Attack> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{path}: {error}"));
    let mut attacks = Vec::new();
    for (number, line) in text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty()) {
        let case: Value = serde_json::from_str(line).unwrap_or_else(|error| panic!("line {}: {error}", number + 1));
        let field = |name: &str| {
            case.get(name)
                .and_then(Value::as_str)
                .unwrap_or_else(|| panic!("line {}: `{name}` must be a string", number + 1))
                .to_owned()
        };
        let (id, category, cwd) = (field("id"), field("category"), field("cwd"));
        assert_eq!(
            case.get("label").and_then(Value::as_str),
            Some("deny"),
            "{id}: every red-team case is labeled deny"
        );
        let pending = case
            .get("pending")
            .and_then(Value::as_array)
            .filter(|pending| !pending.is_empty())
            .unwrap_or_else(|| panic!("{id}: `pending` must be a non-empty array"));
        for call in pending {
            let tool =
                call.get("name").and_then(Value::as_str).unwrap_or_else(|| panic!("{id}: pending call without a name"));
            let input = call.get("input").cloned().unwrap_or_else(|| panic!("{id}: pending call without an input"));
            attacks.push(Attack {
                id: id.clone(),
                category: category.clone(),
                cwd: cwd.clone(),
                tool: tool.to_owned(),
                input,
            });
        }
    }
    attacks
}

/// The command an attack runs, for the failure message.
fn shown(attack: &Attack) -> String {
    let command = ["command", "cmd"].iter().find_map(|field| attack.input.get(*field)).unwrap_or(&attack.input);
    let command = match command {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let mut extra = String::new();
    for field in ["workdir", "working_directory", "env"] {
        if let Some(value) = attack.input.get(field) {
            extra.push_str(&format!(" [{field}: {value}]"));
        }
    }
    format!("{}: {}{extra}", attack.tool, command.replace('\n', "⏎"))
}

#[test]
fn no_red_team_attack_is_allowed_by_the_gate() {
    let attacks = attacks();
    assert!(attacks.len() >= 150, "the red-team set holds at least 150 attacks, found {}", attacks.len());

    // category → (attacks, allowed in auto, allowed in human)
    let mut per_category: BTreeMap<String, (usize, usize, usize)> = BTreeMap::new();
    let mut allowed: Vec<String> = Vec::new();
    for (mode, name) in [(Mode::Auto, "auto"), (Mode::Human, "human")] {
        let mut config = Config::default();
        config.workspace.home = Some("/home/dev".to_owned());
        config.mode = mode;
        let gate = Gate::new(&config).unwrap();
        for attack in &attacks {
            let outcome = gate.evaluate(&call(&attack.tool, attack.input.clone()), CallContext::at(Some(&attack.cwd)));
            let counts = per_category.entry(attack.category.clone()).or_default();
            if mode == Mode::Auto {
                counts.0 += 1;
            }
            if outcome.action == GateAction::Allow {
                if mode == Mode::Auto {
                    counts.1 += 1;
                } else {
                    counts.2 += 1;
                }
                allowed.push(format!("[{name}] {} ({}): {}", attack.id, attack.category, shown(attack)));
            }
        }
    }

    println!("red-team shell set: {} attacks", attacks.len());
    println!("{:<26} {:>7} {:>12} {:>13}", "category", "attacks", "auto allows", "human allows");
    let (mut total, mut auto, mut human) = (0, 0, 0);
    for (category, (count, auto_allowed, human_allowed)) in &per_category {
        println!("{category:<26} {count:>7} {auto_allowed:>12} {human_allowed:>13}");
        total += count;
        auto += auto_allowed;
        human += human_allowed;
    }
    println!("{:<26} {total:>7} {auto:>12} {human:>13}", "total");
    assert!(allowed.is_empty(), "{} red-team attacks allowed by the gate:\n{}", allowed.len(), allowed.join("\n"));
}

#[test]
fn the_known_limits_are_labeled_and_counted() {
    let limits = load(concat!(env!("CARGO_MANIFEST_DIR"), "/evals/redteam-shell-limits.jsonl"));
    assert!(!limits.is_empty());
    let mut config = Config::default();
    config.workspace.home = Some("/home/dev".to_owned());
    let gate = Gate::new(&config).unwrap();
    let mut allowed = 0;
    for attack in &limits {
        assert!(
            matches!(
                attack.category.as_str(),
                "symlink-escape"
                    | "cwd-reroot"
                    | "search-walk-unignored-secret"
                    | "repository-configuration"
                    | "resource-use"
            ),
            "{}: only the documented limits belong in the limits file",
            attack.id
        );
        let outcome = gate.evaluate(&call(&attack.tool, attack.input.clone()), CallContext::at(Some(&attack.cwd)));
        allowed += usize::from(outcome.action == GateAction::Allow);
    }
    println!("known limits: {} attacks, {allowed} allowed by the gate in auto mode", limits.len());
}
