//! `permit hook claude-code`, `permit hook codex` and `permit replay`, end to end: the real
//! `permit` binary, fed hook inputs and transcripts in the hosts' real shapes
//! (`tests/fixtures/claude-code/`, `tests/fixtures/codex/`), deciding in-process or through a
//! real loopback server (a `permit serve` child, or a small HTTP server here that speaks
//! `/v1/decide` and stays silent, for the "slow" row).
//!
//! The failure matrix runs every row (server down, slow, refusing the token; transcript missing
//! or unreadable; garbage stdin) with a call the gate denies, one it allows and one it sends to
//! the classifier, in both hosts, and checks that no row lets a call run that permit did not
//! allow. No assertion depends on how fast the machine is.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "test code: a failure should stop loudly")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::{Value, json};

const TOKEN: &str = "hook-token-0123456789abcdef";
/// Denied by the gate's critical table in every mode.
const GATE_DENY: &str = "rm -rf ~";
/// A known-safe read inside the workspace.
const GATE_ALLOW: &str = "ls src";
/// A delete inside the workspace: not known-safe, so the classifier judges it.
const CLASSIFY: &str = "rm -rf build";

fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(path)
}

fn scratch(name: &str) -> PathBuf {
    let directory = std::env::temp_dir().join(format!("permit-hook-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).unwrap();
    directory
}

fn write(directory: &Path, name: &str, text: &str) -> String {
    let path = directory.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

/// A config with the gate only: a call the gate sends to the classifier is `ask`.
fn gate_only(directory: &Path) -> String {
    write(directory, "gate.toml", "mode = \"auto\"\n")
}

/// A port nothing listens on.
fn closed_port_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", listener.local_addr().unwrap())
}

/// A config whose screen is an OpenAI-compatible server that is down: the classifier is
/// configured (so the transcript is read for it) but never clears a call.
fn with_unreachable_classifier(directory: &Path) -> String {
    let text = format!(
        "mode = \"auto\"\n[screen]\ntimeout_ms = 2000\n[screen.model]\nbackend = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"screen\"\n",
        closed_port_url()
    );
    write(directory, "classifier.toml", &text)
}

/// A hook input from a fixture, with the transcript path filled in and fields overridden.
fn input_from(fixture_name: &str, transcript: &Path, overrides: Value) -> String {
    let mut value: Value = serde_json::from_str(&std::fs::read_to_string(fixture(fixture_name)).unwrap()).unwrap();
    value["transcript_path"] = json!(transcript);
    for (key, field) in overrides.as_object().unwrap() {
        value[key] = field.clone();
    }
    value.to_string()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Host {
    ClaudeCode,
    Codex,
}

impl Host {
    fn arg(self) -> &'static str {
        match self {
            Host::ClaudeCode => "claude-code",
            Host::Codex => "codex",
        }
    }

    /// A `PreToolUse` for a shell command, in this host's shape.
    fn bash(self, command: &str, transcript: &Path) -> String {
        match self {
            Host::ClaudeCode => input_from(
                "claude-code/pre-tool-use.json",
                transcript,
                json!({"tool_input": {"command": command, "description": "a command"}}),
            ),
            Host::Codex => {
                input_from("codex/pre-tool-use-bash.json", transcript, json!({"tool_input": {"command": command}}))
            }
        }
    }

    /// A `PermissionRequest` for a shell command, in this host's shape (no `tool_use_id`).
    fn bash_permission(self, command: &str, transcript: &Path) -> String {
        match self {
            Host::ClaudeCode => input_from(
                "claude-code/permission-request.json",
                transcript,
                json!({"tool_input": {"command": command, "description": "a command"}}),
            ),
            Host::Codex => input_from(
                "codex/permission-request-bash.json",
                transcript,
                json!({"tool_input": {"command": command}}),
            ),
        }
    }

    fn transcript(self) -> PathBuf {
        match self {
            Host::ClaudeCode => fixture("claude-code/intent.jsonl"),
            Host::Codex => fixture("codex/rollout.jsonl"),
        }
    }
}

fn hook(host: Host, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_permit"));
    command.args(["hook", host.arg()]).args(args).env_remove("PERMIT_CONFIG").env_remove("PERMIT_TOKEN");
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// What the host does with the hook's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Seen {
    /// The call runs without a person (Claude Code `allow`; `PermissionRequest` allow).
    Runs,
    /// Claude Code shows its prompt to the person (`ask`), with this reason.
    PersonDecides(String),
    /// The call is blocked, with this reason (`deny`, or exit code 2 with the reason on stderr).
    Blocked(String),
    /// No opinion on `PreToolUse`: the host's own permission policy applies.
    HostDecides,
}

fn seen(output: &Output) -> Seen {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    match output.status.code() {
        Some(2) => {
            assert!(stdout.trim().is_empty(), "exit 2 prints nothing on stdout: {stdout}");
            return Seen::Blocked(stderr.into_owned());
        }
        Some(0) => {}
        other => panic!("exit {other:?}: {stderr}"),
    }
    let value: Value = serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("not JSON: {stdout}"));
    let output = &value["hookSpecificOutput"];
    if value == json!({}) {
        return Seen::HostDecides;
    }
    match output["hookEventName"].as_str() {
        Some("PreToolUse") => {
            let reason = output["permissionDecisionReason"].as_str().unwrap().to_owned();
            assert!(!reason.trim().is_empty(), "every decision carries a reason (Codex needs one to deny)");
            match output["permissionDecision"].as_str().unwrap() {
                "allow" => Seen::Runs,
                "ask" => Seen::PersonDecides(reason),
                "deny" => Seen::Blocked(reason),
                other => panic!("unknown decision {other}"),
            }
        }
        Some("PermissionRequest") => match output["decision"]["behavior"].as_str().unwrap() {
            "allow" => Seen::Runs,
            "deny" => Seen::Blocked(output["decision"]["message"].as_str().unwrap().to_owned()),
            other => panic!("unknown behavior {other}"),
        },
        other => panic!("unknown answer {other:?}: {value}"),
    }
}

fn asked(seen: &Seen) -> &str {
    match seen {
        Seen::PersonDecides(reason) => reason,
        other => panic!("expected a prompt for the person, got {other:?}"),
    }
}

fn blocked(seen: &Seen) -> &str {
    match seen {
        Seen::Blocked(reason) => reason,
        other => panic!("expected a block, got {other:?}"),
    }
}

fn dry_run(host: Host, stdin: &str) -> Value {
    let output = hook(host, &["--dry-run"], stdin, &[]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

fn of_type<'a>(request: &'a Value, kind: &str) -> Vec<&'a Value> {
    request["transcript"].as_array().unwrap().iter().filter(|event| event["type"] == kind).collect()
}

fn user_texts(request: &Value) -> Vec<String> {
    of_type(request, "user").iter().map(|event| event["text"].as_str().unwrap().to_owned()).collect()
}

fn call_ids(request: &Value) -> Vec<String> {
    of_type(request, "tool_call").iter().map(|event| event["id"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn the_transcript_becomes_the_request_the_user_would_want_judged() {
    let stdin = Host::ClaudeCode.bash(CLASSIFY, &fixture("claude-code/session.jsonl"));
    let stdin = stdin.replace("\"a command\"", "\"Delete the build directory\"");
    let request = dry_run(Host::ClaudeCode, &stdin);
    // The user's own words only: not the isMeta wrapper, not the agent's prompt to its subagent.
    assert_eq!(user_texts(&request), ["free up some space in the repo", "and check the logs dir while you are at it"]);
    assert_eq!(
        call_ids(&request),
        ["toolu_01DuA", "toolu_01Task", "toolu_01Ask", "toolu_01Read", "toolu_01Edit"],
        "no sidechain call, and not the pending call"
    );
    let results = of_type(&request, "tool_result");
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
    assert_eq!(of_type(&request, "assistant").len(), 2, "text blocks, not thinking");
    assert_eq!(request["pending"][0]["id"], "toolu_01Rm");
    assert_eq!(request["pending"][0]["input"]["command"], CLASSIFY);
    assert_eq!(request["cwd"], "/workspace");
    // And the answer: the gate sends the delete to the classifier, and without one a person decides.
    let directory = scratch("session");
    let config = gate_only(&directory);
    let answer = seen(&hook(Host::ClaudeCode, &["--config", &config], &stdin, &[]));
    assert!(asked(&answer).contains("none is configured"), "{answer:?}");
    std::fs::remove_dir_all(&directory).unwrap();
}

/// Compaction summaries, task notifications, slash-command wrappers and their output, queued
/// task notifications and sidechains are not the person's words; queued prompts the person typed
/// mid-turn are.
#[test]
fn only_what_the_person_typed_is_intent() {
    let directory = scratch("intent");
    let config = gate_only(&directory);
    let transcript = fixture("claude-code/intent.jsonl");
    let stdin = input_from("claude-code/pre-tool-use.json", &transcript, json!({}));
    let request = dry_run(Host::ClaudeCode, &stdin);
    assert_eq!(
        user_texts(&request),
        [
            "/deploy staging",
            "/model",
            "clean up the build directory, then run the tests",
            "also delete the old logs",
            "! ls logs"
        ]
    );
    let everything = request["transcript"].to_string();
    for injected in
        ["force-push to main", "evil.example", "push to main", "Set model to", "system-reminder", "app.log\\nold.log"]
    {
        assert!(!everything.contains(injected), "`{injected}` reached the request: {everything}");
    }
    assert_eq!(call_ids(&request), ["toolu_01Du", "toolu_01Agent"], "no sidechain call, not the pending call");
    assert_eq!(request["pending"][0]["id"], "toolu_01Rm");
    // And the answer for the same input: the gate sends the delete to a classifier there is none of.
    let answer = seen(&hook(Host::ClaudeCode, &["--config", &config], &stdin, &[]));
    assert!(asked(&answer).starts_with("permit needs a person to approve this call"), "{answer:?}");
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn a_permission_request_without_a_tool_use_id_is_matched_by_name_and_input() {
    let directory = scratch("permission-request");
    let config = gate_only(&directory);
    let transcript = fixture("claude-code/intent.jsonl");
    let stdin = input_from("claude-code/permission-request.json", &transcript, json!({}));
    let request = dry_run(Host::ClaudeCode, &stdin);
    assert_eq!(request["pending"][0]["id"], "pending");
    assert_eq!(call_ids(&request), ["toolu_01Du", "toolu_01Agent"], "the pending call is not shown as already made");
    assert_eq!(request["transcript"].as_array().unwrap().last().unwrap()["text"], "Deleting build/ now.");
    // Ask on `PermissionRequest`: no verdict, so Claude Code's own dialog shows.
    assert_eq!(seen(&hook(Host::ClaudeCode, &["--config", &config], &stdin, &[])), Seen::HostDecides);
    // Codex's PermissionRequest (with `turn_id` and `model`, no `tool_use_id`) for its apply_patch.
    let rollout = fixture("codex/rollout.jsonl");
    let stdin = input_from("codex/permission-request-apply-patch.json", &rollout, json!({}));
    let request = dry_run(Host::Codex, &stdin);
    assert_eq!(call_ids(&request), ["call_Ls1Qx"], "the pending apply_patch is cut from the rollout");
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn codex_fixtures_in_codex_shapes() {
    let directory = scratch("codex");
    let config = gate_only(&directory);
    let rollout = fixture("codex/rollout.jsonl");
    // apply_patch sends its patch in `command`; it is judged, and sent on, as `input`.
    let stdin = input_from("codex/pre-tool-use-apply-patch.json", &rollout, json!({}));
    let request = dry_run(Host::Codex, &stdin);
    assert_eq!(request["pending"][0]["id"], "call_Pt7Wd");
    assert!(request["pending"][0]["input"]["input"].as_str().unwrap().contains("*** Add File: ~/.ssh/authorized_keys"));
    assert!(request["pending"][0]["input"].get("command").is_none());
    // Only the typed request is intent: not AGENTS.md, the environment, nor the compaction summary.
    assert_eq!(user_texts(&request), ["add the CI deploy key to the repo's known hosts file"]);
    assert_eq!(call_ids(&request), ["call_Ls1Qx"]);
    assert_eq!(of_type(&request, "tool_result").len(), 1);
    assert_eq!(request["session_id"], "019acb2e-6f3a-7c41-9d2e-5b8f1a0c3e77");
    assert!(!request["transcript"].to_string().contains("authorized_keys on this machine"));
    // The hard deny it deserves, in both events.
    let reason = blocked(&seen(&hook(Host::Codex, &["--config", &config], &stdin, &[]))).to_owned();
    assert!(reason.contains("write-authorized-keys") && reason.starts_with("blocked by permit"), "{reason}");
    let stdin = input_from("codex/permission-request-apply-patch.json", &rollout, json!({}));
    let reason = blocked(&seen(&hook(Host::Codex, &["--config", &config], &stdin, &[]))).to_owned();
    assert!(reason.contains("write-authorized-keys"), "{reason}");
    // A patch inside the workspace: no output on `PreToolUse` (Codex rejects a bare allow), and
    // an allow when Codex itself asks.
    let patch = "*** Begin Patch\n*** Update File: src/lib.rs\n@@\n-a\n+b\n*** End Patch\n";
    let stdin = input_from("codex/pre-tool-use-apply-patch.json", &rollout, json!({"tool_input": {"command": patch}}));
    assert_eq!(seen(&hook(Host::Codex, &["--config", &config], &stdin, &[])), Seen::HostDecides);
    let stdin =
        input_from("codex/permission-request-apply-patch.json", &rollout, json!({"tool_input": {"command": patch}}));
    assert_eq!(seen(&hook(Host::Codex, &["--config", &config], &stdin, &[])), Seen::Runs);
    // A shell command (Codex reports every shell tool as `Bash`): the call is found by its
    // `tool_use_id` (Codex's `call_id`); allowed ones get no output.
    let stdin = input_from("codex/pre-tool-use-bash.json", &rollout, json!({}));
    let request = dry_run(Host::Codex, &stdin);
    assert_eq!(request["pending"][0], json!({"id": "call_Ls1Qx", "name": "Bash", "input": {"command": "ls ci"}}));
    assert!(call_ids(&request).is_empty() && of_type(&request, "tool_result").is_empty());
    assert_eq!(seen(&hook(Host::Codex, &["--config", &config], &stdin, &[])), Seen::HostDecides);
    // Its PermissionRequest (no `tool_use_id`): an answered call with the same command is history.
    let stdin = input_from("codex/permission-request-bash.json", &rollout, json!({}));
    let request = dry_run(Host::Codex, &stdin);
    assert_eq!(request["pending"][0]["id"], "pending");
    assert_eq!(call_ids(&request), ["call_Ls1Qx", "call_Pt7Wd"]);
    assert_eq!(seen(&hook(Host::Codex, &["--config", &config], &stdin, &[])), Seen::Runs);
    // Ones for a person are blocked with a reason that asks the agent to ask the user.
    let stdin = Host::Codex.bash(CLASSIFY, &rollout);
    let reason = blocked(&seen(&hook(Host::Codex, &["--config", &config], &stdin, &[]))).to_owned();
    assert!(reason.starts_with("permit needs a person") && reason.contains("ask the user to approve it"), "{reason}");
    assert!(!reason.contains("permit: permit") && !reason.contains("permit: blocked"), "{reason}");
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn decisions_in_both_answer_shapes() {
    let directory = scratch("decide");
    let config = gate_only(&directory);
    let transcript = fixture("claude-code/intent.jsonl");
    let run = |stdin: &str| seen(&hook(Host::ClaudeCode, &["--config", &config], stdin, &[]));
    let allowed = hook(Host::ClaudeCode, &["--config", &config], &Host::ClaudeCode.bash(GATE_ALLOW, &transcript), &[]);
    let value: Value = serde_json::from_slice(&allowed.stdout).unwrap();
    assert_eq!(value["hookSpecificOutput"]["permissionDecision"], "allow");
    assert_eq!(
        value["hookSpecificOutput"]["permissionDecisionReason"],
        "allowed by permit's gate (known_safe_command)"
    );
    let reason = blocked(&run(&Host::ClaudeCode.bash(GATE_DENY, &transcript))).to_owned();
    assert!(reason.starts_with("blocked by permit, and no approval can unblock it"), "no stutter: {reason}");
    assert!(asked(&run(&Host::ClaudeCode.bash(CLASSIFY, &transcript))).contains("none is configured"));
    // PermissionRequest: allow, deny with the message, and no verdict for ask.
    assert_eq!(run(&Host::ClaudeCode.bash_permission(GATE_ALLOW, &transcript)), Seen::Runs);
    assert!(blocked(&run(&Host::ClaudeCode.bash_permission(GATE_DENY, &transcript))).contains("blocked by permit"));
    assert_eq!(run(&Host::ClaudeCode.bash_permission(CLASSIFY, &transcript)), Seen::HostDecides);
    // Installed on an event permit does not judge: no opinion.
    let stop = json!({"hook_event_name": "Stop", "session_id": "s"}).to_string();
    assert_eq!(run(&stop), Seen::HostDecides);
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn the_hosts_permission_modes_are_respected() {
    let directory = scratch("modes");
    let config = gate_only(&directory);
    let transcript = fixture("claude-code/intent.jsonl");
    let claude = |stdin: &str| seen(&hook(Host::ClaudeCode, &["--config", &config], stdin, &[]));
    let edit = |mode: &str, event: &str| {
        input_from(
            "claude-code/pre-tool-use.json",
            &transcript,
            json!({
                "permission_mode": mode,
                "hook_event_name": event,
                "tool_name": "Edit",
                "tool_input": {"file_path": "/workspace/src/lib.rs", "old_string": "a", "new_string": "b"},
            }),
        )
    };
    // Plan mode: an in-workspace edit, allowed otherwise, goes to a person; reads still run.
    assert_eq!(claude(&edit("default", "PreToolUse")), Seen::Runs);
    assert!(asked(&claude(&edit("plan", "PreToolUse"))).contains("plan mode"));
    assert_eq!(claude(&edit("plan", "PermissionRequest")), Seen::HostDecides);
    let read = input_from(
        "claude-code/pre-tool-use.json",
        &transcript,
        json!({"permission_mode": "plan", "tool_name": "Read", "tool_input": {"file_path": "/workspace/src/lib.rs"}}),
    );
    assert_eq!(claude(&read), Seen::Runs);
    let in_plan = |command: &str| {
        input_from(
            "claude-code/pre-tool-use.json",
            &transcript,
            json!({"permission_mode": "plan", "tool_input": {"command": command}}),
        )
    };
    assert_eq!(claude(&in_plan(GATE_ALLOW)), Seen::Runs);
    assert!(matches!(claude(&in_plan(GATE_DENY)), Seen::Blocked(_)));
    // acceptEdits: the host accepts the edit; permit's answers are unchanged.
    assert_eq!(claude(&edit("acceptEdits", "PreToolUse")), Seen::Runs);
    // Modes that show no prompt: the deny holds, and an ask cannot reach a person, so it blocks.
    for mode in ["bypassPermissions", "dontAsk", "auto"] {
        let with_mode = |command: &str, event: &str| {
            input_from(
                "claude-code/pre-tool-use.json",
                &transcript,
                json!({"permission_mode": mode, "hook_event_name": event, "tool_input": {"command": command}}),
            )
        };
        assert!(blocked(&claude(&with_mode(GATE_DENY, "PreToolUse"))).starts_with("blocked by permit"));
        assert_eq!(claude(&with_mode(GATE_ALLOW, "PreToolUse")), Seen::Runs);
        let reason = blocked(&claude(&with_mode(CLASSIFY, "PreToolUse"))).to_owned();
        assert!(reason.contains(&format!("(`{mode}`) shows no approval prompt")), "{reason}");
        assert!(matches!(claude(&with_mode(CLASSIFY, "PermissionRequest")), Seen::Blocked(_)), "{mode}");
    }
    // Codex in plan mode: reads only.
    let rollout = fixture("codex/rollout.jsonl");
    let codex = |stdin: &str| seen(&hook(Host::Codex, &["--config", &config], stdin, &[]));
    let patch = "*** Begin Patch\n*** Update File: src/lib.rs\n@@\n-a\n+b\n*** End Patch\n";
    let stdin = input_from(
        "codex/pre-tool-use-apply-patch.json",
        &rollout,
        json!({"permission_mode": "plan", "tool_input": {"command": patch}}),
    );
    assert!(blocked(&codex(&stdin)).contains("plan mode"));
    let stdin = input_from("codex/pre-tool-use-bash.json", &rollout, json!({"permission_mode": "plan"}));
    assert_eq!(codex(&stdin), Seen::HostDecides);
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn the_hosts_own_prompts_are_left_to_the_person() {
    let directory = scratch("person-facing");
    let config = gate_only(&directory);
    let transcript = fixture("claude-code/intent.jsonl");
    for (tool, input) in [
        (
            "AskUserQuestion",
            json!({"questions": [{"question": "Delete build/?", "header": "Cleanup", "options": [{"label": "Yes", "description": "Remove it"}, {"label": "No", "description": "Keep it"}], "multiSelect": false}]}),
        ),
        ("ExitPlanMode", json!({"plan": "1. delete build/\n2. run the tests"})),
    ] {
        for event in ["PreToolUse", "PermissionRequest"] {
            let stdin = input_from(
                "claude-code/pre-tool-use.json",
                &transcript,
                json!({"hook_event_name": event, "tool_name": tool, "tool_input": input}),
            );
            // A hook `allow` would skip the question or the plan approval: no opinion instead.
            assert_eq!(seen(&hook(Host::ClaudeCode, &["--config", &config], &stdin, &[])), Seen::HostDecides, "{tool}");
        }
    }
    std::fs::remove_dir_all(&directory).unwrap();
}

/// A small HTTP server on loopback that speaks `/v1/decide`: it answers every call `allow`, or
/// reads the request and never answers (the "slow" server).
#[derive(Clone, Copy)]
enum FakeServer {
    AllowsEverything,
    NeverAnswers,
}

fn read_request(stream: &mut TcpStream) -> Option<Value> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = value.trim().parse().ok()?;
        }
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}

fn fake_server(behaviour: FakeServer) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let Some(request) = read_request(&mut stream) else { return };
                match behaviour {
                    FakeServer::NeverAnswers => {
                        // Hold the connection until the client gives up.
                        let _ = stream.read_to_end(&mut Vec::new());
                    }
                    FakeServer::AllowsEverything => {
                        let body = json!({"decisions": [{
                            "id": request["pending"][0]["id"], "decision": "allow", "stage": "gate", "tier": "low",
                            "reason": null, "reason_code": "mode_tier", "p_allow": null, "rules": []
                        }]})
                        .to_string();
                        let _ = write!(
                            stream,
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        );
                    }
                }
            });
        }
    });
    url
}

struct Served {
    child: Child,
    url: String,
    config: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A real `permit serve` (the gate, no models) that requires `TOKEN`.
fn serve(directory: &Path) -> Served {
    let tokens = write(directory, "tokens", &format!("{TOKEN}\n"));
    let config = write(directory, "serve.toml", &format!("mode = \"auto\"\n[server]\ntokens_file = \"{tokens}\"\n"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_permit"))
        .args(["serve", "--config", &config, "--bind", "127.0.0.1:0"])
        .env_remove("PERMIT_CONFIG")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap()).read_line(&mut line).unwrap();
    let url = line.trim().strip_prefix("permit: listening on ").unwrap_or_else(|| panic!("{line}")).to_owned();
    Served { child, url, config }
}

/// What a row must show for each call.
#[derive(Clone, Copy, Debug)]
enum Expect {
    Blocked,
    /// Claude Code prompts the person; Codex blocks with a reason asking the agent to ask the user.
    Person,
    Allowed,
}

fn check(host: Host, row: &str, call: &str, got: &Seen, expect: Expect, needle: &str) {
    let context = format!("{host:?} / {row} / `{call}`: {got:?}");
    match (expect, host) {
        (Expect::Blocked, _) => assert!(matches!(got, Seen::Blocked(_)), "{context}"),
        (Expect::Allowed, Host::ClaudeCode) => assert_eq!(got, &Seen::Runs, "{context}"),
        // Codex rejects a bare `allow`: no output leaves the call to Codex's own policy.
        (Expect::Allowed, Host::Codex) => assert_eq!(got, &Seen::HostDecides, "{context}"),
        (Expect::Person, Host::ClaudeCode) => assert!(matches!(got, Seen::PersonDecides(_)), "{context}"),
        (Expect::Person, Host::Codex) => {
            let reason = blocked(got);
            assert!(reason.contains("ask the user to approve it"), "{context}");
        }
    }
    // A row that fails names what failed; the gate's own denies name their rule instead.
    if !matches!(expect, Expect::Allowed) && call != GATE_DENY {
        match got {
            Seen::Blocked(reason) | Seen::PersonDecides(reason) => {
                assert!(reason.contains(needle), "{context}: wanted `{needle}`")
            }
            other => panic!("{context}: {other:?}"),
        }
    }
    // Never: a call permit does not allow reaching the host's "run" path.
    if !matches!(expect, Expect::Allowed) {
        assert!(!matches!(got, Seen::Runs | Seen::HostDecides), "{context}");
    }
}

/// One row of the failure matrix.
struct Row<'a> {
    name: &'a str,
    args: Vec<&'a str>,
    env: Vec<(&'a str, &'a str)>,
    transcript: &'a Path,
    /// For the gate-deny, gate-allow and classify calls.
    expected: [Expect; 3],
    /// What the reason names.
    needle: &'a str,
}

#[test]
fn the_failure_matrix_never_lets_through_what_permit_did_not_allow() {
    let directory = scratch("matrix");
    let gate = gate_only(&directory);
    let classifier = with_unreachable_classifier(&directory);
    let served = serve(&directory);
    let silent = fake_server(FakeServer::NeverAnswers);
    let down = closed_port_url();
    let missing = directory.join("no-such-session.jsonl");
    let unreadable = directory.join("a-directory.jsonl");
    std::fs::create_dir_all(&unreadable).unwrap();

    for host in [Host::ClaudeCode, Host::Codex] {
        let transcript = host.transcript();
        let rows = [
            Row {
                name: "server down",
                args: vec!["--server", &down],
                env: vec![],
                transcript: &transcript,
                expected: [Expect::Blocked, Expect::Person, Expect::Person],
                needle: "is unreachable",
            },
            Row {
                name: "server slow",
                args: vec!["--server", &silent, "--timeout-ms", "300"],
                env: vec![],
                transcript: &transcript,
                expected: [Expect::Blocked, Expect::Person, Expect::Person],
                needle: "did not answer in time",
            },
            Row {
                name: "server refusing the token",
                args: vec!["--server", &served.url],
                env: vec![("PERMIT_TOKEN", "not-the-token-0123456789")],
                transcript: &transcript,
                expected: [Expect::Blocked, Expect::Person, Expect::Person],
                needle: "401",
            },
            Row {
                name: "transcript missing, in-process",
                args: vec!["--config", &classifier],
                env: vec![],
                transcript: &missing,
                expected: [Expect::Blocked, Expect::Allowed, Expect::Person],
                needle: "cannot read the transcript",
            },
            Row {
                name: "transcript unreadable, in-process",
                args: vec!["--config", &classifier],
                env: vec![],
                transcript: &unreadable,
                expected: [Expect::Blocked, Expect::Allowed, Expect::Person],
                needle: "cannot read the transcript",
            },
            Row {
                name: "transcript missing, through the server",
                args: vec!["--server", &served.url],
                env: vec![("PERMIT_TOKEN", TOKEN)],
                transcript: &missing,
                expected: [Expect::Blocked, Expect::Person, Expect::Person],
                needle: "cannot read the transcript",
            },
            Row {
                name: "config that does not load",
                args: vec!["--config", "/nonexistent/permit.toml"],
                env: vec![],
                transcript: &transcript,
                expected: [Expect::Blocked, Expect::Person, Expect::Person],
                needle: "the config",
            },
        ];
        for row in &rows {
            for (call, expect) in [GATE_DENY, GATE_ALLOW, CLASSIFY].into_iter().zip(row.expected) {
                let got = seen(&hook(host, &row.args, &host.bash(call, row.transcript), &row.env));
                check(host, row.name, call, &got, expect, row.needle);
                if call == GATE_DENY {
                    assert!(blocked(&got).contains("blocked by permit"), "{host:?} {}: the gate's own deny", row.name);
                }
            }
        }
        // The same rows for `PermissionRequest`, which carries no `tool_use_id`.
        for (call, expect) in [(GATE_DENY, Expect::Blocked), (GATE_ALLOW, Expect::Person), (CLASSIFY, Expect::Person)] {
            let got = seen(&hook(host, &["--server", &down], &host.bash_permission(call, &transcript), &[]));
            match (host, expect) {
                (_, Expect::Blocked) | (Host::Codex, _) => {
                    assert!(matches!(got, Seen::Blocked(_)), "{host:?} `{call}`")
                }
                // No verdict: Claude Code's dialog shows.
                (Host::ClaudeCode, _) => assert_eq!(got, Seen::HostDecides, "`{call}`"),
            }
        }
        // Garbage on stdin: no call can be identified, so exit 2, which both hosts enforce.
        for garbage in
            ["not json at all", "", "[1, 2]", "{\"hook_event_name\": 7}", &host.bash(GATE_ALLOW, &transcript)[..40]]
        {
            let got = seen(&hook(host, &["--config", &gate], garbage, &[]));
            assert!(blocked(&got).contains("could not read the hook input"), "{host:?} {garbage:?}: {got:?}");
        }
        // A call with garbage around it: the gate still sees the call, so its deny holds;
        // nothing else is allowed.
        for (call, expect) in [(GATE_DENY, Expect::Blocked), (GATE_ALLOW, Expect::Person), (CLASSIFY, Expect::Person)] {
            let mut value: Value = serde_json::from_str(&host.bash(call, &transcript)).unwrap();
            value["session_id"] = json!({"not": "a string"});
            value["transcript_path"] = json!(42);
            let got = seen(&hook(host, &["--config", &gate], &value.to_string(), &[]));
            check(host, "garbage fields", call, &got, expect, "could not be read fully");
        }
        // No tool named at all: nothing to allow.
        let no_tool = json!({"hook_event_name": "PreToolUse", "session_id": "s", "cwd": "/workspace"}).to_string();
        check(
            host,
            "no tool",
            CLASSIFY,
            &seen(&hook(host, &["--config", &gate], &no_tool, &[])),
            Expect::Person,
            "tool_name",
        );
    }
    drop(served);
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn through_a_running_server_strictest_wins() {
    let directory = scratch("server");
    let served = serve(&directory);
    let transcript = fixture("claude-code/intent.jsonl");
    let with_token = [("PERMIT_TOKEN", TOKEN)];
    let via_server = |stdin: &str| seen(&hook(Host::ClaudeCode, &["--server", &served.url], stdin, &with_token));
    assert!(blocked(&via_server(&Host::ClaudeCode.bash(GATE_DENY, &transcript))).contains("blocked by permit"));
    assert_eq!(via_server(&Host::ClaudeCode.bash(GATE_ALLOW, &transcript)), Seen::Runs);
    assert!(asked(&via_server(&Host::ClaudeCode.bash(CLASSIFY, &transcript))).contains("none is configured"));

    // A server that allows everything cannot undo the hook's own gate: its deny, and its ask.
    let lenient = fake_server(FakeServer::AllowsEverything);
    let local = write(
        &directory,
        "local.toml",
        "mode = \"auto\"\n[[rules]]\nid = \"pushes-ask\"\ntool = \"Bash\"\ncommand_prefix = \"git push\"\ndecision = \"ask\"\nreason = \"a person decides what leaves the machine\"\nmatch = [\"git push origin main\"]\n",
    );
    let via_lenient = |command: &str| {
        seen(&hook(
            Host::ClaudeCode,
            &["--server", &lenient, "--config", &local],
            &Host::ClaudeCode.bash(command, &transcript),
            &[],
        ))
    };
    assert!(matches!(via_lenient(GATE_DENY), Seen::Blocked(_)));
    assert!(asked(&via_lenient("git push origin main")).contains("pushes-ask"));
    assert_eq!(via_lenient(CLASSIFY), Seen::Runs, "the server is the authority for what the gate leaves to it");

    // Pointed at the server's own config, a local allow needs no round trip (the server here is
    // down); without that statement, it does.
    let down = closed_port_url();
    let same = ["--server", &down, "--config", &served.config, "--same-config-as-server"];
    assert_eq!(seen(&hook(Host::ClaudeCode, &same, &Host::ClaudeCode.bash(GATE_ALLOW, &transcript), &[])), Seen::Runs);
    assert!(
        asked(&seen(&hook(Host::ClaudeCode, &same, &Host::ClaudeCode.bash(CLASSIFY, &transcript), &[])))
            .contains("is unreachable")
    );
    let unstated = ["--server", &down, "--config", &served.config];
    assert!(
        asked(&seen(&hook(Host::ClaudeCode, &unstated, &Host::ClaudeCode.bash(GATE_ALLOW, &transcript), &[])))
            .contains("is unreachable")
    );
    drop(served);
    std::fs::remove_dir_all(&directory).unwrap();
}

#[test]
fn replay_turns_a_session_into_unlabeled_cases_that_eval_reports_as_a_distribution() {
    let directory = scratch("replay");
    let session = fixture("claude-code/session.jsonl");
    let session = session.to_str().unwrap();
    let cases = directory.join("cases.jsonl");
    let output = Command::new(env!("CARGO_BIN_EXE_permit"))
        .args(["replay", session, "--per-session", "10", "--out", cases.to_str().unwrap()])
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
    let two =
        Command::new(env!("CARGO_BIN_EXE_permit")).args(["replay", session, "--per-session", "2"]).output().unwrap();
    let spread: Vec<Value> =
        String::from_utf8_lossy(&two.stdout).lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(
        spread.iter().map(|case| case["pending"][0]["id"].as_str().unwrap()).collect::<Vec<_>>(),
        ["toolu_01DuA", "toolu_01Rm"]
    );

    let config = gate_only(&directory);
    let out = directory.join("eval");
    let output = Command::new(env!("CARGO_BIN_EXE_permit"))
        .args(["eval", cases.to_str().unwrap(), "--config", &config, "--out", out.to_str().unwrap()])
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
