//! The audit log: one JSON line per decision (and per human feedback), appended by a dedicated
//! writer thread. Its promise is **no decision without its record**.
//!
//! - **No line is dropped on the way.** Handlers hand lines over a bounded channel and wait when
//!   it is full (backpressure instead of dropping), and a decision's lines are handed over
//!   before its response is sent.
//! - **Two durability modes** (`server.audit_sync`). `interval` (the default): the response goes
//!   out once the lines are queued (at most 256 requests' lines wait); the writer writes them at
//!   once and fsyncs every `flush_interval`. A crash loses the lines still queued, and an `allow`
//!   answered just before a write fails has no line. `decision`: [`AuditLog::record`] returns
//!   only once the lines are written and fsynced (`sync_data`), so no `allow` is answered
//!   without its line on disk. Lines that wait together are group committed: one write and one
//!   fsync release all of them.
//! - **Never a partial line.** The lines waiting at one moment go to the file in one write loop
//!   over whole lines. When a write fails or falls short, the file is cut back with `set_len` to
//!   the end of the last request whose lines are all in it, so a request's lines are in the file
//!   together or not at all. Cutting is chosen over finishing the torn line with a newline: a
//!   padded fragment is a corrupt record every reader would have to skip, while a cut leaves
//!   only whole records, and the lost ones are counted. If the cut itself fails, nothing more is
//!   appended until a retried cut succeeds. A tail torn by a crash or power loss is cut back to
//!   the last newline when the file is opened.
//! - **Counted.** [`AuditLog::lines_written`] counts lines that reached the file (fsynced first
//!   in `decision` mode), never lines merely queued; [`AuditLog::write_errors`] counts failed
//!   file operations; [`AuditLog::lines_dropped`] counts lines that could not be written.
//! - **Rotated by size.** Once the file reaches `rotate_bytes` after a write, it becomes
//!   `NAME.1` (`NAME.1` becomes `NAME.2`, …, keeping [`KEPT_ROTATIONS`]).
//! - **No secrets.** Lines hold the decision records and a digest of the request body, never
//!   the body itself, bearer tokens or API keys.
//!
//! On failure: [`AuditLog::open`] fails at startup if the file cannot be opened, so the service
//! never runs without the log it was configured with. Afterwards a failed write, cut, fsync or
//! reopen makes the log unhealthy ([`AuditLog::is_healthy`] is false; `/readyz` answers 503)
//! until a write succeeds again. The writer retries with the next lines and, when none come,
//! every `flush_interval`: it reopens the configured path (so a freed disk or a replaced file is
//! picked up) and first writes an `audit_gap` line that says since when, why, and how many lines
//! were lost. While the log is unhealthy, and whenever a `decision`-mode write fails, the server
//! answers `ask` (reason code `audit_unavailable`) instead of `allow` (see
//! [`withhold_allow`]); it never turns anything into `allow`.
//!
//! The writer is an OS thread with a `std::fs::File` rather than a task with `tokio::fs`:
//! `tokio::fs::File` buffers writes and reports their errors on a later call, so it could not
//! say how many bytes of which line reached the file, and an fsync blocks a thread either way.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::{mpsc, oneshot};

use crate::config::AuditSync;
use crate::decision::{Decision, ReasonCode};
use crate::request::{CallDecision, Stage};

/// Requests whose lines may wait for the writer before handlers wait. In `interval` mode this
/// bounds what a crash loses: with 8,192, kill -9 under load lost up to 1,587 answered
/// decisions (on two busy cores the writer thread falls behind the handlers for a while); with
/// 256, 0–2 (`scripts/bench-audit-kill.sh`).
const CHANNEL_CAPACITY: usize = 256;
/// Rotated files kept besides the live one.
pub const KEPT_ROTATIONS: u32 = 5;
/// The most bytes one write carries: it bounds the memory of a batch and how far past
/// `rotate_bytes` a file can grow. A decision line is 1–3 KiB, so this is hundreds of them.
const MAX_BATCH_BYTES: usize = 1024 * 1024;
/// The longest torn tail cut at open. Lines are a few KiB; a file whose last MiB holds no line
/// break is not an audit log, so permit refuses it rather than cut into it.
const MAX_TORN_TAIL_BYTES: u64 = 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("cannot open the audit log `{path}`: {source}")]
    Open { path: PathBuf, source: std::io::Error },
    #[error("cannot start the audit log writer: {0}")]
    Start(std::io::Error),
    #[error("the audit log writer has stopped")]
    Stopped,
    #[error("the audit log cannot be written")]
    Unwritten,
}

/// No decision without its record: an `allow` whose line cannot be written becomes `ask`
/// (stage `error`, reason code `audit_unavailable`). `ask` and `deny` are kept as they are:
/// they let nothing run, so answering them without a record still fails closed.
pub fn withhold_allow(decision: &mut CallDecision) {
    if decision.decision == Decision::Allow {
        decision.decision = Decision::Ask;
        decision.stage = Stage::Error;
        decision.reason = Some(
            "permit needs a person to approve this call: the audit log cannot be written, and no call is allowed without its record"
                .to_owned(),
        );
        decision.reason_code = Some(ReasonCode::AuditUnavailable);
    }
}

enum Message {
    /// One request's lines, each ending in a newline. `done` (decision mode) hears whether they
    /// are written and fsynced.
    Lines { bytes: Vec<u8>, done: Option<oneshot::Sender<bool>> },
    /// Retry an unhealthy log and fsync if due; sent every `flush_interval` so an idle log
    /// still recovers and syncs.
    Tick,
    /// Retry an unhealthy log, fsync, and answer whether the log is healthy; then keep going.
    Sync(oneshot::Sender<bool>),
    /// As `Sync`, then stop.
    Close(oneshot::Sender<bool>),
}

#[derive(Default)]
struct Counters {
    healthy: AtomicBool,
    lines_written: AtomicU64,
    write_errors: AtomicU64,
    lines_dropped: AtomicU64,
}

/// A handle to the writer; cheap to clone.
#[derive(Clone)]
pub struct AuditLog {
    sender: mpsc::Sender<Message>,
    counters: Arc<Counters>,
    sync: AuditSync,
}

impl AuditLog {
    /// Opens (creating it and its directory if needed) the log at `path`, cuts a torn last
    /// line, and starts the writer.
    pub async fn open(
        path: &Path,
        rotate_bytes: u64,
        flush_interval: Duration,
        sync: AuditSync,
    ) -> Result<Self, AuditError> {
        // `tokio::time::interval` refuses a zero period.
        let flush_interval = flush_interval.max(Duration::from_millis(1));
        // Blocking file calls, once at startup, before the service accepts anything.
        let file = open_append(path).map_err(|source| AuditError::Open { path: path.to_owned(), source })?;
        let counters = Arc::new(Counters { healthy: AtomicBool::new(true), ..Counters::default() });
        let regular = file.metadata().map(|metadata| metadata.is_file()).unwrap_or(true);
        let writer = Writer {
            path: path.to_owned(),
            regular,
            file: Some(file),
            torn_at: None,
            rotate_bytes: rotate_bytes.max(1),
            durable: sync == AuditSync::Decision,
            flush_interval,
            unsynced: false,
            last_sync: Instant::now(),
            rotation_retry_at: None,
            gap: None,
            counters: counters.clone(),
        };
        let (sender, receiver) = mpsc::channel(CHANNEL_CAPACITY);
        std::thread::Builder::new()
            .name("permit-audit".to_owned())
            .spawn(move || run(writer, receiver))
            .map_err(AuditError::Start)?;
        // A weak handle, so the ticker never keeps the writer alive after the last `AuditLog`.
        let ticker = sender.downgrade();
        tokio::spawn(async move {
            // The first tick one interval from now: `interval`'s immediate first tick could land
            // behind later messages and retry a failing log while a caller that had just synced
            // reads the file (its cut-back retry then shows a torn line for an instant).
            let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + flush_interval, flush_interval);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                interval.tick().await;
                let Some(sender) = ticker.upgrade() else { return };
                // A full channel means the writer is busy and syncs on its own; skip the tick.
                let _ = sender.try_send(Message::Tick);
            }
        });
        Ok(AuditLog { sender, counters, sync })
    }

    /// Hands one request's lines (JSON without newlines) to the writer, waiting while its
    /// buffer is full. In `decision` mode it also waits until they are written and fsynced, and
    /// fails with [`AuditError::Unwritten`] if they could not be.
    pub async fn record(&self, lines: Vec<String>) -> Result<(), AuditError> {
        if lines.is_empty() {
            return Ok(());
        }
        let mut bytes = Vec::with_capacity(lines.iter().map(|line| line.len() + 1).sum());
        for line in &lines {
            bytes.extend_from_slice(line.as_bytes());
            bytes.push(b'\n');
        }
        match self.sync {
            AuditSync::Interval => {
                self.sender.send(Message::Lines { bytes, done: None }).await.map_err(|_| AuditError::Stopped)
            }
            AuditSync::Decision => {
                let (done, wait) = oneshot::channel();
                self.sender.send(Message::Lines { bytes, done: Some(done) }).await.map_err(|_| AuditError::Stopped)?;
                match wait.await {
                    Ok(true) => Ok(()),
                    Ok(false) => Err(AuditError::Unwritten),
                    Err(_) => Err(AuditError::Stopped),
                }
            }
        }
    }

    /// [`AuditLog::record`] for one line.
    pub async fn write(&self, line: String) -> Result<(), AuditError> {
        self.record(vec![line]).await
    }

    /// Waits until every line handed over so far is written and fsynced (retrying an unhealthy
    /// log first); fails with [`AuditError::Unwritten`] if the log is unhealthy afterwards.
    pub async fn sync(&self) -> Result<(), AuditError> {
        let (done, wait) = oneshot::channel();
        self.sender.send(Message::Sync(done)).await.map_err(|_| AuditError::Stopped)?;
        match wait.await {
            Ok(true) => Ok(()),
            Ok(false) => Err(AuditError::Unwritten),
            Err(_) => Err(AuditError::Stopped),
        }
    }

    /// Writes everything handed over so far, fsyncs, and stops the writer.
    pub async fn close(&self) -> Result<(), AuditError> {
        let (done, wait) = oneshot::channel();
        self.sender.send(Message::Close(done)).await.map_err(|_| AuditError::Stopped)?;
        match wait.await {
            Ok(true) => Ok(()),
            Ok(false) => Err(AuditError::Unwritten),
            Err(_) => Err(AuditError::Stopped),
        }
    }

    /// False from a failed write (or cut, fsync, reopen) until a write succeeds again, and
    /// once the writer has stopped.
    pub fn is_healthy(&self) -> bool {
        self.counters.healthy.load(Ordering::Relaxed)
    }

    /// Lines that reached the file (in `decision` mode: and were fsynced), `audit_gap` lines
    /// included. Lines cut back after a failed write are not counted.
    pub fn lines_written(&self) -> u64 {
        self.counters.lines_written.load(Ordering::Relaxed)
    }

    /// Failed file operations: writes, cuts, fsyncs, opens and rotations.
    pub fn write_errors(&self) -> u64 {
        self.counters.write_errors.load(Ordering::Relaxed)
    }

    /// Lines handed over that never reached the file.
    pub fn lines_dropped(&self) -> u64 {
        self.counters.lines_dropped.load(Ordering::Relaxed)
    }

    /// The durability mode the log was opened with.
    pub fn sync_mode(&self) -> AuditSync {
        self.sync
    }
}

/// Opens `path` for appending and cuts a torn last line (see the module header).
fn open_append(path: &Path) -> std::io::Result<File> {
    if let Some(parent) = path.parent().filter(|parent| !parent.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let file = OpenOptions::new().create(true).append(true).open(path)?;
    let cut = cut_torn_tail(&file, path)?;
    if cut > 0 {
        tracing::warn!(path = %path.display(), "audit log: cut {cut} bytes of a torn last line");
    }
    Ok(file)
}

/// Cuts a regular file back to just after its last newline; returns the bytes cut. `file` is
/// the append handle (it does the cut); the tail is read through a second, read-only handle,
/// so a log the service may append to but not read still opens (unchecked).
fn cut_torn_tail(file: &File, path: &Path) -> std::io::Result<u64> {
    let metadata = file.metadata()?;
    // `/dev/full`, a pipe or a terminal has no tail to repair.
    if !metadata.is_file() || metadata.len() == 0 {
        return Ok(0);
    }
    let mut reader = match File::open(path) {
        Ok(reader) => reader,
        Err(error) if error.kind() == std::io::ErrorKind::PermissionDenied => return Ok(0),
        Err(error) => return Err(error),
    };
    let length = metadata.len();
    let mut last = [0_u8; 1];
    reader.seek(SeekFrom::Start(length - 1))?;
    reader.read_exact(&mut last)?;
    if last[0] == b'\n' {
        return Ok(0);
    }
    let mut chunk = vec![0_u8; 64 * 1024];
    let mut end = length;
    while length - end < MAX_TORN_TAIL_BYTES && end > 0 {
        let start = end.saturating_sub(chunk.len() as u64);
        let size = (end - start) as usize;
        reader.seek(SeekFrom::Start(start))?;
        reader.read_exact(&mut chunk[..size])?;
        if let Some(position) = chunk[..size].iter().rposition(|byte| *byte == b'\n') {
            let keep = start + position as u64 + 1;
            file.set_len(keep)?;
            return Ok(length - keep);
        }
        end = start;
    }
    if end == 0 && length <= MAX_TORN_TAIL_BYTES {
        // One torn line and nothing else: a crash during the very first write.
        file.set_len(0)?;
        return Ok(length);
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        "its last MiB holds no line break, so it is not a JSONL audit log",
    ))
}

/// Lines collected for one write: each group is one request's lines.
#[derive(Default)]
struct Batch {
    bytes: Vec<u8>,
    groups: Vec<Group>,
}

struct Group {
    /// Offset in `bytes` just past this group's last newline.
    end: usize,
    lines: u64,
    done: Option<oneshot::Sender<bool>>,
    /// An `audit_gap` line the writer made itself: not counted as lost when it fails.
    gap_marker: bool,
}

impl Batch {
    fn push(&mut self, bytes: Vec<u8>, done: Option<oneshot::Sender<bool>>) {
        // Counting newlines, not strings, keeps `lines_written` equal to the file's lines.
        let lines = bytes.iter().filter(|byte| **byte == b'\n').count() as u64;
        if self.bytes.is_empty() {
            self.bytes = bytes;
        } else {
            self.bytes.extend_from_slice(&bytes);
        }
        self.groups.push(Group { end: self.bytes.len(), lines, done, gap_marker: false });
    }

    fn prepend_gap_marker(&mut self, line: String) {
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        let shift = bytes.len();
        for group in &mut self.groups {
            group.end += shift;
        }
        self.groups.insert(0, Group { end: shift, lines: 1, done: None, gap_marker: true });
        bytes.append(&mut self.bytes);
        self.bytes = bytes;
    }
}

/// Why and since when the log has been failing, for the `audit_gap` line.
struct Gap {
    since: String,
    error: String,
    lines_lost: u64,
}

struct Writer {
    path: PathBuf,
    /// None after a failed reopen: nothing can be written until a reopen succeeds.
    file: Option<File>,
    /// False for a pipe or a terminal (`/dev/stdout` for a container's log collector): bytes
    /// sent there cannot be cut back, and fsync does not apply (it fails with EINVAL).
    regular: bool,
    /// Set when a cut after a failed write failed: the file may end in a partial line past this
    /// length, so nothing is appended before a cut to it succeeds.
    torn_at: Option<u64>,
    rotate_bytes: u64,
    durable: bool,
    flush_interval: Duration,
    unsynced: bool,
    last_sync: Instant,
    rotation_retry_at: Option<Instant>,
    /// Some while the log is unhealthy.
    gap: Option<Gap>,
    counters: Arc<Counters>,
}

/// Marks the log unhealthy when the writer thread ends, however it ends.
struct StoppedGuard(Arc<Counters>);

impl Drop for StoppedGuard {
    fn drop(&mut self) {
        self.0.healthy.store(false, Ordering::Relaxed);
    }
}

fn run(mut writer: Writer, mut receiver: mpsc::Receiver<Message>) {
    let _stopped = StoppedGuard(writer.counters.clone());
    let mut carried = None;
    loop {
        let message = match carried.take() {
            Some(message) => message,
            None => match receiver.blocking_recv() {
                Some(message) => message,
                None => {
                    writer.sync();
                    return;
                }
            },
        };
        match message {
            Message::Lines { bytes, done } => {
                // Group commit: everything already waiting goes in the same write (and fsync).
                let mut batch = Batch::default();
                batch.push(bytes, done);
                while batch.bytes.len() < MAX_BATCH_BYTES {
                    match receiver.try_recv() {
                        Ok(Message::Lines { bytes, done }) => batch.push(bytes, done),
                        Ok(other) => {
                            carried = Some(other);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                writer.commit(batch);
            }
            Message::Tick => {
                if writer.gap.is_some() {
                    writer.commit(Batch::default());
                }
            }
            Message::Sync(done) => {
                let _ = done.send(writer.sync());
            }
            Message::Close(done) => {
                let _ = done.send(writer.sync());
                return;
            }
        }
        if writer.unsynced && writer.last_sync.elapsed() >= writer.flush_interval {
            writer.sync_file();
        }
    }
}

/// `write_all` that reports how many bytes reached the file before an error.
fn write_counting(file: &mut File, bytes: &[u8]) -> (usize, Option<std::io::Error>) {
    let mut written = 0;
    while written < bytes.len() {
        match file.write(&bytes[written..]) {
            Ok(0) => return (written, Some(std::io::ErrorKind::WriteZero.into())),
            Ok(count) => written += count,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return (written, Some(error)),
        }
    }
    (written, None)
}

fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

impl Writer {
    /// Records a failed operation: the log is unhealthy until a write succeeds.
    fn failed(&mut self, operation: &str, error: &std::io::Error) {
        self.counters.write_errors.fetch_add(1, Ordering::Relaxed);
        self.counters.healthy.store(false, Ordering::Relaxed);
        // One error line per outage: a full disk under load would otherwise log every request.
        if self.gap.is_none() {
            tracing::error!(path = %self.path.display(), "audit log {operation} failed: {error}; allow is answered ask until it can be written again");
            self.gap = Some(Gap { since: now_rfc3339(), error: format!("{operation}: {error}"), lines_lost: 0 });
        }
    }

    /// Cuts the file back to `length` after a failed write; if that fails too, appending waits
    /// until a retried cut succeeds.
    fn cut(&mut self, file: &File, length: u64) {
        if let Err(error) = file.set_len(length) {
            self.failed("cut back", &error);
            self.torn_at = Some(length);
        }
    }

    /// Retries an unhealthy log: finishes a failed cut, then reopens the path.
    fn reopen(&mut self) -> bool {
        if let (Some(file), Some(length)) = (&self.file, self.torn_at) {
            if let Err(error) = file.set_len(length) {
                self.failed("cut back", &error);
                return false;
            }
            self.torn_at = None;
        }
        match open_append(&self.path) {
            Ok(file) => {
                self.file = Some(file);
                true
            }
            Err(error) => {
                self.file = None;
                self.failed("open", &error);
                false
            }
        }
    }

    /// Writes a batch as whole requests, fsyncs it in `decision` mode, and answers its waiters.
    fn commit(&mut self, mut batch: Batch) {
        if let Some(gap) = &self.gap {
            let marker = serde_json::json!({
                "time": now_rfc3339(),
                "type": "audit_gap",
                "since": gap.since,
                "error": gap.error,
                "lines_lost": gap.lines_lost,
            });
            if !self.reopen() {
                self.settle(batch, 0);
                return;
            }
            batch.prepend_gap_marker(marker.to_string());
        }
        let Some(mut file) = self.file.take() else {
            self.settle(batch, 0);
            return;
        };
        let errors_before = self.counters.write_errors.load(Ordering::Relaxed);
        // The length from the file, not a running count: another process may have truncated
        // it (logrotate's copytruncate), and a cut must never extend the file.
        let start = match file.metadata() {
            Ok(metadata) => {
                self.regular = metadata.is_file();
                metadata.len()
            }
            Err(error) => {
                self.failed("stat", &error);
                self.file = Some(file);
                self.settle(batch, 0);
                return;
            }
        };
        let (written, error) = write_counting(&mut file, &batch.bytes);
        let mut kept = batch.groups.iter().take_while(|group| group.end <= written).count();
        let kept_bytes = kept.checked_sub(1).map_or(0, |last| batch.groups[last].end);
        if let Some(error) = error {
            self.failed("write", &error);
            if written > kept_bytes && self.regular {
                self.cut(&file, start + kept_bytes as u64);
            }
        }
        if kept > 0 && self.durable && self.regular {
            match file.sync_data() {
                Ok(()) => self.last_sync = Instant::now(),
                Err(error) => {
                    // The answers become `ask`, so the lines must not stay in the file claiming
                    // `allow`.
                    self.failed("fsync", &error);
                    self.cut(&file, start);
                    kept = 0;
                }
            }
        } else if kept > 0 {
            self.unsynced = true;
        }
        self.file = Some(file);
        let size = start + if kept > 0 { kept_bytes as u64 } else { 0 };
        // Health first, then the waiters: a caller released by this batch sees the state that
        // its own write left.
        if self.counters.write_errors.load(Ordering::Relaxed) == errors_before {
            if let Some(gap) = self.gap.take() {
                tracing::warn!(path = %self.path.display(), lines_lost = gap.lines_lost, "audit log writable again");
            }
            self.counters.healthy.store(true, Ordering::Relaxed);
        }
        self.settle(batch, kept);
        if self.gap.is_none() && size >= self.rotate_bytes {
            self.rotate();
        }
    }

    /// Counts the batch's lines, then answers its waiters: the first `kept` groups are written.
    fn settle(&mut self, batch: Batch, kept: usize) {
        let (written, lost) = batch.groups.iter().enumerate().fold((0, 0), |(written, lost), (index, group)| {
            if index < kept {
                (written + group.lines, lost)
            } else if group.gap_marker {
                (written, lost)
            } else {
                (written, lost + group.lines)
            }
        });
        self.counters.lines_written.fetch_add(written, Ordering::Relaxed);
        if lost > 0 {
            self.counters.lines_dropped.fetch_add(lost, Ordering::Relaxed);
            if let Some(gap) = &mut self.gap {
                gap.lines_lost += lost;
            }
        }
        for (index, group) in batch.groups.into_iter().enumerate() {
            if let Some(done) = group.done {
                let _ = done.send(index < kept);
            }
        }
    }

    fn sync_file(&mut self) {
        let Some(file) = &self.file else { return };
        if !self.regular {
            self.unsynced = false;
            return;
        }
        match file.sync_data() {
            Ok(()) => {
                self.unsynced = false;
                self.last_sync = Instant::now();
            }
            Err(error) => self.failed("fsync", &error),
        }
    }

    /// Retries an unhealthy log, fsyncs what is unsynced, and says whether the log is healthy.
    fn sync(&mut self) -> bool {
        if self.gap.is_some() {
            self.commit(Batch::default());
        }
        if self.unsynced {
            self.sync_file();
        }
        self.gap.is_none() && self.file.is_some()
    }

    fn rotate(&mut self) {
        if self.rotation_retry_at.is_some_and(|at| Instant::now() < at) {
            return;
        }
        self.sync_file();
        if self.gap.is_some() {
            return;
        }
        let numbered = |index: u32| {
            let mut name = self.path.clone().into_os_string();
            name.push(format!(".{index}"));
            PathBuf::from(name)
        };
        let renamed = (1..KEPT_ROTATIONS)
            .rev()
            .map(|index| (numbered(index), numbered(index + 1)))
            .filter(|(from, _)| from.exists())
            .chain(std::iter::once((self.path.clone(), numbered(1))))
            .try_for_each(|(from, to)| std::fs::rename(from, to));
        if let Err(error) = renamed {
            // The live file is still written, so this is no outage: count it and retry later.
            self.counters.write_errors.fetch_add(1, Ordering::Relaxed);
            tracing::error!(path = %self.path.display(), "audit log rotation failed: {error}");
            self.rotation_retry_at = Some(Instant::now() + self.flush_interval);
            return;
        }
        self.rotation_retry_at = None;
        self.file = None;
        match open_append(&self.path) {
            Ok(file) => self.file = Some(file),
            Err(error) => self.failed("open", &error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gap_marker_goes_first_and_shifts_the_groups() {
        let mut batch = Batch::default();
        batch.push(b"{\"a\":1}\n".to_vec(), None);
        batch.push(b"{\"b\":2}\n{\"c\":3}\n".to_vec(), None);
        batch.prepend_gap_marker("{\"gap\":true}".to_owned());
        assert_eq!(batch.bytes, b"{\"gap\":true}\n{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n");
        let ends: Vec<usize> = batch.groups.iter().map(|group| group.end).collect();
        assert_eq!(ends, [13, 21, 37]);
        let lines: Vec<u64> = batch.groups.iter().map(|group| group.lines).collect();
        assert_eq!(lines, [1, 1, 2]);
    }

    #[test]
    fn a_torn_tail_is_cut_to_the_last_newline_and_a_file_without_lines_is_refused() {
        let directory = std::env::temp_dir().join(format!("permit-audit-unit-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let path = directory.join("torn.jsonl");
        std::fs::write(&path, "{\"a\":1}\n{\"b\":").unwrap();
        drop(open_append(&path).unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":1}\n");
        std::fs::write(&path, "{\"only\":").unwrap();
        drop(open_append(&path).unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
        std::fs::write(&path, vec![b'x'; 2 * MAX_TORN_TAIL_BYTES as usize]).unwrap();
        assert_eq!(open_append(&path).unwrap_err().kind(), std::io::ErrorKind::InvalidData);
        std::fs::remove_dir_all(&directory).unwrap();
    }
}
