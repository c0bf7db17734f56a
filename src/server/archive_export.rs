//! The engine's archive exporter (`asynqdeck serve --archive-export-dir
//! DIR`, S31; COMPATIBILITY.md N1): archived tasks appended to gzip NDJSON
//! files soon after they are archived, before asynq's archive trim (90
//! days, 10,000 tasks) can remove them, whoever archived them (this
//! process, our workers, Go servers or Go's `Inspector`).
//!
//! # How
//! Per queue, the cursor `asynqdeck:{<queue>}:export_cursor`
//! ([`export_cursor_key`](crate::broker::export_cursor_key)) holds the ids
//! exported in the last [`ArchiveExportConfig::lookback`] of archived
//! scores; its highest score is how far the export got. A pass over a
//! queue reads the archive from the first task scored at least
//! `top − lookback` (one `ZCOUNT`, then chunks by rank of at most
//! [`EXPORT_CHUNK`] tasks and [`EXPORT_CHUNK_BYTES`] of task data, one
//! task when a single task is larger), skips the
//! ids the cursor holds, appends the others to the file, then records
//! them. The look-back covers tasks archived late in score order (another
//! process's clock a little behind, a chunk written between two reads).
//!
//! Which queues: the due index ([`DueIndex`]) reports every queue's
//! archived size; a queue is passed over when that size changed since its
//! last pass, and, as its size cannot show a change there, each interval
//! while it holds [`MAX_ARCHIVE_SIZE`] − 1 or more tasks (Go's trim keeps
//! 9,999) if its highest archived score passed the cursor. A snapshot
//! every [`ArchiveExportConfig::snapshot_interval`] compares, for every
//! queue with archived tasks, the archive's highest score with the
//! cursor's (two short reads), catching what the size missed (a task
//! archived and another deleted between two reads). Cost follows change:
//! an idle engine reads nothing but the snapshot.
//!
//! # Files
//! `DIR/archive-<queue>-<YYYYMMDD>T<HH>Z.ndjson.gz`, by the UTC hour of
//! the export (the queue name percent-encoded beyond `A-Z a-z 0-9 . _ -`);
//! past [`ArchiveExportConfig::max_file_bytes`] the hour goes on in
//! `…Z-1.ndjson.gz`, `…Z-2.ndjson.gz`, .... Each chunk is appended as one
//! complete gzip member, so a file is always a valid multi-member gzip
//! stream (`gunzip`, `zcat`, flate2's `MultiGzDecoder`) even after a
//! crash. Lines as [`crate::export`].
//!
//! # Guarantees
//! At least once: a chunk is written to the file before its ids go into
//! the cursor, so a crash or a Redis error in between writes those tasks
//! again at the next pass. Not guaranteed: a task archived and trimmed
//! (or deleted, or run again) within one interval is never seen; a task
//! scored more than the look-back below the cursor is skipped. Several
//! engines with the option on share one cursor per queue and split the
//! tasks between their directories: turn it on in one process.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};
use flate2::Compression;
use flate2::write::GzEncoder;
use tokio_util::sync::CancellationToken;

use super::ticker::{FirstTick, Ticker};
use crate::TaskInfo;
use crate::broker::{Broker, DueIndex, MAX_ARCHIVE_SIZE};
use crate::error::{Error, Result};
use crate::export::{EXPORT_CHUNK, EXPORT_CHUNK_BYTES, ndjson_line};
use crate::task::{TaskRow, TaskState};

/// Settings of the archive exporter.
#[derive(Clone, Debug)]
pub struct ArchiveExportConfig {
    /// The directory of the files (created when missing).
    pub dir: PathBuf,
    /// How often changed queues are exported. Default 5 s.
    pub interval: Duration,
    /// How far below the cursor's highest score a pass reads again for
    /// tasks archived late in score order. Default 60 s.
    pub lookback: Duration,
    /// How often every queue with archived tasks is checked, changed or
    /// not. Default 5 min.
    pub snapshot_interval: Duration,
    /// A file past this size is not appended to again (the hour goes on
    /// in the next part). Default 64 MiB.
    pub max_file_bytes: u64,
    /// Most tasks one pass writes for a queue; the rest wait for the next
    /// interval. Default 10,000.
    pub max_per_pass: usize,
}

impl ArchiveExportConfig {
    /// The defaults, writing into `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        ArchiveExportConfig {
            dir: dir.into(),
            interval: Duration::from_secs(5),
            lookback: Duration::from_secs(60),
            snapshot_interval: Duration::from_secs(300),
            max_file_bytes: 64 * 1024 * 1024,
            max_per_pass: 10_000,
        }
    }
}

/// Writes newly archived tasks to files (see the module docs).
#[derive(Clone, Debug)]
pub struct ArchiveExporter {
    broker: Broker,
    config: ArchiveExportConfig,
}

/// `name` with every byte outside `A-Z a-z 0-9 . _ -` as `%XX`.
pub fn file_safe(name: &str) -> String {
    let mut out = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"._-".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The file of `queue` for the hour of `at`, part `part` (0: no suffix).
pub fn file_name(queue: &str, at: DateTime<Utc>, part: u32) -> String {
    let hour = at.format("%Y%m%dT%HZ");
    let q = file_safe(queue);
    if part == 0 {
        format!("archive-{q}-{hour}.ndjson.gz")
    } else {
        format!("archive-{q}-{hour}-{part}.ndjson.gz")
    }
}

/// Appends `text` as one gzip member to the first part of the hour under
/// `max` bytes.
fn append(
    dir: &Path,
    queue: &str,
    at: DateTime<Utc>,
    max: u64,
    text: &[u8],
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut part = 0;
    let path = loop {
        let p = dir.join(file_name(queue, at, part));
        match std::fs::metadata(&p) {
            Ok(m) if m.len() >= max => part += 1,
            _ => break p,
        }
    };
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(text)?;
    let member = gz.finish()?;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)?;
    f.write_all(&member)?;
    f.flush()
}

impl ArchiveExporter {
    /// An exporter on `broker` with `config`.
    pub fn new(broker: Broker, config: ArchiveExportConfig) -> Self {
        ArchiveExporter { broker, config }
    }

    /// One pass over `queue` (see the module docs): writes the archived
    /// tasks the cursor does not hold, at most
    /// [`ArchiveExportConfig::max_per_pass`], and returns how many. A task
    /// whose msg does not decode is written as an error line.
    ///
    /// Errors: [`Error::Redis`]; [`Error::Internal`] when a file cannot be
    /// written (the tasks of that chunk are written again next time).
    // asynqdeck addition: COMPATIBILITY.md#n1
    pub async fn export_queue(&self, queue: &str) -> Result<usize> {
        let lookback = i64::try_from(self.config.lookback.as_secs()).unwrap_or(i64::MAX / 2);
        let top = self.broker.export_cursor_top(queue).await?;
        let (mut pos, known) = match top {
            Some(top) => {
                let from = top.saturating_sub(lookback);
                let since = DateTime::from_timestamp(from, 0).unwrap_or_default();
                let pos = self
                    .broker
                    .export_rank_since(queue, TaskState::Archived, None, since)
                    .await?;
                let known: HashSet<String> = self
                    .broker
                    .export_cursor_ids(queue, from)
                    .await?
                    .into_iter()
                    .collect();
                (pos, known)
            }
            None => (0, HashSet::new()),
        };
        let mut written = 0;
        while written < self.config.max_per_pass {
            let (tasks, read) = self
                .broker
                .export_chunk(
                    queue,
                    TaskState::Archived,
                    None,
                    pos,
                    EXPORT_CHUNK,
                    EXPORT_CHUNK_BYTES,
                )
                .await?;
            if read == 0 {
                break;
            }
            pos += read as u64;
            let mut text = String::new();
            let mut entries = Vec::new();
            for t in tasks {
                if known.contains(&t.id) {
                    continue;
                }
                let score = t.score.unwrap_or(0);
                let row = match t.msg {
                    Ok(msg) => TaskRow::Task(TaskInfo::from_message(
                        msg,
                        TaskState::Archived,
                        None,
                        t.result,
                        false,
                    )),
                    Err(e) => TaskRow::Corrupt {
                        id: t.id.clone(),
                        state: TaskState::Archived,
                        error: e.to_string(),
                    },
                };
                text.push_str(&ndjson_line(&row));
                entries.push((t.id, score));
            }
            if entries.is_empty() {
                continue;
            }
            let (dir, max) = (self.config.dir.clone(), self.config.max_file_bytes);
            let (q, at) = (queue.to_string(), self.broker.now());
            tokio::task::spawn_blocking(move || append(&dir, &q, at, max, text.as_bytes()))
                .await
                .map_err(|e| Error::Internal(format!("archive export writer: {e}")))?
                .map_err(|e| {
                    Error::Internal(format!(
                        "cannot write the archive export of {queue} in {}: {e}",
                        self.config.dir.display()
                    ))
                })?;
            let high = entries.iter().map(|(_, s)| *s).max().unwrap_or(0);
            let prune = high.max(top.unwrap_or(0)).saturating_sub(lookback);
            self.broker
                .export_cursor_add(queue, &entries, prune)
                .await?;
            written += entries.len();
        }
        Ok(written)
    }

    /// Exports, every interval until `shutdown`, the queues whose archive
    /// changed by `index` (see the module docs). A failed pass is logged
    /// and tried again at the next interval.
    pub async fn run_indexed(self, index: DueIndex, shutdown: CancellationToken) {
        if !index.ready(&shutdown).await {
            return;
        }
        if let Err(e) = std::fs::create_dir_all(&self.config.dir) {
            tracing::warn!(dir = %self.config.dir.display(), error = %e, "archive export: cannot create the directory");
        }
        // Archived size at the last complete pass, per queue.
        let mut done: HashMap<String, u64> = HashMap::new();
        let mut snapshot_at = self.broker.now();
        let mut ticks = Ticker::new(self.config.interval, FirstTick::AtOnce, &shutdown);
        while ticks.next().await {
            let now = self.broker.now();
            let snapshot = now >= snapshot_at;
            if snapshot {
                snapshot_at = now
                    + chrono::Duration::from_std(self.config.snapshot_interval)
                        .unwrap_or(chrono::Duration::MAX);
            }
            let at_cap = (MAX_ARCHIVE_SIZE as u64).saturating_sub(1);
            for (queue, heads) in index.entries() {
                let size = heads.archived_size;
                let changed = done.get(&queue).is_none_or(|s| *s != size) && size > 0;
                let check = !changed && size > 0 && (snapshot || size >= at_cap);
                if !changed && !check {
                    continue;
                }
                if check && !self.moved_on(&queue).await {
                    continue;
                }
                match self.export_queue(&queue).await {
                    Ok(n) => {
                        if n > 0 {
                            tracing::debug!(queue, tasks = n, "archive export: written");
                        }
                        if n < self.config.max_per_pass {
                            done.insert(queue, size);
                        }
                    }
                    Err(e) => {
                        tracing::warn!(queue, error = %e, "archive export failed; trying again next interval");
                    }
                }
            }
        }
    }

    /// Whether the archive's highest score is above the cursor's (or the
    /// queue was never exported). A failed read counts as moved on.
    async fn moved_on(&self, queue: &str) -> bool {
        let archived = self.broker.archived_top_score(queue).await;
        let cursor = self.broker.export_cursor_top(queue).await;
        match (archived, cursor) {
            (Ok(Some(a)), Ok(Some(c))) => a > c,
            (Ok(None), _) => false,
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names() {
        let at = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        assert_eq!(
            file_name("default", at, 0),
            "archive-default-20231114T22Z.ndjson.gz"
        );
        assert_eq!(
            file_name("a/b c", at, 2),
            "archive-a%2Fb%20c-20231114T22Z-2.ndjson.gz"
        );
    }
}
