//! Connections: accepts TCP connections under a cap and serves HTTP/1.1 on each with hyper, so
//! slow, idle or abandoned clients cannot hold the service (issue 14: 9,000 half-sent headers
//! were held forever, RSS rose to 592 MB and the file limit was hit).
//!
//! - At most `server.max_connections` are open. At the cap, a new connection takes the place
//!   of the oldest one that is not serving a request (still sending its headers, or idle
//!   between keep-alive requests), which is closed; when every open connection is serving a
//!   request, the new one waits for a free place. So clients that never finish their headers
//!   cannot lock out a client that sends a whole request, and a request once started is never
//!   cut off for a newcomer. A connection is closed this way only once it is
//!   [`EVICTABLE_AFTER`] old, so new connections arriving together do not close each other.
//! - A client must send each request's headers within `server.header_read_timeout_ms`, counted
//!   from the connection opening or from the end of the previous response, so the same limit
//!   closes idle keep-alive connections. Headers are capped at [`MAX_HEADER_BYTES`] (431).
//! - On shutdown, accepting stops; a connection with a request in flight finishes it (keep-alive
//!   off, bounded by the server's grace period) and one without is closed after at most
//!   [`SHUTDOWN_IDLE_WAIT`], so a client that never finishes its headers cannot hold shutdown.
//!
//! HTTP/1.1 only: agent hosts speak it, and it keeps every limit above in force (an HTTP/2
//! preface would need its own timeouts).
//!
//! On failure: an accept error (such as running out of file descriptors) is logged and retried
//! after [`ACCEPT_ERROR_PAUSE`], never ending the service; an error on a connection ends only
//! that connection.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper::service::Service as _;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;

use super::metrics::Metrics;

/// The most bytes of request line and headers hyper reads before answering 431. Real requests
/// send well under 2 KiB; 64 KiB bounds what a connection buffers before its request starts.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;
/// How long, after shutdown starts, a connection with no request in flight may take to finish
/// writing a response already produced; one still in its headers is then closed.
pub const SHUTDOWN_IDLE_WAIT: Duration = Duration::from_secs(1);
/// Pause after a failed accept: the usual cause is the file-descriptor limit, which a retry at
/// once would only hit again in a busy loop.
pub const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);
/// At the cap, how often a waiting connection looks again for one to take the place of (the
/// one chosen may have started a request meanwhile and stayed, or none was old enough).
const EVICTION_RETRY: Duration = Duration::from_millis(100);
/// A connection younger than this is never closed to make room: a client that has just
/// connected has its request on the way, and a burst of new connections at the cap must not
/// close each other before their headers are read. Real headers arrive in milliseconds.
const EVICTABLE_AFTER: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_connections: usize,
    pub header_read_timeout: Duration,
}

/// What the accept loop knows of an open connection.
struct Tracked {
    opened: tokio::time::Instant,
    /// Requests whose headers are in and whose response is not yet ready.
    in_flight: Arc<AtomicUsize>,
    /// Told to close to make room for a new connection.
    evict: Arc<Notify>,
    /// Already chosen to make room (so it is not chosen twice).
    evicting: Arc<AtomicBool>,
}

/// Open connections, oldest first (ids only grow).
#[derive(Default)]
struct Registry {
    next_id: u64,
    open: BTreeMap<u64, Tracked>,
}

type SharedRegistry = Arc<Mutex<Registry>>;

/// Tells the oldest connection that is not serving a request (and is older than
/// [`EVICTABLE_AFTER`]) to close; false if there is none.
fn evict_oldest_idle(registry: &SharedRegistry) -> bool {
    let Ok(registry) = registry.lock() else { return false };
    let now = tokio::time::Instant::now();
    for tracked in registry.open.values() {
        // Oldest first: past the first young one, all are young.
        if now.duration_since(tracked.opened) < EVICTABLE_AFTER {
            return false;
        }
        if tracked.in_flight.load(Ordering::SeqCst) == 0 && !tracked.evicting.swap(true, Ordering::SeqCst) {
            tracked.evict.notify_one();
            return true;
        }
    }
    false
}

/// Removes a connection from the registry however it ends (aborted tasks included), and
/// decrements the open-connections gauge.
struct Registration {
    id: u64,
    registry: SharedRegistry,
    metrics: Arc<Metrics>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Ok(mut registry) = self.registry.lock() {
            registry.open.remove(&self.id);
        }
        self.metrics.connection_closed();
    }
}

/// Accepts connections until the future is dropped, serving each on its own task in
/// `connections` (reaped as they end). `stop` turning `true` starts each connection's shutdown.
pub async fn accept(
    listener: &TcpListener,
    router: &Router,
    metrics: &Arc<Metrics>,
    limits: Limits,
    stop: &watch::Receiver<bool>,
    connections: &mut JoinSet<()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let registry = SharedRegistry::default();
    loop {
        let stream = loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => break stream,
                    Err(error) => {
                        tracing::warn!("cannot accept a connection: {error}");
                        tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    }
                },
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        };
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                evict_oldest_idle(&registry);
                loop {
                    tokio::select! {
                        slot = slots.clone().acquire_owned() => match slot {
                            Ok(slot) => break slot,
                            // The semaphore is never closed.
                            Err(_) => return,
                        },
                        Some(_) = connections.join_next(), if !connections.is_empty() => {}
                        () = tokio::time::sleep(EVICTION_RETRY) => {
                            evict_oldest_idle(&registry);
                        }
                    }
                }
            }
        };
        // Responses are small and written whole: no reason to wait for more bytes to send.
        let _ = stream.set_nodelay(true);
        let tracked = Tracked {
            opened: tokio::time::Instant::now(),
            in_flight: Arc::new(AtomicUsize::new(0)),
            evict: Arc::new(Notify::new()),
            evicting: Arc::new(AtomicBool::new(false)),
        };
        let connection = Connection {
            in_flight: tracked.in_flight.clone(),
            evict: tracked.evict.clone(),
            evicting: tracked.evicting.clone(),
        };
        let id = match registry.lock() {
            Ok(mut registry) => {
                let id = registry.next_id;
                registry.next_id += 1;
                registry.open.insert(id, tracked);
                id
            }
            // A poisoned registry only means no connection can be evicted; serving goes on.
            Err(_) => u64::MAX,
        };
        metrics.connection_opened();
        let registration = Registration { id, registry: registry.clone(), metrics: metrics.clone() };
        connections.spawn(connection.serve(stream, router.clone(), limits, stop.clone(), (slot, registration)));
    }
}

/// Counts a request as in flight from its headers until its response is ready.
struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    fn enter(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        InFlight(count.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One connection's side of [`Tracked`].
struct Connection {
    in_flight: Arc<AtomicUsize>,
    evict: Arc<Notify>,
    evicting: Arc<AtomicBool>,
}

impl Connection {
    /// Serves the connection until it ends, is evicted, or shutdown closes it. `held` (the
    /// connection's place under the cap, its registration) is released when this returns.
    async fn serve(
        self,
        stream: TcpStream,
        router: Router,
        limits: Limits,
        mut stop: watch::Receiver<bool>,
        held: (OwnedSemaphorePermit, Registration),
    ) {
        let metrics = held.1.metrics.clone();
        let service = {
            let in_flight = self.in_flight.clone();
            let router = TowerToHyperService::new(router);
            hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
                let guard = InFlight::enter(&in_flight);
                let response = router.call(request);
                async move {
                    let response = response.await;
                    drop(guard);
                    response
                }
            })
        };
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_read_timeout)
            .max_header_size(MAX_HEADER_BYTES);
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        tokio::pin!(connection);
        let result = loop {
            tokio::select! {
                result = connection.as_mut() => break result,
                () = self.evict.notified() => {
                    if self.in_flight.load(Ordering::SeqCst) == 0 {
                        // Dropping the connection closes it: room for a newer one.
                        metrics.connection_evicted();
                        return;
                    }
                    // A request started since this connection was chosen: it is served, and
                    // the accept loop looks for room elsewhere.
                    self.evicting.store(false, Ordering::SeqCst);
                }
                () = async {
                    // The guard `wait_for` returns is not `Send`: dropped before this runs.
                    let _ = stop.wait_for(|stopping| *stopping).await;
                } => {
                    // Keep-alive off: an idle connection closes now, a busy one after its
                    // response.
                    connection.as_mut().graceful_shutdown();
                    if self.in_flight.load(Ordering::SeqCst) > 0 {
                        break connection.as_mut().await;
                    }
                    // Hyper would wait out the header timeout for a client stuck in its headers.
                    match tokio::time::timeout(SHUTDOWN_IDLE_WAIT, connection.as_mut()).await {
                        Ok(result) => break result,
                        Err(_) => return,
                    }
                }
            }
        };
        if let Err(error) = result {
            if error.is_timeout() {
                metrics.connection_timed_out();
            } else {
                tracing::debug!("connection ended with an error: {error}");
            }
        }
    }
}
