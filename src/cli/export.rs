//! `asynqdeck export`: every task of one tab of a queue, as NDJSON or CSV,
//! on stdout or into a file (S31), the same bytes as the dashboard's
//! `GET …/queues/{q}/{state}/export` ([`crate::export`] rows, read in
//! chunks of at most [`EXPORT_CHUNK`](crate::inspector::EXPORT_CHUNK)
//! tasks and [`EXPORT_CHUNK_BYTES`](crate::inspector::EXPORT_CHUNK_BYTES)
//! of task data by [`Inspector::export_tasks`]).
//!
//! ```text
//! asynqdeck export --queue default --state archived --format ndjson --since 7d --output archive.ndjson
//! ```
//!
//! Redis is chosen with the flags of `serve` (`--redis-url`,
//! `--redis-addr`, `--redis-cluster-nodes`, `--redis-sentinel-*`, TLS, and
//! their environment variables); the other `serve` flags are accepted and
//! ignored. Exit codes: 0 when every task was written, 1 when Redis fails
//! (before or during the export; what was read is written, then an
//! `error:` line on stderr), the queue does not exist, or the output
//! cannot be written; 2 for bad flags, checked before Redis is reached:
//! an unknown `--state` or `--format`, a `--since` that does not parse, or
//! `--since` with `--state pending` or `active` (lists have no time).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use futures_util::StreamExt;

use super::ServeArgs;
use crate::Inspector;
use crate::broker::Broker;
use crate::export::{ExportFormat, parse_since};
use crate::inspector::{ExportRequest, TabFilter};
use crate::task::TaskState;

/// The flags of `asynqdeck export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The queue.
    #[arg(long, value_name = "NAME")]
    pub queue: String,
    /// The tab: active, pending, aggregating, scheduled, retry, archived or
    /// completed.
    #[arg(long, value_name = "STATE", default_value = "archived")]
    pub state: String,
    /// ndjson (one JSON object per line) or csv (header row, RFC 4180).
    #[arg(long, value_name = "FORMAT", default_value = "ndjson")]
    pub format: String,
    /// Only tasks whose time in the state is at least this: archived at
    /// (archived), next attempt (retry), process at (scheduled), kept until
    /// (completed), added (aggregating). An RFC 3339 time, a UTC date
    /// (2026-12-01), unix seconds, or an age (90m, 24h, 7d). Refused for
    /// pending and active.
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// The aggregating tab's group (default: the queue's first group).
    #[arg(long, value_name = "NAME")]
    pub group: Option<String>,
    /// Only tasks of this type (the tab's type filter).
    #[arg(long = "type", value_name = "TYPE")]
    pub task_type: Option<String>,
    /// Only tasks whose payload contains this text (the tab's payload filter).
    #[arg(long, value_name = "TEXT")]
    pub payload_contains: Option<String>,
    /// Write here instead of stdout (created or truncated).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// The Redis connection, as `serve` takes it.
    #[command(
        flatten,
        next_help_heading = "Redis connection (the flags of `serve`; the others are ignored)"
    )]
    pub serve: ServeArgs,
}

/// Why an export failed, with its exit code.
fn fail(code: u8, message: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(code)
}

impl ExportArgs {
    /// The request and the format, or a flag error (exit 2): an unknown
    /// state or format, a `--since` that does not parse, `--since` for
    /// pending or active.
    fn request(
        &self,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<(ExportRequest, ExportFormat), String> {
        let state: TaskState = self.state.trim().parse().map_err(|_| {
            format!(
                "--state {:?}: use active, pending, aggregating, scheduled, retry, archived or completed",
                self.state
            )
        })?;
        let format = ExportFormat::parse(&self.format)
            .ok_or_else(|| format!("--format {:?}: use ndjson or csv", self.format))?;
        let since = match &self.since {
            Some(_) if matches!(state, TaskState::Pending | TaskState::Active) => {
                return Err(format!(
                    "--since: {state} tasks have no time to compare with; use it with --state scheduled, retry, archived, completed or aggregating"
                ));
            }
            Some(s) => Some(parse_since(s, now).map_err(|e| format!("--{e}"))?),
            None => None,
        };
        let req = ExportRequest {
            queue: self.queue.clone(),
            state,
            group: self.group.clone(),
            filter: TabFilter {
                task_type: self.task_type.clone().unwrap_or_default(),
                payload: self.payload_contains.clone().unwrap_or_default(),
                ..TabFilter::default()
            },
            since,
        };
        Ok((req, format))
    }
}

/// Runs `asynqdeck export` (see the module docs) and returns its exit code.
pub fn run(args: &ExportArgs) -> ExitCode {
    let config = match args.serve.resolve() {
        Ok(c) => c,
        Err(msg) => return fail(2, msg),
    };
    let (req, format) = match args.request(chrono::Utc::now()) {
        Ok(r) => r,
        Err(msg) => return fail(2, msg),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(1, format!("cannot start the Tokio runtime: {e}")),
    };
    runtime.block_on(async move {
        let options = match crate::app::connect_options(&config) {
            Ok(o) => o,
            Err(e) => return fail(1, e),
        };
        let broker = match Broker::connect_with(&options).await {
            Ok(b) => b,
            Err(e) => return fail(1, format!("cannot connect to Redis: {e}")),
        };
        let out: Box<dyn Write> = match &args.output {
            Some(path) => match std::fs::File::create(path) {
                Ok(f) => Box::new(f),
                Err(e) => return fail(1, format!("cannot write {}: {e}", path.display())),
            },
            None => Box::new(std::io::stdout().lock()),
        };
        write_export(&Inspector::from_broker(broker), req, format, out).await
    })
}

/// Streams the export into `out`, chunk by chunk.
async fn write_export(
    inspector: &Inspector,
    req: ExportRequest,
    format: ExportFormat,
    out: Box<dyn Write>,
) -> ExitCode {
    let mut out = std::io::BufWriter::new(out);
    let chunks = match inspector.export_tasks(req).await {
        Ok(s) => s,
        Err(e) => return fail(1, e),
    };
    let mut chunks = std::pin::pin!(chunks);
    if let Err(e) = out.write_all(format.prologue().as_bytes()) {
        return fail(1, format!("cannot write the export: {e}"));
    }
    while let Some(chunk) = chunks.next().await {
        let rows = match chunk {
            Ok(rows) => rows,
            Err(e) => {
                let _ = out.flush();
                return fail(1, format!("export stopped: {e}"));
            }
        };
        for row in &rows {
            if let Err(e) = out.write_all(format.row(row).as_bytes()) {
                return fail(1, format!("cannot write the export: {e}"));
            }
        }
    }
    match out.flush() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(1, format!("cannot write the export: {e}")),
    }
}
