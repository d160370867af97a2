//! Session state: the denial streak and total of the session policy, and the costly-call
//! budget of the reversibility ladder, behind one trait with two stores.
//!
//! - [`MemoryStore`] (`session.store = "memory"`, the default) keeps the state in this
//!   process: one replica, bounded by `session.max_sessions` and `session.ttl_secs`.
//! - [`RedisStore`] (`"redis"`) keeps it in Redis, so every replica behind a load balancer
//!   enforces one policy. Every update is one Lua script, so replicas never race.
//!
//! It decides nothing: it counts. What a failure means is decided by its callers, and they fail
//! closed: a call whose decision needs the state (a classified or a costly call) becomes `ask`
//! with `session_store_unavailable` when the store cannot answer; nothing is ever `allow`
//! because the state could not be read. [`Metered`] counts every operation's latency and errors
//! for `/metrics`.

pub mod memory;
pub mod redis;

use std::sync::Arc;
use std::time::Instant;

use futures_util::future::BoxFuture;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use crate::config::{SessionConfig, SessionStoreKind};
pub use memory::MemoryStore;
pub use redis::{RedisStore, RedisStoreError};

/// Calls without a session id share this one anonymous session, so leaving the id out gains
/// nothing.
pub const ANONYMOUS: &str = "";

/// Why the store could not answer. Every variant fails the call that needed it closed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("the session store did not answer within {0} ms")]
    Timeout(u64),
    #[error("the session store is unreachable: {0}")]
    Unreachable(String),
    #[error("the session store refused the operation: {0}")]
    Refused(String),
    #[error("the session store's memory lock is poisoned")]
    Poisoned,
}

impl StoreError {
    /// The `kind` label of `session_store_errors_total`.
    pub fn kind(&self) -> &'static str {
        match self {
            StoreError::Timeout(_) => "timeout",
            StoreError::Unreachable(_) => "unreachable",
            StoreError::Refused(_) => "refused",
            StoreError::Poisoned => "poisoned",
        }
    }
}

/// A session's classifier denials: in a row, and in all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DenialCounts {
    pub consecutive: u32,
    pub total: u32,
}

/// Where session state lives. Every method touches the session, so an active session is never
/// forgotten; an idle one is forgotten after `session.ttl_secs`.
pub trait SessionStore: Send + Sync {
    /// `memory` or `redis`, for `/readyz` and logs.
    fn kind(&self) -> &'static str;
    /// The session's denial counts (zero for a session never seen or forgotten).
    fn denial_counts<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<DenialCounts, StoreError>>;
    /// One more classifier denial: the streak and the total both grow, atomically.
    fn record_denial<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<DenialCounts, StoreError>>;
    /// The streak starts over (a classifier allow, or a person's decision); the total stays.
    fn reset_streak<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<(), StoreError>>;
    /// Spends one of the session's `budget` costly calls if one is left: `true` when spent,
    /// `false` when the budget was already used up. Check and spend are one atomic step.
    fn charge_costly<'a>(&'a self, session: &'a str, budget: u32) -> BoxFuture<'a, Result<bool, StoreError>>;
    /// Sessions remembered by this process, when the store can tell cheaply (memory only).
    fn tracked_sessions(&self) -> Option<usize>;
    /// Whether the store answers now, for `/readyz`.
    fn ready(&self) -> BoxFuture<'_, Result<(), StoreError>>;
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    operation: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    operation: &'static str,
    kind: &'static str,
}

fn store_histogram() -> Histogram {
    // 20 µs (a loopback Redis round trip is about 50 µs) … about 0.65 s, past the longest
    // sensible `session.timeout_ms`.
    Histogram::new(exponential_buckets(0.000_02, 2.0, 16))
}

/// Latency and errors of session store operations, registered by the service's metrics.
#[derive(Clone)]
pub struct StoreMetrics {
    latency: Family<OperationLabels, Histogram, fn() -> Histogram>,
    errors: Family<ErrorLabels, Counter>,
}

impl Default for StoreMetrics {
    fn default() -> Self {
        Self { latency: Family::new_with_constructor(store_histogram), errors: Family::default() }
    }
}

impl StoreMetrics {
    /// Registers `session_store_latency_seconds{operation}` and
    /// `session_store_errors_total{operation,kind}`.
    pub fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register(
            "session_store_latency_seconds",
            "Time each session store operation took, failed ones included",
            self.latency.clone(),
        );
        registry.register(
            "session_store_errors",
            "Session store operations that failed (the call that needed one was answered ask), by kind",
            self.errors.clone(),
        );
    }

    fn observe<T>(&self, operation: &'static str, started: Instant, result: &Result<T, StoreError>) {
        self.latency.get_or_create(&OperationLabels { operation }).observe(started.elapsed().as_secs_f64());
        if let Err(error) = result {
            self.errors.get_or_create(&ErrorLabels { operation, kind: error.kind() }).inc();
            tracing::warn!(operation, "session store: {error}");
        }
    }
}

/// A store whose every operation is timed and whose failures are counted and logged.
pub struct Metered {
    inner: Box<dyn SessionStore>,
    metrics: StoreMetrics,
}

impl Metered {
    pub fn new(inner: Box<dyn SessionStore>, metrics: StoreMetrics) -> Self {
        Self { inner, metrics }
    }

    async fn timed<T>(
        &self,
        operation: &'static str,
        work: BoxFuture<'_, Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let started = Instant::now();
        let result = work.await;
        self.metrics.observe(operation, started, &result);
        result
    }
}

impl SessionStore for Metered {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }
    fn denial_counts<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<DenialCounts, StoreError>> {
        Box::pin(self.timed("denial_counts", self.inner.denial_counts(session)))
    }
    fn record_denial<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<DenialCounts, StoreError>> {
        Box::pin(self.timed("record_denial", self.inner.record_denial(session)))
    }
    fn reset_streak<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.timed("reset_streak", self.inner.reset_streak(session)))
    }
    fn charge_costly<'a>(&'a self, session: &'a str, budget: u32) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(self.timed("charge_costly", self.inner.charge_costly(session, budget)))
    }
    fn tracked_sessions(&self) -> Option<usize> {
        self.inner.tracked_sessions()
    }
    fn ready(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.timed("ready", self.inner.ready()))
    }
}

/// The store `[session]` configures, metered. Building it never connects: a Redis store
/// connects on first use and reconnects by itself, so a Redis that is down at start-up makes
/// calls `ask` (and `/readyz` 503) rather than stopping the service.
pub fn build(config: &SessionConfig) -> Result<(Arc<dyn SessionStore>, StoreMetrics), RedisStoreError> {
    let inner: Box<dyn SessionStore> = match config.store {
        SessionStoreKind::Memory => Box::new(MemoryStore::new(config)),
        SessionStoreKind::Redis => Box::new(RedisStore::new(config)?),
    };
    let metrics = StoreMetrics::default();
    Ok((Arc::new(Metered::new(inner, metrics.clone())), metrics))
}
