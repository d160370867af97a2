//! The one place a call's final decision is made: [`finalize`].
//!
//! Every layer reports what it found, and this pure function combines them strictest-wins:
//! the gate's outcome, the session's costly-call budget, and what happened in the classifier
//! (the session's lock, the per-request bound, the deadline, the screen's and the review's
//! answers), read with the policy settings (`review.on_error`, `review.on_deny`, `reviewer`
//! mode's veto, the irreversibility ladder, the screen's threshold). It is written as one
//! `match`, in the order the layers rank, with a comment on every arm.
//!
//! It never calls a model, the session store or the clock, and it changes no state: the
//! pipeline gathers the evidence, calls it once per call, and then applies the one session
//! update the decision calls for ([`session_update`]), in one place.
//!
//! Fails closed: a missing, failed, busy, late or malformed answer is never `allow`. Only two
//! arms allow after the gate sends a call to the classifier (the screen cleared it, or the
//! review chose `allow` on a call a model may allow), and nothing loosens a gate `ask` or
//! `deny` (a `hard_deny` is a gate `deny`).

use crate::classifier::questions::{ALLOW, agent_reason};
use crate::classifier::record::StageRecord;
use crate::config::{OnDeny, OnError};
use crate::decision::{Decision, GateAction, ReasonCode};
use crate::gate::GateOutcome;
use crate::model::ModelError;
use crate::request::{CallDecision, PendingCall, Stage};

const PERSON: &str = "permit needs a person to approve this call";

/// The costly-call budget's answer for one call (the reversibility ladder's `costly` tools).
#[derive(Clone, Debug, PartialEq)]
pub enum Budget {
    /// Not charged: the call is not costly, or the gate already asks or denies.
    NotCharged,
    /// Charged to the session, within its budget.
    Charged,
    /// The session (`session`, or the shared anonymous one) has spent its budget.
    Exhausted { session: String, per_session: u32 },
    /// The budget could not be read; `kind` is the store error's kind.
    Unreadable { session: String, kind: &'static str },
}

impl Budget {
    /// Whether the ladder charges this outcome: a costly call the gate would let through (or
    /// send to the classifier). Calls already `ask` or `deny` cost nothing.
    pub fn applies_to(outcome: &GateOutcome) -> bool {
        outcome.reversibility == Some(crate::request::Reversibility::Costly) && outcome.action <= GateAction::Classify
    }

    /// The code and the detail this answer adds to the gate's findings, when it refuses.
    pub fn refusal(&self) -> Option<(ReasonCode, &str, String)> {
        match self {
            Budget::NotCharged | Budget::Charged => None,
            Budget::Exhausted { session, per_session } => Some((
                ReasonCode::CostlyBudgetExhausted,
                session,
                format!("this session has used its budget of {per_session} costly calls"),
            )),
            Budget::Unreadable { session, kind } => Some((
                ReasonCode::SessionStoreUnavailable,
                session,
                // The kind only: a store's own message (Redis's error text) stays in the log.
                format!("the session's costly-call budget could not be read ({kind})"),
            )),
        }
    }

    /// The gate's outcome as the audit record shows it: a refusing budget's finding joins the
    /// gate's (the budget is the gate's reversibility ladder, kept per session). Display only:
    /// [`finalize`] reads the gate's own outcome and this budget, never this copy.
    pub fn as_recorded(&self, outcome: &GateOutcome) -> GateOutcome {
        let mut recorded = outcome.clone();
        if let Some((code, session, detail)) = self.refusal() {
            recorded.action = GateAction::Ask;
            recorded.primary = code;
            recorded.reason_codes.push(code);
            recorded.findings.push(crate::gate::Finding { code, subject: session.to_owned(), detail, rule: None });
        }
        recorded
    }
}

/// What happened to a call the gate sent to the classifier.
#[derive(Clone, Debug)]
pub enum Classifier<'a> {
    /// No model stage is configured.
    NotConfigured,
    /// The session store could not say whether the session is locked (`kind`: its error kind).
    SessionUnreadable { kind: &'static str },
    /// The session has had too many classifier denials.
    SessionLocked,
    /// The request held more classified calls than the models judge per request (`limit`);
    /// `stage` is the first configured model stage.
    OverCallLimit { limit: usize, stage: Stage },
    /// The service had no model slot free, so it did not start the stages (`stage`: the first
    /// configured model stage).
    ServiceBusy { stage: Stage },
    /// The request's deadline passed while the stages were still working.
    TimedOut,
    /// The stages ran. `screen` is `None` when the call skipped the screen (irreversible, or
    /// not eligible for a trained head) or none is configured; `review` is `None` when no
    /// review model is configured or the screen settled the call.
    Judged { screen: Option<Screened<'a>>, review: Option<Reviewed<'a>> },
}

/// The screen's answer for one call, with the rule it is read by.
#[derive(Clone, Copy, Debug)]
pub struct Screened<'a> {
    pub record: &'a StageRecord,
    /// P(allow) needed to skip the review.
    pub threshold: f64,
    /// Whether the model reports probabilities (one that should and did not gave no answer).
    pub reports_probabilities: bool,
}

/// The review's answer for one call, with the settings it is read by.
#[derive(Clone, Copy, Debug)]
pub struct Reviewed<'a> {
    pub record: &'a StageRecord,
    /// The chosen option; `None` when the review failed (the record's `error_kind` says how).
    pub option: Option<&'a str>,
    pub on_error: OnError,
    pub on_deny: OnDeny,
}

/// The screen's rule, the one every consumer applies (the pipeline, `permit tune`, the eval
/// report, the metrics): a call skips the review when the model chose `allow` **and**
/// P(allow) ≥ `threshold`. A model without probabilities decides by its choice; one that
/// should have reported them but did not has given no usable answer.
pub fn screen_allows(choice: Option<&str>, p_allow: Option<f64>, threshold: f64, reports_probabilities: bool) -> bool {
    match (choice, p_allow) {
        (Some(ALLOW), Some(p_allow)) => p_allow >= threshold,
        (Some(ALLOW), None) => !reports_probabilities,
        _ => false,
    }
}

/// Whether a final decision is the screen's own allow (the call skipped the review): what the
/// eval report and the service's metrics count as cleared.
pub fn cleared_by_screen(decision: Decision, stage: Stage) -> bool {
    decision == Decision::Allow && stage == Stage::Screen
}

impl Screened<'_> {
    /// Whether the screen cleared the call: it answered, and its answer passes the rule.
    pub fn clears(&self) -> bool {
        self.record.error_kind.is_none()
            && screen_allows(
                self.record.choice.as_deref(),
                self.record.p_allow,
                self.threshold,
                self.reports_probabilities,
            )
    }
}

/// The call's final decision, from everything each layer found.
pub fn finalize(call: &PendingCall, gate: &GateOutcome, budget: &Budget, classifier: &Classifier<'_>) -> CallDecision {
    let decide = |decision: Decision, stage: Stage, code: ReasonCode, reason: Option<String>| CallDecision {
        id: call.id.clone(),
        decision,
        stage,
        tier: gate.tier,
        reason,
        reason_code: Some(code),
        p_allow: None,
        rules: gate.rules.clone(),
    };
    let person = |stage: Stage, code: ReasonCode, why: String| {
        decide(Decision::Ask, stage, code, Some(format!("{PERSON}: {why}")))
    };
    match (gate.action, budget.refusal(), classifier) {
        // The gate denies (a hard deny among them): final, whatever any other layer says.
        (GateAction::Deny, _, _) => decide(Decision::Deny, Stage::Gate, gate.primary, gate.reason()),
        // The gate asks a person: no later layer may loosen it.
        (GateAction::Ask, _, _) => decide(Decision::Ask, Stage::Gate, gate.primary, gate.reason()),
        // A costly call over its session's budget, or whose budget could not be read: a person
        // decides, before any model is asked.
        (GateAction::Allow | GateAction::Classify, Some((code, session, detail)), _) => {
            person(Stage::Gate, code, format!("`{session}`: {detail}"))
        }
        // The gate showed the call is safe (and any costly charge went through).
        (GateAction::Allow, None, _) => decide(Decision::Allow, Stage::Gate, gate.primary, None),
        // The call needs the classifier and none is configured.
        (GateAction::Classify, None, Classifier::NotConfigured) => person(
            Stage::Gate,
            ReasonCode::NoClassifier,
            format!("it needs the classifier ({}) and none is configured", gate.detail()),
        ),
        // The session's state is unknown: no model is asked on an unread lock.
        (GateAction::Classify, None, Classifier::SessionUnreadable { kind }) => person(
            Stage::Session,
            ReasonCode::SessionStoreUnavailable,
            format!("the session's state could not be read ({kind}), so no model judged it"),
        ),
        // Too many classifier denials in this session: a person decides from here.
        (GateAction::Classify, None, Classifier::SessionLocked) => person(
            Stage::Session,
            ReasonCode::SessionDenialLimit,
            "the classifier has denied too many calls in this session, so a person decides from here".to_owned(),
        ),
        // Past the per-request bound: a request cannot buy more model calls by holding more.
        (GateAction::Classify, None, Classifier::OverCallLimit { limit, stage }) => person(
            *stage,
            ReasonCode::ModelCallLimit,
            format!("the request holds more calls for the classifier than the {limit} it judges per request"),
        ),
        // The service shed the request's model work: no model judged the call.
        (GateAction::Classify, None, Classifier::ServiceBusy { stage }) => person(
            *stage,
            ReasonCode::ModelBusy,
            "every model slot of the service is busy, so no model judged it".to_owned(),
        ),
        // The deadline ran out with the call still in the classifier.
        (GateAction::Classify, None, Classifier::TimedOut) => {
            person(Stage::Timeout, ReasonCode::DecisionTimeout, "the classifier did not decide in time".to_owned())
        }
        // The stages ran: the screen and the review decide, within the policy.
        (GateAction::Classify, None, Classifier::Judged { screen, review }) => {
            let mut decision = judged(gate, screen.as_ref(), review.as_ref(), &decide);
            decision.p_allow = match decision.reason_code {
                // A busy screen gave no probability worth showing.
                Some(ReasonCode::ModelBusy) if decision.stage == Stage::Screen => None,
                _ => screen.and_then(|screen| screen.record.p_allow),
            };
            decision
        }
    }
}

/// The classifier's decision for a call the stages judged.
fn judged(
    gate: &GateOutcome,
    screen: Option<&Screened<'_>>,
    review: Option<&Reviewed<'_>>,
    decide: &impl Fn(Decision, Stage, ReasonCode, Option<String>) -> CallDecision,
) -> CallDecision {
    let person = |stage: Stage, code: ReasonCode, why: &str| {
        decide(Decision::Ask, stage, code, Some(format!("{PERSON}: {why}")))
    };
    let screen_error = screen.and_then(|screen| screen.record.error_kind.as_deref());
    match (screen, screen_error, review) {
        // The screen cleared a call a model may allow (the pipeline screens no other).
        (Some(screen), _, _) if gate.model_may_allow && screen.clears() => {
            decide(Decision::Allow, Stage::Screen, ReasonCode::ScreenAllow, None)
        }
        // The screen got no model slot: the review would wait for the same slots, so a
        // person decides now rather than after a second timeout.
        (Some(_), Some(ModelError::BUSY_KIND), _) => {
            person(Stage::Screen, ReasonCode::ModelBusy, "every model slot stayed busy, so no model judged it in time")
        }
        // Not cleared, and no review model: a person decides, told what happened.
        (_, _, None) if !gate.model_may_allow => {
            person(Stage::Screen, ReasonCode::Irreversible, "it is irreversible, so no model may allow it")
        }
        (_, Some(ModelError::TIMEOUT_KIND), None) => person(
            Stage::Screen,
            ReasonCode::ScreenTimeout,
            "the screen model did not answer in time and no review model is configured",
        ),
        (_, Some(kind), None) => person(
            Stage::Screen,
            ReasonCode::ScreenError,
            &format!("the screen model could not judge it ({kind}) and no review model is configured"),
        ),
        (_, None, None) => person(
            Stage::Screen,
            ReasonCode::NoReviewModel,
            "the screen did not clear it and no review model is configured",
        ),
        // The review decides.
        (_, _, Some(review)) => reviewed(gate, review, decide),
    }
}

/// Turns a review's option into the call's decision, fail closed.
fn reviewed(
    gate: &GateOutcome,
    review: &Reviewed<'_>,
    decide: &impl Fn(Decision, Stage, ReasonCode, Option<String>) -> CallDecision,
) -> CallDecision {
    let denial = review.option.and_then(ReasonCode::review_denial);
    match (review.option, denial) {
        // The review allowed a call a model may allow.
        (Some(ALLOW), _) if gate.model_may_allow => {
            decide(Decision::Allow, Stage::Review, ReasonCode::ReviewAllow, None)
        }
        // The reversibility ladder: no model may allow an irreversible call alone.
        (Some(ALLOW), _) => decide(
            Decision::Ask,
            Stage::Review,
            ReasonCode::Irreversible,
            Some(format!("{PERSON}: it is irreversible, so the review's approval is not enough")),
        ),
        // A deny option: the agent sees its fixed description, never model text. `reviewer`
        // mode's classifier may only veto (its deny asks a person), and an operator may turn
        // review denials into questions (`on_deny = "ask"`).
        (Some(option), Some(code)) => {
            let decision = if gate.veto_only || review.on_deny == OnDeny::Ask { Decision::Ask } else { Decision::Deny };
            let reason = agent_reason(option).unwrap_or_else(|| {
                "permit blocked this call. Find a safer way to do what the user asked, and do not try to get around this block.".to_owned()
            });
            decide(decision, Stage::Review, code, Some(reason))
        }
        // No usable answer (an error, or an option outside the verdict's set, which validation
        // already refuses): `on_error` decides. A review that got no model slot is told apart
        // from one that failed, but `on_error` governs both: neither judged the call.
        (None, _) | (Some(_), None) => {
            let kind = review.record.error_kind.as_deref().unwrap_or("error");
            let (code, why) = if kind == ModelError::BUSY_KIND {
                (
                    ReasonCode::ModelBusy,
                    "every model slot stayed busy, so the review could not judge it in time".to_owned(),
                )
            } else {
                (ReasonCode::ReviewError, format!("the review model could not judge it ({kind})"))
            };
            match review.on_error {
                OnError::Ask => decide(Decision::Ask, Stage::Review, code, Some(format!("{PERSON}: {why}"))),
                OnError::Deny => decide(
                    Decision::Deny,
                    Stage::Review,
                    code,
                    Some(format!(
                        "permit blocked this call: {why}, and this deployment blocks what it cannot review. Find a safer way to do what the user asked."
                    )),
                ),
            }
        }
    }
}

/// What the session must remember of a decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionUpdate {
    /// A model allowed the call: the classifier's denial streak ends.
    ClassifierAllowed,
    /// The review chose a deny option (also when `reviewer` mode or `on_deny` made it `ask`):
    /// it counts toward the session's denial limits.
    ClassifierDenied,
}

/// The session update a final decision calls for, if any.
pub fn session_update(decision: &CallDecision) -> Option<SessionUpdate> {
    match decision.reason_code? {
        ReasonCode::ScreenAllow | ReasonCode::ReviewAllow => Some(SessionUpdate::ClassifierAllowed),
        code if ReasonCode::REVIEW_DENIALS.contains(&code) => Some(SessionUpdate::ClassifierDenied),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
