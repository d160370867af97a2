//! The Redis session store: one policy for every replica that shares a Redis.
//!
//! **Client.** The `redis` crate (redis-rs), with only `tokio-comp`, `connection-manager` and
//! `script` enabled (no cluster, TLS, JSON or pools): it is the maintained, widely used client,
//! its `ConnectionManager` is one multiplexed connection that reconnects by itself after Redis
//! restarts, and `Script` loads a Lua script once and runs it by its SHA (reloading it when a
//! restarted Redis has forgotten it). `fred` does the same but pulls in a larger tree for
//! features (pools, cluster, sentinel, tracing) permit does not use, and release builds are
//! slow enough already.
//!
//! **Keys.** `{key_prefix}denials:{session}` (a hash: `streak`, `total`) and
//! `{key_prefix}costly:{session}` (the costly calls spent). Each update is one Lua script, so it
//! is atomic across replicas: the streak and the total grow together, a reset cannot lose a
//! concurrent denial's total, and a costly call is charged only while headroom remains (two
//! replicas can never both spend the last one). Every script refreshes the key's expiry to
//! `session.ttl_secs`, so an idle session is forgotten and the key count stays bounded by the
//! sessions active within one TTL.
//!
//! **Failure.** Every call is bounded by `session.timeout_ms`, waiting for a (re)connection
//! included; each connection attempt by `session.connect_timeout_ms`. A timeout, a refused or
//! dropped connection, or an error from Redis is a [`StoreError`]: the caller makes the call
//! that needed the state `ask` (`session_store_unavailable`), never `allow`. Nothing is
//! retried inside the call: the connection manager reconnects in the background, and the next
//! call uses the new connection. The URL (it may carry a password) is never logged.

use std::time::Duration;

use futures_util::future::BoxFuture;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{FromRedisValue, RedisError, Script};
use tokio::sync::OnceCell;

use super::{DenialCounts, SessionStore, StoreError};
use crate::config::SessionConfig;

/// Reads a session's counts; touching the key keeps an active session alive.
const DENIAL_COUNTS: &str = r"
local counts = redis.call('HMGET', KEYS[1], 'streak', 'total')
if counts[1] or counts[2] then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return {tonumber(counts[1]) or 0, tonumber(counts[2]) or 0}
";

/// One more denial: streak and total together.
const RECORD_DENIAL: &str = r"
local streak = redis.call('HINCRBY', KEYS[1], 'streak', 1)
local total = redis.call('HINCRBY', KEYS[1], 'total', 1)
redis.call('EXPIRE', KEYS[1], ARGV[1])
return {streak, total}
";

/// The streak starts over; the total stays.
const RESET_STREAK: &str = r"
redis.call('HSET', KEYS[1], 'streak', 0)
redis.call('EXPIRE', KEYS[1], ARGV[1])
return 1
";

/// Spends one costly call if the budget (ARGV[1]) has headroom: check and spend in one step.
const CHARGE_COSTLY: &str = r"
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if used < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], used + 1, 'EX', ARGV[2])
  return 1
end
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 0
";

#[derive(Debug, thiserror::Error)]
pub enum RedisStoreError {
    #[error("`session.redis_url` is not a Redis URL permit can use: {0}")]
    Url(String),
}

pub struct RedisStore {
    client: redis::Client,
    /// Made on first use, inside the runtime (the manager spawns its reconnect task there).
    manager: OnceCell<ConnectionManager>,
    denials_prefix: String,
    costly_prefix: String,
    ttl_secs: u64,
    timeout: Duration,
    connect_timeout: Duration,
    denial_counts: Script,
    record_denial: Script,
    reset_streak: Script,
    charge_costly: Script,
}

impl RedisStore {
    /// Parses the URL; connects nothing until the first call.
    pub fn new(config: &SessionConfig) -> Result<Self, RedisStoreError> {
        let url = config.redis_url.as_deref().unwrap_or_default();
        // The crate's message names what is wrong, never the URL's password.
        let client = redis::Client::open(url).map_err(|error| RedisStoreError::Url(error.category().to_owned()))?;
        Ok(Self {
            client,
            manager: OnceCell::new(),
            denials_prefix: format!("{}denials:", config.key_prefix),
            costly_prefix: format!("{}costly:", config.key_prefix),
            ttl_secs: config.ttl_secs,
            timeout: Duration::from_millis(config.timeout_ms),
            connect_timeout: Duration::from_millis(config.connect_timeout_ms),
            denial_counts: Script::new(DENIAL_COUNTS),
            record_denial: Script::new(RECORD_DENIAL),
            reset_streak: Script::new(RESET_STREAK),
            charge_costly: Script::new(CHARGE_COSTLY),
        })
    }

    async fn manager(&self) -> Result<ConnectionManager, RedisError> {
        let manager = self
            .manager
            .get_or_try_init(|| async {
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(self.connect_timeout))
                    .set_response_timeout(Some(self.timeout))
                    // One quick retry per reconnection: the next call starts another, so a
                    // Redis that comes back is picked up within a call or two, and a long
                    // backoff never holds calls past their timeout.
                    .set_number_of_retries(1)
                    .set_min_delay(Duration::from_millis(50))
                    .set_max_delay(Duration::from_millis(500));
                ConnectionManager::new_lazy_with_config(self.client.clone(), config)
            })
            .await?;
        Ok(manager.clone())
    }

    /// Runs `script` on `key` with `args`, bounded by `session.timeout_ms` in all.
    async fn run<T: FromRedisValue>(&self, script: &Script, key: String, args: &[u64]) -> Result<T, StoreError> {
        let work = async {
            let mut connection = self.manager().await?;
            let mut invocation = script.prepare_invoke();
            invocation.key(key);
            for arg in args {
                invocation.arg(*arg);
            }
            invocation.invoke_async::<T>(&mut connection).await
        };
        match tokio::time::timeout(self.timeout, work).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(store_error(&error, self.timeout)),
            Err(_) => Err(StoreError::Timeout(millis(self.timeout))),
        }
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn store_error(error: &RedisError, timeout: Duration) -> StoreError {
    if error.is_timeout() {
        StoreError::Timeout(millis(timeout))
    } else if error.is_io_error() || error.is_connection_refusal() || error.is_connection_dropped() {
        StoreError::Unreachable(error.category().to_owned())
    } else {
        StoreError::Refused(match error.detail() {
            Some(detail) => format!("{}: {detail}", error.category()),
            None => error.category().to_owned(),
        })
    }
}

fn counts(values: &[i64]) -> DenialCounts {
    let count = |index: usize| values.get(index).map_or(0, |value| u32::try_from(*value).unwrap_or(u32::MAX));
    DenialCounts { consecutive: count(0), total: count(1) }
}

impl SessionStore for RedisStore {
    fn kind(&self) -> &'static str {
        "redis"
    }

    fn denial_counts<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<DenialCounts, StoreError>> {
        Box::pin(async move {
            let key = format!("{}{session}", self.denials_prefix);
            let values: Vec<i64> = self.run(&self.denial_counts, key, &[self.ttl_secs]).await?;
            Ok(counts(&values))
        })
    }

    fn record_denial<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<DenialCounts, StoreError>> {
        Box::pin(async move {
            let key = format!("{}{session}", self.denials_prefix);
            let values: Vec<i64> = self.run(&self.record_denial, key, &[self.ttl_secs]).await?;
            Ok(counts(&values))
        })
    }

    fn reset_streak<'a>(&'a self, session: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let key = format!("{}{session}", self.denials_prefix);
            let _: i64 = self.run(&self.reset_streak, key, &[self.ttl_secs]).await?;
            Ok(())
        })
    }

    fn charge_costly<'a>(&'a self, session: &'a str, budget: u32) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let key = format!("{}{session}", self.costly_prefix);
            let granted: i64 = self.run(&self.charge_costly, key, &[u64::from(budget), self.ttl_secs]).await?;
            Ok(granted == 1)
        })
    }

    /// Counting keys would mean scanning Redis; `/metrics` leaves that to Redis's own tools.
    fn tracked_sessions(&self) -> Option<usize> {
        None
    }

    fn ready(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            let work = async {
                let mut connection = self.manager().await?;
                redis::cmd("PING").query_async::<String>(&mut connection).await
            };
            match tokio::time::timeout(self.timeout, work).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(error)) => Err(store_error(&error, self.timeout)),
                Err(_) => Err(StoreError::Timeout(millis(self.timeout))),
            }
        })
    }
}
