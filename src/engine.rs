//! The decision engine behind every interface (CLI, and later HTTP and hooks): request in,
//! one decision per pending call out, in order.
//!
//! Decides by running the gate on each call and charging costly calls to the session budget.
//! Until a classifier is configured, a call the gate routes to `classify` is answered `ask`
//! with reason code `no_classifier`: visible, never a silent allow. Never fails: every call gets
//! a decision, and anything the gate cannot vouch for is `ask` or `deny`.

use std::time::Duration;

use crate::config::Config;
use crate::decision::{Decision, GateAction, ReasonCode};
use crate::gate::reversibility::CostlyBudget;
use crate::gate::{CallContext, Gate, GateOutcome};
use crate::request::{CallDecision, DecideRequest, DecideResponse, PendingCall, Stage};

pub struct Engine {
    config: Config,
    gate: Gate,
    costly_budget: CostlyBudget,
}

/// A pending call with the gate's explained outcome and the decision returned for it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ExplainedDecision {
    pub decision: CallDecision,
    pub gate: GateOutcome,
}

impl Engine {
    pub fn new(config: Config) -> Result<Self, String> {
        let gate = Gate::new(&config)?;
        let costly_budget = CostlyBudget::new(
            config.reversibility.costly_budget_per_session,
            config.session.max_sessions,
            Duration::from_secs(config.session.ttl_secs),
        );
        Ok(Self { config, gate, costly_budget })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// Decides every pending call of a request.
    pub fn decide(&self, request: &DecideRequest) -> DecideResponse {
        DecideResponse { decisions: self.explain(request).into_iter().map(|explained| explained.decision).collect() }
    }

    /// Like [`Engine::decide`], with the gate's explanation of each call.
    pub fn explain(&self, request: &DecideRequest) -> Vec<ExplainedDecision> {
        let context = CallContext { cwd: request.cwd.as_deref() };
        request
            .pending
            .iter()
            .map(|call| {
                let mut outcome = self.gate.evaluate(call, context);
                self.costly_budget.charge(request.session_id.as_deref(), &mut outcome);
                ExplainedDecision { decision: gate_decision(call, &outcome), gate: outcome }
            })
            .collect()
    }
}

/// The decision for a call the gate settled. `classify` has no classifier yet, so a person
/// decides.
pub fn gate_decision(call: &PendingCall, outcome: &GateOutcome) -> CallDecision {
    let (decision, reason_code, reason) = match outcome.action {
        GateAction::Allow => (Decision::Allow, outcome.primary, None),
        GateAction::Ask => (Decision::Ask, outcome.primary, outcome.reason()),
        GateAction::Deny => (Decision::Deny, outcome.primary, outcome.reason()),
        GateAction::Classify => {
            let why = outcome.reason().unwrap_or_default();
            let why = why.strip_prefix("this call needs review: ").unwrap_or(&why).to_owned();
            (
                Decision::Ask,
                ReasonCode::NoClassifier,
                Some(format!(
                    "permit needs a person to approve this call: it needs the classifier ({why}) and none is configured"
                )),
            )
        }
    };
    CallDecision {
        id: call.id.clone(),
        decision,
        stage: Stage::Gate,
        tier: outcome.tier,
        reason,
        reason_code: Some(reason_code.as_str().to_owned()),
        p_allow: None,
        rules: outcome.rules.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::DecideRequest;

    #[test]
    fn classify_without_a_classifier_is_a_visible_ask() {
        let engine = Engine::new(Config::default()).unwrap();
        let request = DecideRequest::from_json(
            r#"{"cwd": "/workspace", "pending": [
                {"id": "a", "name": "Bash", "input": {"command": "rm -rf build"}},
                {"id": "b", "name": "Read", "input": {"file_path": "src/lib.rs"}},
                {"id": "c", "name": "Bash", "input": {"command": "rm -rf /"}}]}"#,
        )
        .unwrap();
        let response = engine.decide(&request);
        let decisions: Vec<_> =
            response.decisions.iter().map(|decision| (decision.id.as_str(), decision.decision)).collect();
        assert_eq!(decisions, [("a", Decision::Ask), ("b", Decision::Allow), ("c", Decision::Deny)]);
        assert_eq!(response.decisions[0].reason_code.as_deref(), Some("no_classifier"));
        assert!(response.decisions[0].reason.as_deref().unwrap().contains("none is configured"));
        assert!(response.decisions[1].reason.is_none());
        assert!(response.decisions[2].reason.as_deref().unwrap().contains("rm-root-or-home"));
    }
}
