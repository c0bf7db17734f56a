//! Reads of the export (S31): a tab read in bounded chunks from any
//! position, and the rank where a score starts (the cursor of the
//! engine's archive exporter: `export_cursor.rs`).
//!
//! Each call is one bounded command or one call of the `list_tasks`
//! script over at most the chunk asked for, in tasks and in bytes (the
//! callers use 500 tasks and 1 MiB: [`crate::export::EXPORT_CHUNK`],
//! [`crate::export::EXPORT_CHUNK_BYTES`]), so no call blocks Redis for
//! long whatever the size of the tab or of its tasks.

use chrono::{DateTime, Utc};

use super::Broker;
use super::tasks::{Container, ListedTask, RangeRead};
use crate::error::{Error, Result};
use crate::task::TaskState;

impl Broker {
    /// Up to `count` tasks of the container of `state` (or of `group`'s
    /// zset) from position `from` (0-based): for the pending and active
    /// lists counted from the next-to-run (right) end, in that order; for
    /// zsets the ranks by ascending score; and how many positions were read
    /// (0: the end; ids whose hash is gone have no row). The queue is not
    /// checked. Rows as [`Broker::list_task_page`].
    ///
    /// `max_bytes` (0: no bound) bounds the msg and result bytes read: the
    /// first task is always read, each next one only while the total stays
    /// within it, so fewer than `count` positions may be read before the
    /// end; the next chunk starts at `from` + the positions read.
    ///
    /// Errors: [`Error::InvalidArgument`] for aggregating without a group,
    /// [`Error::Redis`].
    pub(crate) async fn export_chunk(
        &self,
        queue: &str,
        state: TaskState,
        group: Option<&str>,
        from: u64,
        count: u64,
        max_bytes: u64,
    ) -> Result<(Vec<ListedTask>, usize)> {
        let r = self
            .read_chunk(queue, state, group, from, count, max_bytes)
            .await?;
        Ok((r.rows, r.read))
    }

    /// [`Broker::export_chunk`], also telling whether the byte budget
    /// stopped the read before `count` ids (then read on from `from` plus
    /// the ids read). The queue is not checked: a missing one reads empty.
    ///
    /// Errors: as [`Broker::export_chunk`].
    pub(crate) async fn read_chunk(
        &self,
        queue: &str,
        state: TaskState,
        group: Option<&str>,
        from: u64,
        count: u64,
        max_bytes: u64,
    ) -> Result<RangeRead> {
        let container = Container::of(state, group);
        let empty = RangeRead {
            rows: Vec::new(),
            read: 0,
            stopped: false,
        };
        let (Ok(from), Ok(count)) = (i64::try_from(from), i64::try_from(count)) else {
            return Ok(empty);
        };
        let Some(end) = from.checked_add(count) else {
            return Ok(empty);
        };
        if count == 0 {
            return Ok(empty);
        }
        if container.kind() == "list" {
            // Walked from the right end, so a byte budget stops nearest to
            // the position reached.
            self.list_range_bounded(queue, container, -end, -(from + 1), max_bytes, true)
                .await
        } else {
            self.list_range_bounded(queue, container, from, end - 1, max_bytes, false)
                .await
        }
    }

    /// The rank in the zset of `state` (or `group`) of the first task whose
    /// score is at least `since`: `ZCOUNT key -inf (since`.
    ///
    /// Errors: [`Error::InvalidArgument`] for the pending and active lists
    /// (no score) and aggregating without a group, [`Error::Redis`].
    pub(crate) async fn export_rank_since(
        &self,
        queue: &str,
        state: TaskState,
        group: Option<&str>,
        since: DateTime<Utc>,
    ) -> Result<u64> {
        let container = Container::of(state, group);
        if container.kind() == "list" {
            return Err(Error::InvalidArgument(format!(
                "{state} tasks have no time to compare with since: use scheduled, retry, archived, completed or aggregating"
            )));
        }
        let n: u64 = redis::cmd("ZCOUNT")
            .arg(container.key(queue)?)
            .arg("-inf")
            .arg(format!("({}", since.timestamp()))
            .query_async(&mut self.conn())
            .await?;
        Ok(n)
    }
}
