//! Agent integrations: `permit hook claude-code` and `permit hook codex`, the `PreToolUse` /
//! `PermissionRequest` command hooks, and `permit replay`, which turns real sessions into eval
//! cases.
//!
//! The hook reads the host's JSON on stdin ([`input`]), judges the call with the gate in the
//! hook process, then through a running `permit serve` (`--server`) or in-process ([`decide`]),
//! applies the host's permission mode, and prints the answer the host enforces ([`answer`]).
//! The classifier is shown the session from the host's transcript ([`transcript`] for Claude
//! Code, [`rollout`] for Codex), where only the words the person typed count as the request.
//!
//! The host's permission mode (`permission_mode`) is respected, never loosened:
//! - `plan`: the host blocks edits until the person approves a plan, so permit allows only reads
//!   (low tier); any other call it would allow is `ask`;
//! - `acceptEdits`: the host already accepts in-workspace edits; permit's answers are unchanged;
//! - `bypassPermissions`, `dontAsk`, `auto` (and modes permit does not know): no prompt reaches
//!   a person, so permit's `deny` holds and its `ask` is answered as a deny that tells the agent
//!   to ask the user.
//!
//! The host's own person-facing tools (`AskUserQuestion`, `ExitPlanMode`) get no opinion unless
//! permit denies them: their prompt is the person answering, and a hook `allow` would skip it.
//!
//! It never lets a call through on failure: unreadable input, an unreadable transcript, a server
//! that is down, slow or refuses the token, a config that does not load — the local gate's deny
//! stands and everything else is `ask` (as the host enforces it), with the reason. Input that is
//! not a hook input at all is answered with exit code 2, which both hosts enforce as a block.

pub mod answer;
pub mod decide;
pub mod input;
pub mod replay;
pub mod rollout;
pub mod transcript;

use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use answer::{Answer, Host};

use crate::decision::{Decision, Tier};
use answer::Verdict;
use input::{Parsed, PermissionMode};

/// Where and how the hook decides.
#[derive(Clone, Debug)]
pub struct HookSettings {
    pub host: Host,
    /// `--config`, else `$PERMIT_CONFIG`; `None` means the built-in defaults.
    pub config: Option<PathBuf>,
    /// A running `permit serve`, e.g. `http://127.0.0.1:8787`.
    pub server: Option<String>,
    /// Environment variable holding the server's bearer token.
    pub token_env: String,
    /// The whole hook's budget; stay well inside the host's hook timeout.
    pub timeout: Duration,
    /// Print the request permit would decide instead of deciding it.
    pub dry_run: bool,
    /// The operator states that `config` is the file the server runs: a local gate `allow` or
    /// `ask` is then final and the server is not asked about it.
    pub same_config_as_server: bool,
}

/// The host's tools whose prompt is the person answering: a hook `allow` would skip it.
pub const PERSON_FACING_TOOLS: &[&str] = &["AskUserQuestion", "ExitPlanMode"];

/// Runs the hook on `stdin`; returns what to print and the exit code. Never fails.
pub fn run(stdin: &str, settings: &HookSettings) -> Answer {
    let started = Instant::now();
    let input = match input::parse(stdin) {
        Ok(Parsed::Call(input)) => input,
        Ok(Parsed::OtherEvent) => return Answer::no_opinion(),
        Err(error) => return answer::unreadable(&error.to_string()),
    };
    if settings.dry_run {
        return dry_run(&input, settings);
    }
    let decision = decide::decide(&input, settings, started + settings.timeout);
    let mut verdict = match decision.decision {
        Decision::Allow => Verdict::Allow,
        Decision::Ask => Verdict::Ask,
        Decision::Deny => Verdict::Deny,
    };
    let mut reason = answer::reason_text(&decision);
    if input.permission_mode == PermissionMode::Plan && verdict == Verdict::Allow && decision.tier > Tier::Low {
        verdict = Verdict::Ask;
        reason = format!(
            "permit needs a person to approve this call: the session is in plan mode, where permit allows only reads (this call is {} tier)",
            decision.tier.as_str()
        );
    }
    let person_facing = input.tool_name.as_deref().is_some_and(|name| PERSON_FACING_TOOLS.contains(&name));
    if person_facing && verdict != Verdict::Deny {
        verdict = Verdict::NoOpinion;
    }
    answer::render(settings.host, input.event, &input.permission_mode, verdict, &reason)
}

fn dry_run(input: &input::HookInput, settings: &HookSettings) -> Answer {
    let call = decide::pending_call(input);
    match decide::build_request(input, &call, settings.host) {
        Ok(request) => Answer {
            stdout: serde_json::to_string_pretty(&request).unwrap_or_default(),
            stderr: String::new(),
            exit_code: 0,
        },
        Err(error) => Answer {
            stdout: String::new(),
            stderr: format!("permit: the request cannot be built: {error}"),
            exit_code: 1,
        },
    }
}
