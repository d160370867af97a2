//! The reversibility ladder's session state: a budget of costly calls per session.
//!
//! Decides only whether a `costly` call still has budget; it can turn an `allow` or `classify`
//! into `ask`, never the reverse. Memory is bounded: at most `max_sessions` sessions are
//! remembered (least recently seen forgotten first) and idle ones expire after `ttl`. A session
//! that was forgotten starts with a fresh budget, which is the documented price of the bound.
//! A poisoned lock fails closed: the call goes to a person.

use std::num::NonZeroUsize;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use lru::LruCache;

use crate::decision::{GateAction, ReasonCode};
use crate::gate::{Finding, GateOutcome};
use crate::request::Reversibility;

pub struct CostlyBudget {
    per_session: u32,
    ttl: Duration,
    sessions: Mutex<LruCache<String, (u32, Instant)>>,
}

impl CostlyBudget {
    pub fn new(per_session: u32, max_sessions: usize, ttl: Duration) -> Self {
        let capacity = NonZeroUsize::new(max_sessions.max(1)).unwrap_or(NonZeroUsize::MIN);
        Self { per_session, ttl, sessions: Mutex::new(LruCache::new(capacity)) }
    }

    /// Charges a costly call to its session, or turns it into `ask` when the budget is spent.
    /// Calls without a session id share one anonymous budget, so omitting the id gains nothing.
    pub fn charge(&self, session_id: Option<&str>, outcome: &mut GateOutcome) {
        if outcome.reversibility != Some(Reversibility::Costly) || outcome.action > GateAction::Classify {
            return;
        }
        let key = session_id.unwrap_or("");
        let granted = match self.sessions.lock() {
            Ok(mut sessions) => {
                let now = Instant::now();
                let used = match sessions.get(key) {
                    Some((used, seen)) if now.duration_since(*seen) < self.ttl => *used,
                    _ => 0,
                };
                if used < self.per_session {
                    sessions.put(key.to_owned(), (used + 1, now));
                    true
                } else {
                    sessions.put(key.to_owned(), (used, now));
                    false
                }
            }
            Err(_) => false,
        };
        if !granted {
            outcome.action = GateAction::Ask;
            outcome.primary = ReasonCode::CostlyBudgetExhausted;
            outcome.reason_codes.push(ReasonCode::CostlyBudgetExhausted);
            outcome.findings.push(Finding {
                code: ReasonCode::CostlyBudgetExhausted,
                subject: key.to_owned(),
                detail: format!("this session has used its budget of {} costly calls", self.per_session),
                rule: None,
            });
        }
    }

    /// Sessions currently remembered.
    pub fn tracked_sessions(&self) -> usize {
        self.sessions.lock().map(|sessions| sessions.len()).unwrap_or(0)
    }
}
