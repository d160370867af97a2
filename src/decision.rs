//! The vocabulary every stage speaks: decisions, tiers, gate actions and stable reason codes.
//!
//! Decides nothing by itself. Every ordered enum here derives `Ord` from least to most strict,
//! so layers combine with `max` and the strictest always wins (`deny > ask > allow`).

use serde::{Deserialize, Serialize};

/// The answer permit gives for one pending call. Ordered from least to most strict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Run the call without a person.
    Allow,
    /// Escalate to a human.
    Ask,
    /// Do not run the call; the agent is told the fixed reason.
    Deny,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Ask => "ask",
            Decision::Deny => "deny",
        }
    }
}

/// How much harm a call can do, from the tool's annotations raised by argument analysis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// Read-only, not destructive, not open-world.
    Low,
    /// Not destructive, not open-world, but may write.
    Medium,
    /// Destructive or open-world, or anything we cannot vouch for (unknown tool, unparsable shell).
    High,
    /// Catastrophic: hard-denied in every mode.
    Critical,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Low => "low",
            Tier::Medium => "medium",
            Tier::High => "high",
            Tier::Critical => "critical",
        }
    }
}

/// What the gate wants done with a call. Ordered from least to most strict: `Classify` sits
/// below `Ask` because a classifier may still allow, while `Ask` always reaches a person.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateAction {
    Allow,
    Classify,
    Ask,
    Deny,
}

impl GateAction {
    pub fn as_str(self) -> &'static str {
        match self {
            GateAction::Allow => "allow",
            GateAction::Classify => "classify",
            GateAction::Ask => "ask",
            GateAction::Deny => "deny",
        }
    }
}

/// Stable, machine-readable reason codes. Renaming one is a breaking change for operators who
/// alert or report on them, so new situations get new codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasonCode {
    /// The tool's tier maps to this action in the configured mode.
    ModeTier,
    /// The tool is not in the registry, so it is treated as `high`.
    UnknownTool,
    /// The request carried annotations for a tool the operator did not configure; ignored.
    UntrustedAnnotationsIgnored,
    /// Every part of the shell command is on the known-safe table.
    KnownSafeCommand,
    /// A shell part matched the critical table.
    CriticalCommand,
    /// A known command was used with a flag that makes it unsafe (`find -delete`, `sed -i`, …).
    DangerousFlag,
    /// A shell part runs a command that is not on the known-safe table.
    UnlistedCommand,
    /// The call's arguments are missing or of the wrong type for the tool.
    MalformedArguments,
    /// The shell command could not be parsed (or nests too deeply), so it cannot be vouched for.
    ShellParseError,
    /// A shell part runs something whose words are only known at run time (`$CMD`, `$(…)` as a name).
    DynamicCommand,
    /// A shell part sets environment variables that can change what runs (`PATH`, `LD_PRELOAD`,
    /// `GIT_CONFIG_*`, …).
    EnvironmentOverride,
    /// A shell part runs with elevated privileges (`sudo`, `doas`).
    PrivilegeEscalation,
    /// A shell part runs a script or payload the gate cannot see in full.
    OpaqueExecution,
    /// A path lies outside the workspace.
    PathOutsideWorkspace,
    /// A path climbs out of the workspace with `..`.
    PathEscape,
    /// A path points into a credential store (`~/.ssh`, `~/.aws`, `.env`, …).
    CredentialPath,
    /// A path points into a system location (`/etc`, `/usr`, `/dev`, …).
    SystemPath,
    /// A write to a location that runs code later (shell rc files, cron, git hooks, autostart).
    PersistencePath,
    /// A write to the agent's own permission or policy files.
    AgentPolicyPath,
    /// A write to a CI pipeline definition (`.github/workflows/`, `.gitlab-ci.yml`, …): it runs
    /// with the repository's secrets, can deploy, and decides which checks run.
    CiConfigPath,
    /// A write to a file that decides which files search and version-control tools skip
    /// (`.gitignore`, `.ignore`, `.rgignore`): a `!.env` line makes them print secrets.
    VisibilityConfig,
    /// The request had no usable workspace (`cwd` missing, or too broad such as `/` or `~`).
    NoWorkspace,
    /// An operator rule decided (or tightened) the call.
    OperatorRule,
    /// A `hard_deny` operator rule matched; nothing overrides it.
    HardDenyRule,
    /// The session has used up its budget of costly calls.
    CostlyBudgetExhausted,
    /// The tool is irreversible: no model may auto-allow it.
    Irreversible,
    /// The call needs the classifier but none is configured, so it goes to a person.
    NoClassifier,
    /// The screen cleared the call (its choice, and P(allow) at or above the threshold).
    ScreenAllow,
    /// The review allowed the call.
    ReviewAllow,
    /// The review gave no usable answer (timeout, transport, malformed…; the record's
    /// `error_kind` says which), so `review.on_error` decided.
    ReviewError,
    /// The screen answered but did not clear the call, and no review model is configured.
    NoReviewModel,
    /// The screen did not answer within its `timeout_ms`, and no review model is configured.
    ScreenTimeout,
    /// The screen gave no usable answer for another reason (the record's `error_kind` says
    /// which), and no review model is configured.
    ScreenError,
    /// Every model slot of the process stayed busy until the stage's time ran out, so no model
    /// judged the call.
    ModelBusy,
    /// The request held more classified calls than the models judge per request.
    ModelCallLimit,
    /// The session had too many classifier denials, so a person decides from here.
    SessionDenialLimit,
    /// The request's deadline ran out while the call was still with the classifier.
    DecisionTimeout,
    /// The audit log could not be written, so an `allow` was answered `ask`: no call is allowed
    /// without its record.
    AuditUnavailable,
    /// The session store (memory or Redis) could not be read or updated in time, so a call
    /// whose decision needs the session's state (a classified or a costly call) is `ask`.
    SessionStoreUnavailable,
}

impl ReasonCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ReasonCode::ModeTier => "mode_tier",
            ReasonCode::UnknownTool => "unknown_tool",
            ReasonCode::UntrustedAnnotationsIgnored => "untrusted_annotations_ignored",
            ReasonCode::KnownSafeCommand => "known_safe_command",
            ReasonCode::CriticalCommand => "critical_command",
            ReasonCode::DangerousFlag => "dangerous_flag",
            ReasonCode::ShellParseError => "shell_parse_error",
            ReasonCode::UnlistedCommand => "unlisted_command",
            ReasonCode::MalformedArguments => "malformed_arguments",
            ReasonCode::DynamicCommand => "dynamic_command",
            ReasonCode::PrivilegeEscalation => "privilege_escalation",
            ReasonCode::EnvironmentOverride => "environment_override",
            ReasonCode::OpaqueExecution => "opaque_execution",
            ReasonCode::PathOutsideWorkspace => "path_outside_workspace",
            ReasonCode::PathEscape => "path_escape",
            ReasonCode::CredentialPath => "credential_path",
            ReasonCode::SystemPath => "system_path",
            ReasonCode::PersistencePath => "persistence_path",
            ReasonCode::AgentPolicyPath => "agent_policy_path",
            ReasonCode::CiConfigPath => "ci_config_path",
            ReasonCode::VisibilityConfig => "visibility_config",
            ReasonCode::NoWorkspace => "no_workspace",
            ReasonCode::OperatorRule => "operator_rule",
            ReasonCode::HardDenyRule => "hard_deny_rule",
            ReasonCode::CostlyBudgetExhausted => "costly_budget_exhausted",
            ReasonCode::Irreversible => "irreversible",
            ReasonCode::NoClassifier => "no_classifier",
            ReasonCode::ScreenAllow => "screen_allow",
            ReasonCode::ReviewAllow => "review_allow",
            ReasonCode::ReviewError => "review_error",
            ReasonCode::NoReviewModel => "no_review_model",
            ReasonCode::ScreenTimeout => "screen_timeout",
            ReasonCode::ScreenError => "screen_error",
            ReasonCode::ModelBusy => "model_busy",
            ReasonCode::ModelCallLimit => "model_call_limit",
            ReasonCode::SessionDenialLimit => "session_denial_limit",
            ReasonCode::DecisionTimeout => "decision_timeout",
            ReasonCode::AuditUnavailable => "audit_unavailable",
            ReasonCode::SessionStoreUnavailable => "session_store_unavailable",
        }
    }
}

impl std::fmt::Display for ReasonCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for GateAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn strictest_wins_with_max() {
        assert_eq!(Decision::Allow.max(Decision::Ask), Decision::Ask);
        assert_eq!(Decision::Deny.max(Decision::Ask), Decision::Deny);
        assert_eq!(GateAction::Classify.max(GateAction::Ask), GateAction::Ask);
        assert_eq!(GateAction::Allow.max(GateAction::Classify), GateAction::Classify);
        assert_eq!(Tier::Medium.max(Tier::Critical), Tier::Critical);
    }

    /// Every reason code: the match has no wildcard, so a new code does not compile until it
    /// is listed here too, and then its wire name is checked below. Other modules' tests
    /// (the head's eligibility table) iterate it too.
    pub(crate) fn every_reason_code() -> Vec<ReasonCode> {
        let all = vec![
            ReasonCode::ModeTier,
            ReasonCode::UnknownTool,
            ReasonCode::UntrustedAnnotationsIgnored,
            ReasonCode::KnownSafeCommand,
            ReasonCode::CriticalCommand,
            ReasonCode::DangerousFlag,
            ReasonCode::UnlistedCommand,
            ReasonCode::MalformedArguments,
            ReasonCode::ShellParseError,
            ReasonCode::DynamicCommand,
            ReasonCode::EnvironmentOverride,
            ReasonCode::PrivilegeEscalation,
            ReasonCode::OpaqueExecution,
            ReasonCode::PathOutsideWorkspace,
            ReasonCode::PathEscape,
            ReasonCode::CredentialPath,
            ReasonCode::SystemPath,
            ReasonCode::PersistencePath,
            ReasonCode::AgentPolicyPath,
            ReasonCode::CiConfigPath,
            ReasonCode::VisibilityConfig,
            ReasonCode::NoWorkspace,
            ReasonCode::OperatorRule,
            ReasonCode::HardDenyRule,
            ReasonCode::CostlyBudgetExhausted,
            ReasonCode::Irreversible,
            ReasonCode::NoClassifier,
            ReasonCode::ScreenAllow,
            ReasonCode::ReviewAllow,
            ReasonCode::ReviewError,
            ReasonCode::NoReviewModel,
            ReasonCode::ScreenTimeout,
            ReasonCode::ScreenError,
            ReasonCode::ModelBusy,
            ReasonCode::ModelCallLimit,
            ReasonCode::SessionDenialLimit,
            ReasonCode::DecisionTimeout,
            ReasonCode::AuditUnavailable,
            ReasonCode::SessionStoreUnavailable,
        ];
        for code in &all {
            match code {
                ReasonCode::ModeTier => {}
                ReasonCode::UnknownTool => {}
                ReasonCode::UntrustedAnnotationsIgnored => {}
                ReasonCode::KnownSafeCommand => {}
                ReasonCode::CriticalCommand => {}
                ReasonCode::DangerousFlag => {}
                ReasonCode::UnlistedCommand => {}
                ReasonCode::MalformedArguments => {}
                ReasonCode::ShellParseError => {}
                ReasonCode::DynamicCommand => {}
                ReasonCode::EnvironmentOverride => {}
                ReasonCode::PrivilegeEscalation => {}
                ReasonCode::OpaqueExecution => {}
                ReasonCode::PathOutsideWorkspace => {}
                ReasonCode::PathEscape => {}
                ReasonCode::CredentialPath => {}
                ReasonCode::SystemPath => {}
                ReasonCode::PersistencePath => {}
                ReasonCode::AgentPolicyPath => {}
                ReasonCode::CiConfigPath => {}
                ReasonCode::VisibilityConfig => {}
                ReasonCode::NoWorkspace => {}
                ReasonCode::OperatorRule => {}
                ReasonCode::HardDenyRule => {}
                ReasonCode::CostlyBudgetExhausted => {}
                ReasonCode::Irreversible => {}
                ReasonCode::NoClassifier => {}
                ReasonCode::ScreenAllow => {}
                ReasonCode::ReviewAllow => {}
                ReasonCode::ReviewError => {}
                ReasonCode::NoReviewModel => {}
                ReasonCode::ScreenTimeout => {}
                ReasonCode::ScreenError => {}
                ReasonCode::ModelBusy => {}
                ReasonCode::ModelCallLimit => {}
                ReasonCode::SessionDenialLimit => {}
                ReasonCode::DecisionTimeout => {}
                ReasonCode::AuditUnavailable => {}
                ReasonCode::SessionStoreUnavailable => {}
            }
        }
        all
    }

    #[test]
    fn serde_names_match_as_str() {
        let all = every_reason_code();
        assert_eq!(all.len(), 39);
        for code in all {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
            // And back: the wire name reads as the same code.
            assert_eq!(serde_json::from_str::<ReasonCode>(&json).unwrap(), code);
        }
        assert_eq!(serde_json::to_string(&Tier::Critical).unwrap(), "\"critical\"");
    }
}
