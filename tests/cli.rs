//! The `permit` binary end to end: `decide` on the example request, bad input, and
//! `check-config` on good and bad configs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, reason = "test code: a failure should stop loudly")]

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// Tests that screen with the demo model take turns, so two screens never share the 2 cores and
/// push each other past the screen's timeout (that would make them depend on load).
static MODEL_TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn model_turn() -> std::sync::MutexGuard<'static, ()> {
    MODEL_TURN.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn permit(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_permit"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("PERMIT_CONFIG")
        // The demo model stays where scripts/fetch-model.sh put it, whatever HOME says.
        .env("PERMIT_MODEL_DIR", permit::config::default_model_dir())
        .env("HOME", "/home/dev")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn write_temp(name: &str, text: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("permit-cli-{}-{name}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn decide_answers_the_example_request_in_order() {
    let _turn = model_turn();
    let request = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/request.json")).unwrap();
    let output = permit(&["decide"], &request);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let response: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let decisions: Vec<(&str, &str)> = response["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|decision| (decision["id"].as_str().unwrap(), decision["decision"].as_str().unwrap()))
        .collect();
    assert_eq!(decisions, [("c2", "allow"), ("c3", "ask"), ("c4", "deny"), ("c5", "ask")]);
    // The embedded default: the demo model screened `rm -rf build`, did not clear it at its
    // high threshold, and with no review model the call goes to a person.
    assert_eq!(response["decisions"][1]["stage"], "screen");
    assert_eq!(response["decisions"][1]["reason_code"], "no_review_model");
    let p_allow = response["decisions"][1]["p_allow"].as_f64().unwrap();
    assert!((0.0..0.99).contains(&p_allow), "{p_allow}");
    assert_eq!(response["decisions"][2]["rules"][0], "rm-root-or-home");
    // Exactly the wire fields of BRIEF.md, nothing more.
    let keys: Vec<&String> = response["decisions"][0].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["decision", "id", "p_allow", "reason", "reason_code", "rules", "stage", "tier"]);
}

#[test]
fn a_config_file_without_a_screen_runs_the_gate_alone() {
    let request = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/request.json")).unwrap();
    let config = write_temp("gate-only.toml", "mode = \"auto\"\n");
    let output = permit(&["decide", "--config", config.to_str().unwrap()], &request);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let response: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(response["decisions"][1]["decision"], "ask");
    assert_eq!(response["decisions"][1]["reason_code"], "no_classifier");
}

#[test]
fn a_missing_demo_model_is_an_error_that_says_how_to_fetch_it() {
    let output = Command::new(env!("CARGO_BIN_EXE_permit"))
        .args(["check-config"])
        .env_remove("PERMIT_CONFIG")
        .env("PERMIT_MODEL_DIR", "/nonexistent/models")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("/nonexistent/models/SmolLM2-135M-Instruct.Q4_1.gguf"), "{stderr}");
    assert!(stderr.contains("scripts/fetch-model.sh"), "{stderr}");
}

#[test]
fn decide_explain_shows_the_gate_outcome() {
    let _turn = model_turn();
    let request =
        r#"{"cwd": "/workspace", "pending": [{"id": "x", "name": "Bash", "input": {"command": "ls && rm -rf ~"}}]}"#;
    let output = permit(&["decide", "--explain"], request);
    assert!(output.status.success());
    let explained: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let gate = &explained["decisions"][0]["gate"];
    assert_eq!(explained["decisions"][0]["decision"]["decision"], "deny");
    assert_eq!(gate["action"], "deny");
    assert_eq!(gate["hard_deny"], true);
    assert_eq!(gate["primary"], "critical_command");
    assert!(gate["findings"].as_array().unwrap().iter().any(|finding| finding["rule"] == "rm-root-or-home"));
}

#[test]
fn bad_requests_exit_2_naming_the_field() {
    for (request, needle) in [
        ("not json", "invalid request"),
        (r#"{"pending": [{"id": "a", "name": "Bash", "input": []}]}"#, "pending[0].input"),
        (r#"{"pending": [{"id": "a", "name": "Bash"}], "extra": 1}"#, "extra"),
        (r#"{"pending": []}"#, "at least one"),
    ] {
        let output = permit(&["decide"], request);
        assert_eq!(output.status.code(), Some(2), "{request}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(needle), "{request}: {stderr}");
        assert!(output.stdout.is_empty(), "no decision is printed for a request that was not understood");
    }
}

#[test]
fn check_config_accepts_the_example_and_defaults() {
    let output = permit(&["check-config", "--config", "examples/permit.toml"], "");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("rules: 5") && stdout.contains("mode: auto"), "{stdout}");
    let output = permit(&["check-config"], "");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("built-in defaults"), "{stdout}");
    assert!(stdout.contains("screen model:") && stdout.contains("f32 weights"), "{stdout}");
}

#[test]
fn check_config_rejects_bad_configs_with_a_fix() {
    let cases = [
        ("mode = \"yolo\"\n", "unknown variant `yolo`"),
        ("[tools]\npreset = []\n", "unknown field `preset`"),
        ("[[tools.define]]\nname = \"x\"\nreadonly = true\n", "readonly"),
        (
            "[screen]\nallow_threshold_percent = 40\n[screen.model]\nbackend = \"local\"\npath = \"m.gguf\"\n",
            "50..=100",
        ),
        ("[screen]\n[screen.model]\nbackend = \"local\"\npath = \"m.gguf\"\nthreads = 0\n", "`screen.model.threads`"),
        (
            "[screen]\n[screen.model]\nbackend = \"local\"\npath = \"m.gguf\"\nweights = \"q4\"\n",
            "unknown variant `q4`",
        ),
        (
            "[screen]\n[screen.model]\nbackend = \"local\"\npath = \"m.gguf\"\ncontext = 4096\n",
            "unknown field `context`",
        ),
        ("[screen]\n[screen.model]\nbackend = \"local\"\npath = \"/nonexistent/m.gguf\"\n", "scripts/fetch-model.sh"),
        ("[server]\nbind = \"0.0.0.0:8787\"\n", "no tokens are configured"),
        (
            "[[rules]]\nid = \"r\"\ntool = \"Bash\"\ncommand_prefix = \"ls\"\ndecision = \"allow\"\nreason = \"x\"\nmatch = [\"cat a\"]\n",
            "does not match the rule",
        ),
        (
            "[[rules]]\nid = \"r\"\ntool = \"Bash\"\ndecision = \"allow\"\nreason = \"x\"\n",
            "add at least one `match` example",
        ),
    ];
    for (index, (text, needle)) in cases.into_iter().enumerate() {
        let path = write_temp(&format!("bad-{index}.toml"), text);
        let output = permit(&["check-config", "--config", path.to_str().unwrap()], "");
        assert_eq!(output.status.code(), Some(1), "{text}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(needle), "{text}: {stderr}");
        std::fs::remove_file(path).unwrap();
    }
    let output = permit(&["check-config", "--config", "/nonexistent/permit.toml"], "");
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("cannot read config `/nonexistent/permit.toml`"));
}

#[test]
fn serve_answers_over_http_and_stops_cleanly_on_sigterm() {
    use std::io::{BufRead, BufReader};
    let directory = std::env::temp_dir().join(format!("permit-cli-serve-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    let audit = directory.join("audit.jsonl");
    let config = write_temp("serve.toml", &format!("[server]\naudit_log = \"{}\"\n", audit.display()));
    let mut child = Command::new(env!("CARGO_BIN_EXE_permit"))
        .args(["serve", "--config", config.to_str().unwrap(), "--bind", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let address =
        line.trim().strip_prefix("permit: listening on http://").unwrap_or_else(|| panic!("{line}")).to_owned();
    let request = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/request.json")).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let response: serde_json::Value = runtime.block_on(async {
        reqwest::Client::new()
            .post(format!("http://{address}/v1/decide"))
            .header("content-type", "application/json")
            .body(request)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    });
    assert_eq!(response["decisions"].as_array().unwrap().len(), 4);
    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert!(rest.contains("permit: stopped"), "{rest}");
    assert_eq!(std::fs::read_to_string(&audit).unwrap().lines().count(), 4, "flushed on shutdown");
    std::fs::remove_dir_all(&directory).unwrap();
}
