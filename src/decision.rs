//! The vocabulary every stage speaks: decisions, tiers, gate actions and stable reason codes.
//!
//! Decides nothing by itself. Every ordered enum here derives `Ord` from least to most strict,
//! so layers combine with `max` and the strictest always wins (`deny > ask > allow`).

use serde::{Deserialize, Serialize};
use strum::{Display, EnumIter, IntoStaticStr};

/// The answer permit gives for one pending call. Ordered from least to most strict.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, IntoStaticStr, EnumIter, Display,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Decision {
    /// Run the call without a person.
    Allow,
    /// Escalate to a human.
    Ask,
    /// Do not run the call; the agent is told the fixed reason.
    Deny,
}

impl Decision {
    /// The wire name: serde's, from the same `snake_case` rule (a test reads every variant back).
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// How much harm a call can do, from the tool's annotations raised by argument analysis.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, IntoStaticStr, EnumIter, Display,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
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
    /// The wire name: serde's, from the same `snake_case` rule (a test reads every variant back).
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What the gate wants done with a call. Ordered from least to most strict: `Classify` sits
/// below `Ask` because a classifier may still allow, while `Ask` always reaches a person.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, IntoStaticStr, EnumIter, Display,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum GateAction {
    Allow,
    Classify,
    Ask,
    Deny,
}

impl GateAction {
    /// The wire name: serde's, from the same `snake_case` rule (a test reads every variant back).
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Stable, machine-readable reason codes. Renaming one is a breaking change for operators who
/// alert or report on them, so new situations get new codes.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, IntoStaticStr, EnumIter, Display,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
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
    /// The hook could not reach a decision (bad input, no server, an error): it fails closed.
    HookError,
    /// The review denied the call: nothing the user said asks for it.
    DenyNotRequested,
    /// The review denied the call: it goes beyond what the user asked for.
    DenyScopeExpansion,
    /// The review denied the call: it would destroy or irreversibly change data.
    DenyDestructive,
    /// The review denied the call: it would send data somewhere the user did not name.
    DenyExfiltration,
    /// The review denied the call: it would weaken security or the agent's guard rails.
    DenySecurityWeakening,
    /// The review denied the call: it would skip a human review step.
    DenyBypassesReview,
    /// The review denied the call: the user's intent for it is unclear.
    DenyUnclear,
}

impl ReasonCode {
    /// The review's deny options, each its own code: the option id on the wire is the code's
    /// name, so the verdict's closed option set and these codes are one list (a test in
    /// `classifier::questions` checks every deny option maps here).
    pub const REVIEW_DENIALS: [ReasonCode; 7] = [
        ReasonCode::DenyNotRequested,
        ReasonCode::DenyScopeExpansion,
        ReasonCode::DenyDestructive,
        ReasonCode::DenyExfiltration,
        ReasonCode::DenySecurityWeakening,
        ReasonCode::DenyBypassesReview,
        ReasonCode::DenyUnclear,
    ];

    /// The code of a review deny option (`deny_exfiltration`), or `None` for anything else.
    pub fn review_denial(option_id: &str) -> Option<ReasonCode> {
        Self::REVIEW_DENIALS.into_iter().find(|code| code.as_str() == option_id)
    }
}

impl ReasonCode {
    /// The wire name: serde's, from the same `snake_case` rule (a test reads every variant back).
    pub fn as_str(self) -> &'static str {
        self.into()
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

    /// Every reason code, from strum's iterator: a new code is covered without being listed.
    /// Other modules' tests (the head's eligibility table) iterate it too.
    pub(crate) fn every_reason_code() -> Vec<ReasonCode> {
        use strum::IntoEnumIterator;
        ReasonCode::iter().collect()
    }

    /// serde's and strum's names come from the same `snake_case` rule; this reads every
    /// variant of each enum out and back, so the two can never drift.
    fn wire_names_round_trip<T>()
    where
        T: strum::IntoEnumIterator
            + Serialize
            + for<'de> Deserialize<'de>
            + Into<&'static str>
            + std::fmt::Display
            + PartialEq
            + std::fmt::Debug
            + Copy,
    {
        let mut names = std::collections::HashSet::new();
        for value in T::iter() {
            let name: &'static str = value.into();
            assert!(names.insert(name), "`{name}` is used twice");
            assert_eq!(serde_json::to_string(&value).unwrap(), format!("\"{name}\""));
            assert_eq!(value.to_string(), name);
            assert_eq!(serde_json::from_str::<T>(&format!("\"{name}\"")).unwrap(), value);
        }
    }

    #[test]
    fn serde_names_match_as_str() {
        wire_names_round_trip::<ReasonCode>();
        wire_names_round_trip::<Decision>();
        wire_names_round_trip::<Tier>();
        wire_names_round_trip::<GateAction>();
        assert_eq!(every_reason_code().len(), 47);
        // Names operators alert on, pinned: renaming one is a breaking change.
        assert_eq!(ReasonCode::KnownSafeCommand.as_str(), "known_safe_command");
        assert_eq!(ReasonCode::SessionStoreUnavailable.as_str(), "session_store_unavailable");
        assert_eq!(ReasonCode::DenyExfiltration.as_str(), "deny_exfiltration");
        assert_eq!(ReasonCode::HookError.as_str(), "hook_error");
        assert_eq!(Tier::Critical.as_str(), "critical");
    }

    #[test]
    fn review_denials_are_exactly_the_deny_codes() {
        for code in every_reason_code() {
            let is_denial = ReasonCode::REVIEW_DENIALS.contains(&code);
            assert_eq!(is_denial, code.as_str().starts_with("deny_"), "{code}");
            assert_eq!(ReasonCode::review_denial(code.as_str()) == Some(code), is_denial, "{code}");
        }
        assert_eq!(ReasonCode::review_denial("allow"), None);
    }
}
