//! The in-memory session store: one process's state, as permit kept it before Redis.
//!
//! Memory is bounded: the denial counts and the costly budgets each remember at most
//! `session.max_sessions` sessions (the least recently seen forgotten first), and a session
//! idle for `session.ttl_secs` is forgotten. A forgotten session starts over, which is the
//! documented price of the bound. A poisoned lock is an error, which its callers fail closed.

use std::num::NonZeroUsize;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use lru::LruCache;

use super::{DenialCounts, SessionStore, StoreError};
use crate::config::SessionConfig;

type Sessions<T> = Mutex<LruCache<String, (T, Instant)>>;

pub struct MemoryStore {
    ttl: Duration,
    denials: Sessions<DenialCounts>,
    costly: Sessions<u32>,
}

impl MemoryStore {
    pub fn new(config: &SessionConfig) -> Self {
        let capacity = NonZeroUsize::new(config.max_sessions.max(1)).unwrap_or(NonZeroUsize::MIN);
        Self {
            ttl: Duration::from_secs(config.ttl_secs),
            denials: Mutex::new(LruCache::new(capacity)),
            costly: Mutex::new(LruCache::new(capacity)),
        }
    }

    /// Reads the session's entry (a default one when unseen or expired), applies `change`,
    /// stores the result as seen now and returns what `change` returned.
    fn update<T: Copy + Default, R>(
        &self,
        sessions: &Sessions<T>,
        session: &str,
        change: impl FnOnce(&mut T) -> R,
    ) -> Result<R, StoreError> {
        let mut sessions = sessions.lock().map_err(|_| StoreError::Poisoned)?;
        let now = Instant::now();
        let mut value = match sessions.get(session) {
            Some((value, seen)) if now.duration_since(*seen) < self.ttl => *value,
            _ => T::default(),
        };
        let result = change(&mut value);
        sessions.put(session.to_owned(), (value, now));
        Ok(result)
    }
}

impl SessionStore for MemoryStore {
    fn kind(&self) -> &'static str {
        "memory"
    }

    fn denial_counts<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<DenialCounts, StoreError>> {
        Box::pin(std::future::ready(self.update(&self.denials, session, |counts| *counts)))
    }

    fn record_denial<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<DenialCounts, StoreError>> {
        Box::pin(std::future::ready(self.update(&self.denials, session, |counts| {
            counts.consecutive = counts.consecutive.saturating_add(1);
            counts.total = counts.total.saturating_add(1);
            *counts
        })))
    }

    fn reset_streak<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(std::future::ready(self.update(&self.denials, session, |counts| counts.consecutive = 0)))
    }

    fn charge_costly<'a>(&'a self, session: &'a str, budget: u32) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(std::future::ready(self.update(&self.costly, session, |used| {
            let granted = *used < budget;
            if granted {
                *used += 1;
            }
            granted
        })))
    }

    fn tracked_sessions(&self) -> Option<usize> {
        let denials = self.denials.lock().map(|sessions| sessions.len()).unwrap_or(0);
        let costly = self.costly.lock().map(|sessions| sessions.len()).unwrap_or(0);
        Some(denials.max(costly))
    }

    fn ready(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(std::future::ready(Ok(())))
    }
}
