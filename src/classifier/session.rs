//! Session policy: after too many classifier denials in one session, further classified calls
//! go to a person.
//!
//! Decides only whether a session is "locked to ask": `max_consecutive_denials` classifier
//! denials in a row (default 3) or `max_total_denials` in all (default 20). A classifier allow
//! or a human decision reported back resets the streak; the total is never reset. It can turn a
//! classifier answer into `ask`, never into `allow`. The counts live in the session store
//! ([`crate::session_store`]): this process's memory, or Redis shared by every replica.
//!
//! Fails closed: when the store cannot answer, [`SessionPolicy::is_locked`] returns the error,
//! and the pipeline makes the classified calls `ask` (`session_store_unavailable`). A denial or
//! reset that cannot be recorded is logged and counted by the store's metrics; the call it
//! followed keeps its answer.

use std::sync::Arc;

use crate::config::SessionConfig;
use crate::session_store::{ANONYMOUS, SessionStore, StoreError};

pub struct SessionPolicy {
    max_consecutive: u32,
    max_total: u32,
    store: Arc<dyn SessionStore>,
}

impl SessionPolicy {
    pub fn new(config: &SessionConfig, store: Arc<dyn SessionStore>) -> Self {
        Self { max_consecutive: config.max_consecutive_denials, max_total: config.max_total_denials, store }
    }

    /// Whether further classified calls in this session must go to a person; an error when the
    /// store cannot tell (the caller fails closed).
    pub async fn is_locked(&self, session: Option<&str>) -> Result<bool, StoreError> {
        let counts = self.store.denial_counts(session.unwrap_or(ANONYMOUS)).await?;
        Ok(counts.consecutive >= self.max_consecutive || counts.total >= self.max_total)
    }

    pub async fn record_classifier_denial(&self, session: Option<&str>) -> Result<(), StoreError> {
        self.store.record_denial(session.unwrap_or(ANONYMOUS)).await.map(|_| ())
    }

    pub async fn record_classifier_allow(&self, session: Option<&str>) -> Result<(), StoreError> {
        self.store.reset_streak(session.unwrap_or(ANONYMOUS)).await
    }

    /// A person decided a call of this session (allow or deny): the streak starts over.
    pub async fn record_human_decision(&self, session: Option<&str>) -> Result<(), StoreError> {
        self.store.reset_streak(session.unwrap_or(ANONYMOUS)).await
    }

    /// Sessions this process remembers (memory store); `None` with Redis.
    pub fn tracked_sessions(&self) -> Option<usize> {
        self.store.tracked_sessions()
    }

    /// The store behind the policy (shared with the costly-call budget).
    pub fn store(&self) -> &Arc<dyn SessionStore> {
        &self.store
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session_store::MemoryStore;

    fn policy(max_sessions: usize, ttl_secs: u64) -> SessionPolicy {
        let config = SessionConfig { max_sessions, ttl_secs, ..SessionConfig::default() };
        SessionPolicy::new(&config, Arc::new(MemoryStore::new(&config)))
    }

    #[tokio::test]
    async fn three_in_a_row_locks_and_a_human_resets() {
        let policy = policy(10, 3600);
        for _ in 0..2 {
            policy.record_classifier_denial(Some("s")).await.unwrap();
        }
        assert!(!policy.is_locked(Some("s")).await.unwrap());
        policy.record_classifier_denial(Some("s")).await.unwrap();
        assert!(policy.is_locked(Some("s")).await.unwrap());
        assert!(!policy.is_locked(Some("other")).await.unwrap());
        policy.record_human_decision(Some("s")).await.unwrap();
        assert!(!policy.is_locked(Some("s")).await.unwrap());
    }

    #[tokio::test]
    async fn an_allow_breaks_the_streak_but_twenty_in_all_locks() {
        let policy = policy(10, 3600);
        for _ in 0..10 {
            policy.record_classifier_denial(Some("s")).await.unwrap();
            policy.record_classifier_denial(Some("s")).await.unwrap();
            policy.record_classifier_allow(Some("s")).await.unwrap();
        }
        assert!(policy.is_locked(Some("s")).await.unwrap(), "20 denials in all");
        policy.record_human_decision(Some("s")).await.unwrap();
        assert!(policy.is_locked(Some("s")).await.unwrap(), "the total is never reset");
    }

    #[tokio::test]
    async fn memory_is_bounded_and_idle_sessions_expire() {
        let policy = policy(3, 3600);
        for index in 0..10 {
            policy.record_classifier_denial(Some(&format!("s{index}"))).await.unwrap();
        }
        assert_eq!(policy.tracked_sessions(), Some(3));
        let expiring = policy_with_ttl_zero();
        for _ in 0..3 {
            expiring.record_classifier_denial(Some("s")).await.unwrap();
        }
        assert!(!expiring.is_locked(Some("s")).await.unwrap(), "a zero TTL forgets at once");
    }

    fn policy_with_ttl_zero() -> SessionPolicy {
        let config = SessionConfig { ttl_secs: 0, ..SessionConfig::default() };
        SessionPolicy::new(&config, Arc::new(MemoryStore::new(&config)))
    }
}
