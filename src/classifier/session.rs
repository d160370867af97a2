//! Session policy: after too many classifier denials in one session, further classified calls
//! go to a person.
//!
//! Decides only whether a session is "locked to ask": `max_consecutive_denials` classifier
//! denials in a row (default 3) or `max_total_denials` in all (default 20). A classifier allow
//! or a human decision reported back resets the streak; the total is never reset. It can turn a
//! classifier answer into `ask`, never into `allow`. Memory is bounded: at most `max_sessions`
//! sessions (least recently seen forgotten first), each forgotten after `ttl` idle. A poisoned
//! lock fails closed: the session counts as locked.

use std::num::NonZeroUsize;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use lru::LruCache;

use crate::config::SessionConfig;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counts {
    consecutive: u32,
    total: u32,
}

pub struct SessionPolicy {
    max_consecutive: u32,
    max_total: u32,
    ttl: Duration,
    sessions: Mutex<LruCache<String, (Counts, Instant)>>,
}

/// Calls without a session id share this one anonymous session, so leaving the id out gains
/// nothing.
const ANONYMOUS: &str = "";

impl SessionPolicy {
    pub fn new(config: &SessionConfig) -> Self {
        let capacity = NonZeroUsize::new(config.max_sessions.max(1)).unwrap_or(NonZeroUsize::MIN);
        Self {
            max_consecutive: config.max_consecutive_denials,
            max_total: config.max_total_denials,
            ttl: Duration::from_secs(config.ttl_secs),
            sessions: Mutex::new(LruCache::new(capacity)),
        }
    }

    fn update(&self, session: Option<&str>, change: impl FnOnce(&mut Counts)) -> Option<Counts> {
        let key = session.unwrap_or(ANONYMOUS);
        let mut sessions = self.sessions.lock().ok()?;
        let now = Instant::now();
        let mut counts = match sessions.get(key) {
            Some((counts, seen)) if now.duration_since(*seen) < self.ttl => *counts,
            _ => Counts::default(),
        };
        change(&mut counts);
        sessions.put(key.to_owned(), (counts, now));
        Some(counts)
    }

    /// Whether further classified calls in this session must go to a person.
    pub fn is_locked(&self, session: Option<&str>) -> bool {
        match self.update(session, |_| {}) {
            Some(counts) => counts.consecutive >= self.max_consecutive || counts.total >= self.max_total,
            None => true,
        }
    }

    pub fn record_classifier_denial(&self, session: Option<&str>) {
        self.update(session, |counts| {
            counts.consecutive += 1;
            counts.total += 1;
        });
    }

    pub fn record_classifier_allow(&self, session: Option<&str>) {
        self.update(session, |counts| counts.consecutive = 0);
    }

    /// A person decided a call of this session (allow or deny): the streak starts over.
    pub fn record_human_decision(&self, session: Option<&str>) {
        self.update(session, |counts| counts.consecutive = 0);
    }

    pub fn tracked_sessions(&self) -> usize {
        self.sessions.lock().map(|sessions| sessions.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(max_sessions: usize, ttl_secs: u64) -> SessionPolicy {
        SessionPolicy::new(&SessionConfig { max_sessions, ttl_secs, ..SessionConfig::default() })
    }

    #[test]
    fn three_in_a_row_locks_and_a_human_resets() {
        let policy = policy(10, 3600);
        for _ in 0..2 {
            policy.record_classifier_denial(Some("s"));
        }
        assert!(!policy.is_locked(Some("s")));
        policy.record_classifier_denial(Some("s"));
        assert!(policy.is_locked(Some("s")));
        assert!(!policy.is_locked(Some("other")));
        policy.record_human_decision(Some("s"));
        assert!(!policy.is_locked(Some("s")));
    }

    #[test]
    fn an_allow_breaks_the_streak_but_twenty_in_all_locks() {
        let policy = policy(10, 3600);
        for _ in 0..10 {
            policy.record_classifier_denial(Some("s"));
            policy.record_classifier_denial(Some("s"));
            policy.record_classifier_allow(Some("s"));
        }
        assert!(policy.is_locked(Some("s")), "20 denials in all");
        policy.record_human_decision(Some("s"));
        assert!(policy.is_locked(Some("s")), "the total is never reset");
    }

    #[test]
    fn memory_is_bounded_and_idle_sessions_expire() {
        let policy = policy(3, 3600);
        for index in 0..10 {
            policy.record_classifier_denial(Some(&format!("s{index}")));
        }
        assert_eq!(policy.tracked_sessions(), 3);
        let expiring = SessionPolicy::new(&SessionConfig { ttl_secs: 0, ..SessionConfig::default() });
        for _ in 0..3 {
            expiring.record_classifier_denial(Some("s"));
        }
        assert!(!expiring.is_locked(Some("s")), "a zero TTL forgets at once");
    }
}
