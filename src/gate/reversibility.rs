//! The reversibility ladder's session state: a budget of costly calls per session.
//!
//! Decides only whether a `costly` call still has budget; it can turn an `allow` or `classify`
//! into `ask`, never the reverse. The spent counts live in the session store
//! ([`crate::session_store`]): this process's memory (bounded; a forgotten session starts with
//! a fresh budget, the documented price of the bound) or Redis shared by every replica, where
//! the check and the spend are one atomic step, so concurrent calls on several replicas never
//! spend the same headroom twice.
//!
//! Fails closed: when the store cannot answer, the costly call is `ask` with
//! `session_store_unavailable`; it is never allowed on an unread budget.

use std::sync::Arc;

use crate::decision::{GateAction, ReasonCode};
use crate::gate::{Finding, GateOutcome};
use crate::request::Reversibility;
use crate::session_store::{ANONYMOUS, SessionStore, StoreError};

pub struct CostlyBudget {
    per_session: u32,
    store: Arc<dyn SessionStore>,
}

/// Whether the ladder charges this outcome: a costly call the gate would let through (or send
/// to the classifier). Calls already `ask` or `deny` cost nothing.
fn charged(outcome: &GateOutcome) -> bool {
    outcome.reversibility == Some(Reversibility::Costly) && outcome.action <= GateAction::Classify
}

/// Makes the call `ask` with `code`, explained by `detail`.
fn to_ask(outcome: &mut GateOutcome, code: ReasonCode, subject: &str, detail: String) {
    outcome.action = GateAction::Ask;
    outcome.primary = code;
    outcome.reason_codes.push(code);
    outcome.findings.push(Finding { code, subject: subject.to_owned(), detail, rule: None });
}

impl CostlyBudget {
    pub fn new(per_session: u32, store: Arc<dyn SessionStore>) -> Self {
        Self { per_session, store }
    }

    /// Charges a costly call to its session, or turns it into `ask` when the budget is spent
    /// or cannot be read (then the store's error is returned, so the caller can spare the
    /// request's other calls the same wait). Calls without a session id share one anonymous
    /// budget, so omitting the id gains nothing.
    pub async fn charge(&self, session_id: Option<&str>, outcome: &mut GateOutcome) -> Result<(), StoreError> {
        if !charged(outcome) {
            return Ok(());
        }
        let key = session_id.unwrap_or(ANONYMOUS);
        match self.store.charge_costly(key, self.per_session).await {
            Ok(true) => Ok(()),
            Ok(false) => {
                to_ask(
                    outcome,
                    ReasonCode::CostlyBudgetExhausted,
                    key,
                    format!("this session has used its budget of {} costly calls", self.per_session),
                );
                Ok(())
            }
            Err(error) => {
                unavailable(outcome, key, &error);
                Err(error)
            }
        }
    }

    /// A costly call after the store already failed within this request: `ask`, without
    /// waiting on the store again.
    pub fn refuse_unread(&self, session_id: Option<&str>, outcome: &mut GateOutcome, error: &StoreError) {
        if charged(outcome) {
            unavailable(outcome, session_id.unwrap_or(ANONYMOUS), error);
        }
    }
}

fn unavailable(outcome: &mut GateOutcome, key: &str, error: &StoreError) {
    to_ask(
        outcome,
        ReasonCode::SessionStoreUnavailable,
        key,
        // The kind only: a store's own message (Redis's error text) stays in the service's log.
        format!("the session's costly-call budget could not be read ({})", error.kind()),
    );
}

/// The charge of a process that starts with a fresh budget and keeps none (the hook's local
/// gate): only a budget of zero turns a costly call into `ask`.
pub fn charge_fresh_budget(per_session: u32, session_id: Option<&str>, outcome: &mut GateOutcome) {
    if charged(outcome) && per_session == 0 {
        to_ask(
            outcome,
            ReasonCode::CostlyBudgetExhausted,
            session_id.unwrap_or(ANONYMOUS),
            "this session has used its budget of 0 costly calls".to_owned(),
        );
    }
}
