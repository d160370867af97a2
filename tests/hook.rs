//! `permit hook claude-code` and `permit replay` end to end on a session transcript in Claude
//! Code's shape (`tests/fixtures/claude-code/session.jsonl`: a summary line, an `isMeta` line,
//! thinking and text blocks, tool_use / tool_result pairs with string and block content, an
//! error result, a compact-boundary system line, a subagent sidechain, a malformed line, an
//! AskUserQuestion exchange, a file-history snapshot, and the pending call as the last line).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "test code: a failure should stop loudly")]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const TOKEN: &str = "hook-token-0123456789abcdef";

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/claude-code/session.jsonl")
}

fn scratch(name: &str) -> PathBuf {
    let directory = std::env::temp_dir().join(format!("permit-hook-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).unwrap();
    directory
}

fn gate_only(directory: &Path) -> PathBuf {
    let path = directory.join("gate.toml");
    std::fs::write(&path, "mode = \"auto\"\n").unwrap();
    path
}

fn hook_input(event: &str, command: &str, transcript: &Path) -> String {
    json!({
        "session_id": "5f1c2a9e-7b1d-4c55-9a0e-3d2f6b8c1e07",
        "transcript_path": transcript,
        "cwd": "/workspace",
        "permission_mode": "default",
        "hook_event_name": event,
        "tool_name": "Bash",
        "tool_input": {"command": command, "description": "a command"},
        "tool_use_id": "toolu_01Rm"
    })
    .to_string()
}

fn hook(args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_permit"));
    command.arg("hook").args(args).env_remove("PERMIT_CONFIG").env_remove("PERMIT_TOKEN");
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// The hook's answer; the hook always exits 0.
fn answer(output: &Output) -> Value {
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&output.stdout)))
}

fn pre_tool_use(value: &Value) -> (String, String) {
    let output = &value["hookSpecificOutput"];
    assert_eq!(output["hookEventName"], "PreToolUse");
    (
        output["permissionDecision"].as_str().unwrap().to_owned(),
        output["permissionDecisionReason"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn the_transcript_becomes_the_request_the_user_would_want_judged() {
    let output = hook(&["claude-code", "--dry-run"], &hook_input("PreToolUse", "rm -rf build", &fixture()), &[]);
    let request = answer(&output);
    let events = request["transcript"].as_array().unwrap();
    let of_type = |kind: &str| events.iter().filter(|event| event["type"] == kind).collect::<Vec<_>>();
    let users: Vec<&str> = of_type("user").iter().map(|event| event["text"].as_str().unwrap()).collect();
    // The user's own words only: not the isMeta wrapper, not the agent's prompt to its subagent.
    assert_eq!(users, ["free up some space in the repo", "and check the logs dir while you are at it"]);
    let calls: Vec<&str> = of_type("tool_call").iter().map(|event| event["id"].as_str().unwrap()).collect();
    assert_eq!(
        calls,
        ["toolu_01DuA", "toolu_01Task", "toolu_01Ask", "toolu_01Read", "toolu_01Edit"],
        "no sidechain call, and not the pending call"
    );
    let results = of_type("tool_result");
    assert_eq!(results.len(), 5);
    let answer_text = results.iter().find(|event| event["id"] == "toolu_01Ask").unwrap()["content"].as_str().unwrap();
    assert!(answer_text.contains("\"Delete build/ (120M)?\"=\"Yes\""), "the questionnaire answer rides along");
    assert!(
        results.iter().find(|event| event["id"] == "toolu_01Task").unwrap()["content"]
            .as_str()
            .unwrap()
            .starts_with("build/ holds"),
        "block content is read"
    );
    assert_eq!(results.iter().find(|event| event["id"] == "toolu_01Edit").unwrap()["is_error"], true);
    assert_eq!(of_type("assistant").len(), 2, "text blocks, not thinking");
    assert_eq!(request["pending"][0]["id"], "toolu_01Rm");
    assert_eq!(request["pending"][0]["input"]["command"], "rm -rf build");
    assert_eq!(request["cwd"], "/workspace");
}

#[test]
fn decisions_in_both_answer_shapes() {
    let directory = scratch("decide");
    let config = gate_only(&directory);
    let config = config.to_str().unwrap();
    for (command, decision, needle) in [
        ("git status", "allow", "known_safe_command"),
        ("rm -rf ~", "deny", "rm-root-or-home"),
        ("rm -rf build", "ask", "classifier"),
    ] {
        let output = hook(&["claude-code", "--config", config], &hook_input("PreToolUse", command, &fixture()), &[]);
        let (got, reason) = pre_tool_use(&answer(&output));
        assert_eq!(got, decision, "{command}: {reason}");
        assert!(reason.starts_with("permit") && reason.contains(needle), "{command}: {reason}");
    }
    let permission = |command: &str| {
        answer(&hook(&["claude-code", "--config", config], &hook_input("PermissionRequest", command, &fixture()), &[]))
    };
    let allowed = permission("git status");
    assert_eq!(allowed["hookSpecificOutput"]["hookEventName"], "PermissionRequest");
    assert_eq!(allowed["hookSpecificOutput"]["decision"]["behavior"], "allow");
    let denied = permission("rm -rf ~");
    assert_eq!(denied["hookSpecificOutput"]["decision"]["behavior"], "deny");
    assert!(denied["hookSpecificOutput"]["decision"]["message"].as_str().unwrap().contains("rm-root-or-home"));
    assert_eq!(permission("rm -rf build"), json!({}), "ask: no verdict, the agent's own dialog shows");
    // Codex speaks the same shapes.
    let codex = answer(&hook(&["codex", "--config", config], &hook_input("PreToolUse", "rm -rf ~", &fixture()), &[]));
    assert_eq!(pre_tool_use(&codex).0, "deny");
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn every_failure_answers_ask_and_exits_0() {
    let directory = scratch("failures");
    let config = gate_only(&directory);
    let config = config.to_str().unwrap();
    let stalled = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let stalled_url = format!("http://{}", stalled.local_addr().unwrap());
    let closed_url = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let missing = directory.join("no-such-session.jsonl");
    let cases: Vec<(Vec<&str>, String, &str)> = vec![
        (vec!["claude-code", "--config", config], "not json at all".to_owned(), "hook input"),
        (vec!["claude-code", "--config", config], "{\"hook_event_name\": \"PreToolUse\"}".to_owned(), "tool_name"),
        (vec!["claude-code", "--config", config], hook_input("PreToolUse", "git status", &missing), "transcript"),
        (
            vec!["claude-code", "--server", &closed_url],
            hook_input("PreToolUse", "git status", &fixture()),
            "unreachable",
        ),
        (
            vec!["claude-code", "--server", &stalled_url, "--timeout-ms", "500"],
            hook_input("PreToolUse", "git status", &fixture()),
            "did not answer in time",
        ),
        (
            vec!["claude-code", "--config", "/nonexistent/permit.toml"],
            hook_input("PreToolUse", "git status", &fixture()),
            "config",
        ),
    ];
    for (args, stdin, needle) in cases {
        let started = Instant::now();
        let output = hook(&args, &stdin, &[]);
        let (decision, reason) = pre_tool_use(&answer(&output));
        assert_eq!(decision, "ask", "{needle}: {reason}");
        assert!(reason.contains(needle) && reason.contains("a person decides"), "{needle}: {reason}");
        assert!(started.elapsed() < Duration::from_secs(10), "{needle} took {:?}", started.elapsed());
    }
    // A PermissionRequest that fails gives no verdict, so the dialog shows.
    let output = hook(
        &["claude-code", "--server", &closed_url],
        &hook_input("PermissionRequest", "git status", &fixture()),
        &[],
    );
    assert_eq!(answer(&output), json!({}));
    // Installed on an event permit does not judge: no opinion.
    let output = hook(&["claude-code"], "{\"hook_event_name\": \"Stop\", \"tool_name\": \"x\"}", &[]);
    assert_eq!(answer(&output), json!({}));
    drop(stalled);
    std::fs::remove_dir_all(&directory).unwrap();
}

struct Served {
    child: Child,
    url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(directory: &Path) -> Served {
    std::fs::write(directory.join("tokens"), format!("{TOKEN}\n")).unwrap();
    let config = directory.join("serve.toml");
    std::fs::write(&config, format!("[server]\ntokens_file = \"{}\"\n", directory.join("tokens").display())).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_permit"))
        .args(["serve", "--config", config.to_str().unwrap(), "--bind", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap()).read_line(&mut line).unwrap();
    let address = line.trim().strip_prefix("permit: listening on ").unwrap_or_else(|| panic!("{line}")).to_owned();
    Served { child, url: address }
}

#[test]
fn through_a_running_server_with_its_token() {
    let directory = scratch("server");
    let served = serve(&directory);
    let stdin = hook_input("PreToolUse", "rm -rf ~", &fixture());
    let output = hook(&["claude-code", "--server", &served.url], &stdin, &[("PERMIT_TOKEN", TOKEN)]);
    let (decision, reason) = pre_tool_use(&answer(&output));
    assert_eq!(decision, "deny", "{reason}");
    let output = hook(&["claude-code", "--server", &served.url], &stdin, &[]);
    let (decision, reason) = pre_tool_use(&answer(&output));
    assert_eq!(decision, "ask");
    assert!(reason.contains("401"), "{reason}");
    drop(served);
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn replay_turns_a_session_into_unlabeled_cases_that_eval_reports_as_a_distribution() {
    let directory = scratch("replay");
    let cases = directory.join("cases.jsonl");
    let output = Command::new(env!("CARGO_BIN_EXE_permit"))
        .args(["replay", fixture().to_str().unwrap(), "--per-session", "10", "--out", cases.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let lines: Vec<Value> =
        std::fs::read_to_string(&cases).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    // Bash, Edit and the pending Bash call: not Read, Task or AskUserQuestion, not the sidechain.
    let pending: Vec<&str> = lines.iter().map(|case| case["pending"][0]["id"].as_str().unwrap()).collect();
    assert_eq!(pending, ["toolu_01DuA", "toolu_01Edit", "toolu_01Rm"]);
    for case in &lines {
        assert!(case.get("label").is_none() && case.get("labels").is_none());
        let id = case["pending"][0]["id"].as_str().unwrap();
        assert!(
            case["transcript"].as_array().unwrap().iter().all(|event| event["id"] != id),
            "the call is pending, not past"
        );
    }
    let two = Command::new(env!("CARGO_BIN_EXE_permit"))
        .args(["replay", fixture().to_str().unwrap(), "--per-session", "2"])
        .output()
        .unwrap();
    let spread: Vec<Value> =
        String::from_utf8_lossy(&two.stdout).lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(
        spread.iter().map(|case| case["pending"][0]["id"].as_str().unwrap()).collect::<Vec<_>>(),
        ["toolu_01DuA", "toolu_01Rm"]
    );

    let config = gate_only(&directory);
    let out = directory.join("eval");
    let output = Command::new(env!("CARGO_BIN_EXE_permit"))
        .args(["eval", cases.to_str().unwrap(), "--config", config.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let overall = &report["report"]["overall"];
    assert_eq!(
        (overall["calls"].as_u64(), overall["labeled"].as_u64(), overall["errors"].as_u64()),
        (Some(3), Some(0), Some(0))
    );
    assert_eq!(
        overall["allowed"].as_u64().unwrap() + overall["denied"].as_u64().unwrap() + overall["asked"].as_u64().unwrap(),
        3
    );
    std::fs::remove_dir_all(&directory).unwrap();
}
