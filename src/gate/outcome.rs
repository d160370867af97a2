//! The gate's answer for one call and its explanation: the outcome (action, tiers, the codes
//! seen, the rules that matched) and the findings behind it, and the fixed sentences built from
//! them. Data and wording only: it decides nothing and cannot fail.

use serde::Serialize;

use crate::decision::{GateAction, ReasonCode, Tier};
use crate::request::Reversibility;

/// One explained observation behind an outcome.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub code: ReasonCode,
    /// What it is about: a shell part, a path, a tool name.
    pub subject: String,
    pub detail: String,
    /// The table entry or operator rule id, when one is responsible.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

/// The gate's explained answer for one call.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GateOutcome {
    pub action: GateAction,
    /// The tier after argument analysis (the strictest part).
    pub tier: Tier,
    /// The tier from the tool's annotations alone.
    pub structural_tier: Tier,
    /// A critical finding or `hard_deny` rule: nothing may override this deny.
    pub hard_deny: bool,
    /// `reviewer` mode: a classifier may turn this into `ask`, never allow something new.
    pub veto_only: bool,
    /// `false` for irreversible tools: a model's allow becomes `ask`.
    pub model_may_allow: bool,
    pub reversibility: Option<Reversibility>,
    /// Ids of the built-in table entries and operator rules that matched.
    pub rules: Vec<String>,
    /// Every reason code observed, deduplicated, in the order first seen.
    pub reason_codes: Vec<ReasonCode>,
    /// The code that decided the action.
    pub primary: ReasonCode,
    pub findings: Vec<Finding>,
    /// Some part of the call writes a file by name: a write role or a write redirection in a
    /// shell line, or a file tool's write path. Never decides anything by itself; a trained
    /// head never clears such a call ([`crate::classifier::eligibility`]).
    pub writes: bool,
    /// Facts about the agent's machine that would answer some refusal here, for a caller that
    /// can check them ([`crate::gate::facts`]); sorted, without repeats. Never loosens anything
    /// by itself.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub needs: Vec<crate::gate::facts::Fact>,
}

impl GateOutcome {
    /// The outcome for a call the gate could not finish judging before the request's deadline:
    /// nothing was shown to be safe, so a person decides.
    pub fn unfinished(tool: &str) -> GateOutcome {
        GateOutcome {
            action: GateAction::Ask,
            tier: Tier::High,
            structural_tier: Tier::High,
            hard_deny: false,
            veto_only: false,
            model_may_allow: false,
            reversibility: None,
            rules: Vec::new(),
            reason_codes: vec![ReasonCode::ShellParseError],
            primary: ReasonCode::ShellParseError,
            findings: vec![Finding {
                code: ReasonCode::ShellParseError,
                subject: tool.to_owned(),
                detail: "was not judged before the request's deadline".to_owned(),
                rule: None,
            }],
            writes: false,
            needs: Vec::new(),
        }
    }

    /// What decided the outcome, as a phrase: the primary finding's subject, detail and rule.
    pub fn detail(&self) -> String {
        let finding = self.findings.iter().find(|finding| finding.code == self.primary);
        match finding {
            Some(finding) => {
                let rule = finding.rule.as_ref().map(|rule| format!(" (rule `{rule}`)")).unwrap_or_default();
                if finding.subject.is_empty() {
                    format!("{}{rule}", finding.detail)
                } else {
                    format!("`{}`: {}{rule}", finding.subject, finding.detail)
                }
            }
            None => format!("reason code `{}`", self.primary),
        }
    }

    /// The fixed sentence shown for a `deny` or `ask`, naming the rule or check responsible.
    pub fn reason(&self) -> Option<String> {
        if self.action == GateAction::Allow {
            return None;
        }
        let detail = self.detail();
        Some(match self.action {
            GateAction::Deny if self.hard_deny => {
                format!("blocked by permit, and no approval can unblock it: {detail}")
            }
            GateAction::Deny => format!("blocked by permit: {detail}"),
            GateAction::Ask => format!("permit needs a person to approve this call: {detail}"),
            GateAction::Classify => format!("this call needs review: {detail}"),
            GateAction::Allow => detail,
        })
    }
}
