//! The audit log: one JSON line per decision (and per human feedback), written by a dedicated
//! task.
//!
//! - **No line is lost.** Handlers hand lines over a bounded channel and wait when it is full
//!   (backpressure instead of dropping), and a decision's lines are handed over before its
//!   response is sent.
//! - **Durable.** The file is flushed and fsynced every `flush_interval` and on shutdown.
//! - **Rotated by size.** Past `rotate_bytes` the file becomes `NAME.1` (`NAME.1` becomes
//!   `NAME.2`, …, keeping [`KEPT_ROTATIONS`]).
//! - **No secrets.** Lines hold the decision records and a digest of the request body, never
//!   the body itself, bearer tokens or API keys.
//!
//! On failure: a write error is logged and counted, and the writer keeps trying with the next
//! line (a full disk must not stop decisions); [`AuditLog::open`] fails at startup if the file
//! cannot be opened, so the service never runs without the log it was configured with.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::fs::{File, OpenOptions};
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::sync::{mpsc, oneshot};

/// Lines waiting for the writer before handlers wait.
const CHANNEL_CAPACITY: usize = 8_192;
/// Rotated files kept besides the live one.
pub const KEPT_ROTATIONS: u32 = 5;

enum Message {
    Line(String),
    /// Flush, fsync and answer; then keep going.
    Sync(oneshot::Sender<()>),
    /// Flush, fsync, answer and stop.
    Close(oneshot::Sender<()>),
}

/// A handle to the writer; cheap to clone.
#[derive(Clone)]
pub struct AuditLog {
    sender: mpsc::Sender<Message>,
}

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("cannot open the audit log `{path}`: {source}")]
    Open { path: PathBuf, source: std::io::Error },
    #[error("the audit log writer has stopped")]
    Stopped,
}

struct Writer {
    path: PathBuf,
    file: BufWriter<File>,
    size: u64,
    rotate_bytes: u64,
}

async fn open_append(path: &Path) -> std::io::Result<(File, u64)> {
    if let Some(parent) = path.parent().filter(|parent| !parent.as_os_str().is_empty()) {
        tokio::fs::create_dir_all(parent).await?;
    }
    let file = OpenOptions::new().create(true).append(true).open(path).await?;
    let size = file.metadata().await?.len();
    Ok((file, size))
}

impl Writer {
    async fn write(&mut self, line: &str) -> std::io::Result<()> {
        self.file.write_all(line.as_bytes()).await?;
        self.file.write_all(b"\n").await?;
        self.size += line.len() as u64 + 1;
        if self.size >= self.rotate_bytes {
            self.rotate().await?;
        }
        Ok(())
    }

    async fn sync(&mut self) -> std::io::Result<()> {
        self.file.flush().await?;
        self.file.get_ref().sync_data().await
    }

    async fn rotate(&mut self) -> std::io::Result<()> {
        self.sync().await?;
        let numbered = |index: u32| {
            let mut name = self.path.clone().into_os_string();
            name.push(format!(".{index}"));
            PathBuf::from(name)
        };
        for index in (1..KEPT_ROTATIONS).rev() {
            let from = numbered(index);
            if tokio::fs::try_exists(&from).await.unwrap_or(false) {
                tokio::fs::rename(&from, numbered(index + 1)).await?;
            }
        }
        tokio::fs::rename(&self.path, numbered(1)).await?;
        let (file, size) = open_append(&self.path).await?;
        self.file = BufWriter::new(file);
        self.size = size;
        Ok(())
    }
}

impl AuditLog {
    /// Opens (creating it and its directory if needed) the log at `path` and starts the writer.
    pub async fn open(path: &Path, rotate_bytes: u64, flush_interval: Duration) -> Result<Self, AuditError> {
        let (file, size) =
            open_append(path).await.map_err(|source| AuditError::Open { path: path.to_owned(), source })?;
        let writer =
            Writer { path: path.to_owned(), file: BufWriter::new(file), size, rotate_bytes: rotate_bytes.max(1) };
        let (sender, receiver) = mpsc::channel(CHANNEL_CAPACITY);
        tokio::spawn(run(writer, receiver, flush_interval));
        Ok(AuditLog { sender })
    }

    /// Hands a line to the writer, waiting while the buffer is full.
    pub async fn write(&self, line: String) -> Result<(), AuditError> {
        self.sender.send(Message::Line(line)).await.map_err(|_| AuditError::Stopped)
    }

    /// Waits until every line handed over so far is on disk.
    pub async fn sync(&self) -> Result<(), AuditError> {
        let (done, wait) = oneshot::channel();
        self.sender.send(Message::Sync(done)).await.map_err(|_| AuditError::Stopped)?;
        wait.await.map_err(|_| AuditError::Stopped)
    }

    /// Writes everything handed over so far, fsyncs, and stops the writer.
    pub async fn close(&self) -> Result<(), AuditError> {
        let (done, wait) = oneshot::channel();
        self.sender.send(Message::Close(done)).await.map_err(|_| AuditError::Stopped)?;
        wait.await.map_err(|_| AuditError::Stopped)
    }
}

async fn run(mut writer: Writer, mut receiver: mpsc::Receiver<Message>, flush_interval: Duration) {
    let mut ticker = tokio::time::interval(flush_interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            message = receiver.recv() => match message {
                Some(Message::Line(line)) => {
                    if let Err(error) = writer.write(&line).await {
                        tracing::error!(path = %writer.path.display(), "audit log write failed: {error}");
                    }
                }
                Some(Message::Sync(done)) => {
                    if let Err(error) = writer.sync().await {
                        tracing::error!(path = %writer.path.display(), "audit log sync failed: {error}");
                    }
                    let _ = done.send(());
                }
                Some(Message::Close(done)) => {
                    if let Err(error) = writer.sync().await {
                        tracing::error!(path = %writer.path.display(), "audit log sync failed: {error}");
                    }
                    let _ = done.send(());
                    return;
                }
                None => {
                    if let Err(error) = writer.sync().await {
                        tracing::error!(path = %writer.path.display(), "audit log sync failed: {error}");
                    }
                    return;
                }
            },
            _ = ticker.tick() => {
                if let Err(error) = writer.sync().await {
                    tracing::error!(path = %writer.path.display(), "audit log sync failed: {error}");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let directory = std::env::temp_dir().join(format!("permit-audit-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&directory);
        directory
    }

    #[tokio::test]
    async fn every_line_reaches_the_file_and_rotation_keeps_them_all() {
        let directory = temp_dir("rotate");
        let path = directory.join("audit.jsonl");
        let log = AuditLog::open(&path, 1_000, Duration::from_secs(60)).await.unwrap();
        let mut tasks = Vec::new();
        for task in 0..8 {
            let log = log.clone();
            tasks.push(tokio::spawn(async move {
                for index in 0..50 {
                    log.write(format!("{{\"task\":{task},\"index\":{index}}}")).await.unwrap();
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        log.close().await.unwrap();
        let mut lines = 0;
        let mut files = 0;
        for entry in std::fs::read_dir(&directory).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            files += 1;
            for line in text.lines() {
                serde_json::from_str::<serde_json::Value>(line).unwrap();
                lines += 1;
            }
        }
        // 400 lines of about 24 bytes: rotated past 1,000 bytes, at most KEPT_ROTATIONS kept.
        assert_eq!(files, 1 + KEPT_ROTATIONS as usize);
        assert!(lines > 0 && lines < 400, "older rotations are dropped: {lines}");
        assert!(log.write("late".to_owned()).await.is_err(), "a closed log refuses lines");
        std::fs::remove_dir_all(&directory).unwrap();
    }

    #[tokio::test]
    async fn sync_puts_lines_on_disk_and_an_unopenable_path_is_an_error() {
        let directory = temp_dir("sync");
        let path = directory.join("nested").join("audit.jsonl");
        let log = AuditLog::open(&path, u64::MAX, Duration::from_secs(60)).await.unwrap();
        log.write("{\"a\":1}".to_owned()).await.unwrap();
        log.sync().await.unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":1}\n");
        std::fs::remove_dir_all(&directory).unwrap();
        let error = AuditLog::open(Path::new("/proc/permit-cannot/audit.jsonl"), 1, Duration::from_secs(1))
            .await
            .err()
            .unwrap();
        assert!(error.to_string().contains("/proc/permit-cannot/audit.jsonl"), "{error}");
    }
}
