//! The reversibility ladder's session state: a budget of costly calls per session.
//!
//! Decides only whether a `costly` call still has budget, as a [`Budget`] that
//! [`crate::classifier::finalize`] reads: it can turn an `allow` or `classify` into `ask`,
//! never the reverse. It never edits the gate's outcome. The spent counts live in the session
//! store ([`crate::session_store`]), the same store (and the same bounded memory) as the
//! classifier's denial counts: this process's memory (bounded; a forgotten session starts with
//! a fresh budget, the documented price of the bound) or Redis shared by every replica, where
//! the check and the spend are one atomic step, so concurrent calls on several replicas never
//! spend the same headroom twice.
//!
//! Fails closed: when the store cannot answer, the costly call's budget is
//! [`Budget::Unreadable`], which is `ask` with `session_store_unavailable`; it is never allowed
//! on an unread budget.

use std::sync::Arc;

use crate::classifier::finalize::Budget;
use crate::gate::GateOutcome;
use crate::session_store::{ANONYMOUS, SessionStore, StoreError};

pub struct CostlyBudget {
    per_session: u32,
    store: Arc<dyn SessionStore>,
}

impl CostlyBudget {
    pub fn new(per_session: u32, store: Arc<dyn SessionStore>) -> Self {
        Self { per_session, store }
    }

    /// Charges a costly call to its session. An error when the store cannot answer: the
    /// caller makes the budget [`CostlyBudget::unread`], and can spare the request's other
    /// calls the same wait. Calls without a session id share one anonymous budget, so omitting
    /// the id gains nothing.
    pub async fn charge(&self, session_id: Option<&str>, outcome: &GateOutcome) -> Result<Budget, StoreError> {
        if !Budget::applies_to(outcome) {
            return Ok(Budget::NotCharged);
        }
        let session = session_id.unwrap_or(ANONYMOUS).to_owned();
        Ok(match self.store.charge_costly(&session, self.per_session).await? {
            true => Budget::Charged,
            false => Budget::Exhausted { session, per_session: self.per_session },
        })
    }

    /// A costly call after the store already failed within this request (or the deadline cut
    /// its charge short): unreadable, without waiting on the store again.
    pub fn unread(session_id: Option<&str>, outcome: &GateOutcome, error: &StoreError) -> Budget {
        if Budget::applies_to(outcome) {
            Budget::Unreadable { session: session_id.unwrap_or(ANONYMOUS).to_owned(), kind: error.kind() }
        } else {
            Budget::NotCharged
        }
    }
}

/// The budget of a process that starts with a fresh budget and keeps none (the hook's local
/// gate): only a budget of zero refuses a costly call.
pub fn fresh_budget(per_session: u32, session_id: Option<&str>, outcome: &GateOutcome) -> Budget {
    match Budget::applies_to(outcome) {
        true if per_session == 0 => {
            Budget::Exhausted { session: session_id.unwrap_or(ANONYMOUS).to_owned(), per_session }
        }
        true => Budget::Charged,
        false => Budget::NotCharged,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::Config;
    use crate::gate::{CallContext, Gate};
    use crate::request::PendingCall;

    fn call(name: &str) -> PendingCall {
        PendingCall {
            id: "c1".to_owned(),
            name: name.to_owned(),
            input: json!({}).as_object().unwrap().clone(),
            annotations: None,
        }
    }

    #[test]
    fn a_session_spends_its_own_budget_and_the_store_stays_bounded() {
        let config = Config::from_toml_str(
            "test.toml",
            r#"
[[tools.define]]
name = "create_vm"
read_only = false
destructive = false
open_world = false
reversibility = "costly"
"#,
        )
        .unwrap();
        let gate = Gate::new(&config).unwrap();
        let context = CallContext::at(Some("/workspace"));
        let store = |max_sessions: usize| {
            let session = crate::config::SessionConfig { max_sessions, ..crate::config::SessionConfig::default() };
            Arc::new(crate::session_store::MemoryStore::new(&session))
        };
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let remembered = store(10);
        let budget = CostlyBudget::new(2, remembered.clone());
        let mut answers = Vec::new();
        for session in ["a", "a", "a", "b"] {
            let outcome = gate.evaluate(&call("create_vm"), context);
            answers.push(runtime.block_on(budget.charge(Some(session), &outcome)).unwrap());
        }
        let exhausted = Budget::Exhausted { session: "a".to_owned(), per_session: 2 };
        assert_eq!(answers, [Budget::Charged, Budget::Charged, exhausted, Budget::Charged]);
        assert_eq!(SessionStore::tracked_sessions(remembered.as_ref()), Some(2));

        let bounded = store(2);
        let small = CostlyBudget::new(1, bounded.clone());
        for session in ["x", "y", "z"] {
            let outcome = gate.evaluate(&call("create_vm"), context);
            let _ = runtime.block_on(small.charge(Some(session), &outcome));
        }
        assert_eq!(SessionStore::tracked_sessions(bounded.as_ref()), Some(2), "session state is bounded");

        assert_eq!(
            fresh_budget(0, None, &gate.evaluate(&call("create_vm"), context)),
            Budget::Exhausted { session: ANONYMOUS.to_owned(), per_session: 0 }
        );
        assert_eq!(fresh_budget(1, None, &gate.evaluate(&call("create_vm"), context)), Budget::Charged);
    }
}
