//! Every task of a tab, with the tab's filters, as a stream of bounded
//! chunks (S31: the archive export of the dashboard and of `asynqdeck
//! export`). Memory stays constant: one chunk of at most [`EXPORT_CHUNK`]
//! tasks and about [`EXPORT_CHUNK_BYTES`] of task data (one task when a
//! single task is larger) is read, handed on, and dropped before the next
//! is read.
//!
//! # Order and consistency
//! Chunks are read by position, one `list_tasks` script call each:
//!
//! - the scheduled, retry, archived, completed and aggregating zsets by
//!   rank (ascending score, as the tab). Tasks added while the export runs
//!   with a higher score than the position reached are included; a task
//!   removed *ahead of* the position (trimmed, run, deleted) shifts the
//!   ranks behind it down by one, so the task after it may be skipped once
//!   for each such removal. Tasks that stay put are all exported, once.
//! - the pending and active lists from the next-to-run end. These move
//!   while the export runs (workers take tasks, producers add them): a task
//!   may be skipped or exported twice. Export a paused queue for a
//!   consistent copy.
//!
//! A filter by id is one lookup. The type, payload and LastErr filters are
//! applied to each chunk (over the whole tab, not the first 5,000 tasks as
//! the tab's view); rows that cannot be read are always kept (as error
//! rows), since no filter can be judged on them.

use chrono::{DateTime, Utc};
use futures_util::Stream;

use super::Inspector;
use super::tab::TabFilter;
use super::tasks::{TaskRow, row_of};
use crate::error::{Error, Result};
use crate::task::TaskState;

pub use crate::export::{EXPORT_CHUNK, EXPORT_CHUNK_BYTES};

/// Which tasks to export ([`Inspector::export_tasks`]).
#[derive(Clone, Debug)]
pub struct ExportRequest {
    /// The queue.
    pub queue: String,
    /// The tab (task state).
    pub state: TaskState,
    /// Aggregating: the group; `None` takes the queue's first group, as
    /// the tab does. Ignored for other states.
    pub group: Option<String>,
    /// The tab's filters (empty: every task).
    pub filter: TabFilter,
    /// Only tasks whose zset score is at least this time: archived when
    /// archived, retry when next attempted, scheduled when due, completed
    /// when their retention ends, aggregating when added to the group.
    /// Refused for pending and active (lists have no time).
    pub since: Option<DateTime<Utc>>,
}

/// Where an export stands between two chunks.
struct Cursor {
    inspector: Inspector,
    req: ExportRequest,
    group: Option<String>,
    /// Next position (zset rank, or list index from the next-to-run end).
    pos: u64,
    done: bool,
}

impl Inspector {
    /// Starts the export of `req`: checks the queue and the request, then
    /// returns the stream of its chunks, each the rows of one read (possibly
    /// empty when the filters matched nothing in it), in tab order. A task
    /// whose msg does not decode is a [`TaskRow::Corrupt`] row. The stream
    /// yields an `Err` (and ends) when a read fails mid-way.
    ///
    /// Errors (before any chunk): [`Error::InvalidQueueName`],
    /// [`Error::QueueNotFound`], [`Error::InvalidArgument`] for `since` on
    /// pending or active, [`Error::Redis`].
    // asynqdeck addition: COMPATIBILITY.md#n1
    pub async fn export_tasks(
        &self,
        req: ExportRequest,
    ) -> Result<impl Stream<Item = Result<Vec<TaskRow>>> + Send + 'static> {
        self.broker.check_queue_name(&req.queue)?;
        if !self.broker.queue_exists(&req.queue).await? {
            return Err(Error::QueueNotFound {
                queue: req.queue.clone(),
            });
        }
        let group = if req.state == TaskState::Aggregating {
            match &req.group {
                Some(g) => Some(g.clone()),
                None => self
                    .groups_page(&req.queue, 0, 1)
                    .await?
                    .groups
                    .first()
                    .map(|g| g.group.clone()),
            }
        } else {
            None
        };
        // An aggregating tab without groups is empty.
        let no_group = req.state == TaskState::Aggregating && group.is_none();
        let pos = match req.since {
            Some(since) if !no_group => {
                self.broker
                    .export_rank_since(&req.queue, req.state, group.as_deref(), since)
                    .await?
            }
            Some(_) => 0,
            None => 0,
        };
        let cursor = Cursor {
            inspector: self.clone(),
            done: no_group,
            req,
            group,
            pos,
        };
        Ok(futures_util::stream::unfold(cursor, |mut c| async move {
            if c.done {
                return None;
            }
            let chunk = c.next_chunk().await;
            if chunk.is_err() {
                c.done = true;
            }
            Some((chunk, c))
        }))
    }
}

impl Cursor {
    /// The next chunk's rows; sets `done` at the end.
    async fn next_chunk(&mut self) -> Result<Vec<TaskRow>> {
        let req = &self.req;
        if !req.filter.id.is_empty() {
            self.done = true;
            return self.lookup().await;
        }
        let broker = &self.inspector.broker;
        let (tasks, read) = broker
            .export_chunk(
                &req.queue,
                req.state,
                self.group.as_deref(),
                self.pos,
                EXPORT_CHUNK,
                EXPORT_CHUNK_BYTES,
            )
            .await?;
        self.pos += read as u64;
        if read == 0 {
            self.done = true;
        }
        let now = broker.now();
        Ok(tasks
            .into_iter()
            .filter(|t| {
                req.since.is_none_or(|s| {
                    // The rank was computed at the start; a task added
                    // before it later is skipped here.
                    t.score.is_none_or(|score| score >= s.timestamp())
                })
            })
            .map(|t| row_of(t.id, t.msg, t.result, t.score, req.state, now))
            .filter(|row| row.task().is_none_or(|t| req.filter.matches(t)))
            .collect())
    }

    /// The filter by id: the task when it is in this tab, a corrupt row
    /// when it cannot be read, else nothing.
    async fn lookup(&self) -> Result<Vec<TaskRow>> {
        let req = &self.req;
        let id = &req.filter.id;
        let in_tab = |state: TaskState, group: &str| {
            state == req.state && self.group.as_deref().is_none_or(|g| g == group)
        };
        match self.inspector.get_task_info(&req.queue, id).await {
            Ok(t) if in_tab(t.state, &t.group) => {
                let keep = req.filter.matches(&t)
                    && req.since.is_none_or(|s| {
                        // The score of archived and completed tasks is not
                        // in TaskInfo: since does not filter them here.
                        t.next_process_at.is_none_or(|n| n >= s)
                    });
                Ok(if keep {
                    vec![TaskRow::Task(t)]
                } else {
                    Vec::new()
                })
            }
            Ok(_) | Err(Error::TaskNotFound { .. }) => Ok(Vec::new()),
            Err(e @ (Error::Corrupt { .. } | Error::FailedPrecondition(_))) => {
                Ok(vec![TaskRow::Corrupt {
                    id: id.clone(),
                    state: req.state,
                    error: e.to_string(),
                }])
            }
            Err(e) => Err(e),
        }
    }
}
