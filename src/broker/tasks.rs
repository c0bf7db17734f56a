//! Task listing and lookup, and the containers tasks live in (task
//! changes: `task_actions.rs`).
//!
//! Go: `internal/rdb/inspect.go` (`ListPending`, `listZSetEntries`,
//! `GetTaskInfo`; wire spec §9.1, §9.2). Listings take a [`Page`] and
//! decide its Redis ranges here (Go `rdb.Pagination`).
//!
//! Each method first checks `SISMEMBER asynq:queues <queue>` (a separate
//! command, as Go: global and per-queue keys never meet in one script).

use super::{Broker, Page, decode_task, keys, proto::TaskMessage, scripts};
use crate::error::{Error, Result};
use crate::task::TaskState;

/// The list or zset holding the ids of one set of tasks of a queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Container<'a> {
    /// The container named after a state: the `pending` or `active` list, or
    /// the `scheduled`, `retry`, `archived` or `completed` zset. Never
    /// [`TaskState::Aggregating`] (use [`Container::Group`]).
    State(TaskState),
    /// The zset `asynq:{q}:g:<group>` of one group's aggregating tasks.
    Group(&'a str),
}

impl<'a> Container<'a> {
    /// `Group(g)` when a group is named, else `State(state)`.
    pub(super) fn of(state: TaskState, group: Option<&'a str>) -> Self {
        match group {
            Some(g) => Container::Group(g),
            None => Container::State(state),
        }
    }

    /// The state of every task in the container.
    pub(super) fn state(&self) -> TaskState {
        match self {
            Container::State(s) => *s,
            Container::Group(_) => TaskState::Aggregating,
        }
    }

    /// The container's key. Errors with [`Error::InvalidArgument`] for
    /// `State(Aggregating)`, which names no single container.
    pub(super) fn key(&self, queue: &str) -> Result<String> {
        Ok(match self {
            Container::State(TaskState::Pending) => keys::pending_key(queue),
            Container::State(TaskState::Active) => keys::active_key(queue),
            Container::State(TaskState::Scheduled) => keys::scheduled_key(queue),
            Container::State(TaskState::Retry) => keys::retry_key(queue),
            Container::State(TaskState::Archived) => keys::archived_key(queue),
            Container::State(TaskState::Completed) => keys::completed_key(queue),
            Container::State(TaskState::Aggregating) => {
                return Err(Error::InvalidArgument(
                    "aggregating tasks live in groups: name the group".into(),
                ));
            }
            Container::Group(group) => keys::group_key(queue, group),
        })
    }

    /// `"list"` for pending and active, `"zset"` otherwise (script argument).
    pub(super) fn kind(&self) -> &'static str {
        match self {
            Container::State(TaskState::Pending | TaskState::Active) => "list",
            _ => "zset",
        }
    }
}

/// One element of a listing page, decoded as far as the data allows.
#[derive(Debug)]
pub(crate) struct ListedTask {
    /// The id as stored in the container.
    pub id: String,
    /// The decoded `msg`; [`Error::Corrupt`] when it is absent or does not decode.
    pub msg: Result<TaskMessage>,
    /// The hash's `result` field, when present.
    pub result: Option<Vec<u8>>,
    /// The zset score (whole unix seconds), or the lease expiry when listing
    /// active tasks; `None` for pending and when absent.
    pub score: Option<i64>,
}

/// What one [`Broker::list_range_bounded`] call read.
#[derive(Debug)]
pub(crate) struct RangeRead {
    /// The rows, in walk order.
    pub rows: Vec<ListedTask>,
    /// Ids read (rows plus ids whose hash is gone).
    pub read: usize,
    /// Whether the byte budget stopped the walk before the range's end.
    pub stopped: bool,
}

/// Most msg and result bytes one page read takes from Redis: a page of
/// bigger tasks is read in several calls, each stopped by this budget
/// ([`Broker::list_task_page`]), so a page of 500 tasks of 54 KB, or 20
/// of 4 MB, is no single call of tens of MB.
pub const PAGE_READ_BYTES: u64 = 1024 * 1024;

/// A task read by [`Broker::task_info`].
#[derive(Debug)]
pub(crate) struct FoundTask {
    /// The decoded `msg`.
    pub msg: TaskMessage,
    /// The hash's `state`.
    pub state: TaskState,
    /// The score in the state's zset (whole unix seconds) for scheduled and
    /// retry tasks, the lease expiry for active ones (`None`: no lease),
    /// `None` otherwise.
    pub score: Option<i64>,
    /// The hash's `result` field, when present.
    pub result: Option<Vec<u8>>,
}

/// A Redis score (decimal string) as whole unix seconds, rounding down.
pub(super) fn score_of(bytes: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(bytes).ok()?;
    text.parse::<i64>()
        .ok()
        .or_else(|| text.parse::<f64>().ok().map(|f| f.floor() as i64))
}

/// Fails with [`Error::QueueNotFound`] unless `queue` is in `asynq:queues`.
pub(super) async fn ensure_queue(broker: &Broker, queue: &str) -> Result<()> {
    if broker.queue_exists(queue).await? {
        Ok(())
    } else {
        Err(Error::QueueNotFound {
            queue: queue.to_string(),
        })
    }
}

impl Broker {
    /// One page of the container of `state` (or of `group`'s zset when a
    /// group is named; Go `rdb.ListPending`, `listZSetEntries` with their
    /// `Pagination`). Lists (pending, active) are paged from the
    /// next-to-run end (rightmost) and come back in that order, oldest
    /// first; zsets by ascending score, ranks `size·(number−1)` to
    /// `size·number − 1`. A page past the end is empty. Ids whose hash is
    /// missing are skipped; a msg that is absent or does not decode comes
    /// back as an `Err` ([`Error::Corrupt`]). Each Redis call reads at most
    /// [`PAGE_READ_BYTES`] of task data (at least one task): a page of big
    /// tasks takes several calls, a page of small ones one.
    ///
    /// Errors: [`Error::InvalidArgument`] for a zero page number or size
    /// and for aggregating without a group, [`Error::QueueNotFound`],
    /// [`Error::Redis`].
    pub(crate) async fn list_task_page(
        &self,
        queue: &str,
        state: TaskState,
        group: Option<&str>,
        page: Page,
    ) -> Result<Vec<ListedTask>> {
        page.validate()?;
        let container = Container::of(state, group);
        // Aggregating without a group is refused before the queue check.
        container.key(queue)?;
        ensure_queue(self, queue).await?;
        let is_list = container.kind() == "list";
        let range = if is_list {
            page.list_range()
        } else {
            page.zset_range()
        };
        let Some((start, stop)) = range else {
            // Too far out for any Redis container.
            return Ok(Vec::new());
        };
        // Walked from the next-to-run end: a list from its right end, a zset
        // by ascending rank; each call goes on where the last one stopped.
        let mut out = Vec::new();
        let (mut start, mut stop) = (start, stop);
        while start <= stop {
            let r = self
                .list_range_bounded(queue, container, start, stop, PAGE_READ_BYTES, is_list)
                .await?;
            out.extend(r.rows);
            let read = i64::try_from(r.read).unwrap_or(i64::MAX);
            if !r.stopped || read == 0 {
                break;
            }
            if is_list {
                stop -= read;
            } else {
                start += read;
            }
        }
        Ok(out)
    }

    /// The tasks of `container` from `start` to `stop` inclusive (list
    /// indexes, or zset ranks by ascending score), in container order (lists
    /// left to right, or right to left when `from_right`), decoded as
    /// [`Broker::list_task_page`] does, and the number of ids read (ids
    /// whose hash is gone are not in the rows). The queue is not checked.
    ///
    /// `max_bytes` (0: no bound) bounds the msg and result bytes one call
    /// reads: the first task is always read, each next one only while the
    /// total stays within it (its size is asked before it is read), so the
    /// ids read may be fewer than the range holds; 0 of them means the
    /// range was empty; [`RangeRead::stopped`] tells whether the budget
    /// stopped the read before the range's end.
    pub(super) async fn list_range_bounded(
        &self,
        queue: &str,
        container: Container<'_>,
        start: i64,
        stop: i64,
        max_bytes: u64,
        from_right: bool,
    ) -> Result<RangeRead> {
        let key = container.key(queue)?;
        let mut inv = scripts::LIST_TASKS.prepare_invoke();
        inv.key(&key);
        if container.state() == TaskState::Active {
            inv.key(keys::lease_key(queue));
        }
        inv.arg(container.kind())
            .arg(start)
            .arg(stop)
            .arg(keys::task_key_prefix(queue))
            .arg(max_bytes)
            .arg(if from_right { "right" } else { "left" });
        let mut flat: Vec<Option<Vec<u8>>> = inv.invoke_async(&mut self.conn()).await?;
        let stopped = flat.len() % 4 == 1 && flat.last() == Some(&Some(b"more".to_vec()));
        if stopped {
            flat.pop();
        }
        if !flat.len().is_multiple_of(4) {
            return Err(Error::Internal(format!(
                "list_tasks script replied {} values, not a multiple of 4",
                flat.len()
            )));
        }
        let read = flat.len() / 4;
        let mut out = Vec::with_capacity(read);
        let mut it = flat.into_iter();
        while let (Some(id), Some(msg), Some(result), Some(score)) =
            (it.next(), it.next(), it.next(), it.next())
        {
            let id = String::from_utf8_lossy(&id.unwrap_or_default()).into_owned();
            // Go lists a missing hash as an all-empty task and drops a msg
            // that does not decode. asynq divergence: COMPATIBILITY.md#t1
            let Some(msg) = msg else {
                continue; // the hash is gone: nothing to show
            };
            let msg = listed_msg(&keys::task_key(queue, &id), &msg);
            out.push(ListedTask {
                id,
                msg,
                result: result.filter(|r| !r.is_empty()),
                score: score.as_deref().and_then(score_of),
            });
        }
        Ok(RangeRead {
            rows: out,
            read,
            stopped,
        })
    }

    /// Reads one task (Go `rdb.GetTaskInfo`).
    ///
    /// Errors: [`Error::QueueNotFound`], [`Error::TaskNotFound`],
    /// [`Error::FailedPrecondition`] `"<x>" is not supported task state` for
    /// an unknown state, [`Error::Corrupt`] when msg is absent or does not
    /// decode, [`Error::Redis`].
    pub(crate) async fn task_info(&self, queue: &str, id: &str) -> Result<FoundTask> {
        ensure_queue(self, queue).await?;
        let task_key = keys::task_key(queue, id);
        let reply: Vec<Option<Vec<u8>>> = scripts::GET_TASK_INFO
            .key(&task_key)
            .arg(id)
            .arg(keys::queue_prefix(queue))
            .invoke_async(&mut self.conn())
            .await?;
        let [msg, state, score, result]: [Option<Vec<u8>>; 4] = match reply.try_into() {
            Ok(fields) => fields,
            Err(reply) if reply.is_empty() => {
                return Err(Error::TaskNotFound {
                    queue: queue.to_string(),
                    id: id.to_string(),
                });
            }
            Err(reply) => {
                return Err(Error::Internal(format!(
                    "get_task_info script replied {} values",
                    reply.len()
                )));
            }
        };
        if let Some(kind) = msg.as_deref().and_then(|m| m.strip_prefix(b"wrongtype:")) {
            return Err(wrong_type(&task_key, kind));
        }
        let state_text = String::from_utf8_lossy(&state.unwrap_or_default()).into_owned();
        let state: TaskState = state_text.parse().map_err(Error::FailedPrecondition)?;
        // Go decodes an absent msg as an all-empty task.
        // asynq divergence: COMPATIBILITY.md#t2
        let msg = msg.ok_or_else(|| Error::Corrupt {
            key: format!("{task_key} msg"),
            reason: "the task hash has no msg".to_string(),
        })?;
        Ok(FoundTask {
            msg: decode_task(&task_key, &msg)?.msg,
            state,
            score: score.as_deref().and_then(score_of),
            result: result.filter(|r| !r.is_empty()),
        })
    }
}

/// The message of a task as the `list_tasks` script gives it (the hash
/// exists): `""` is a hash without msg, `wrongtype:<type>` a key of
/// another type, anything else the encoded message.
///
/// Errors: [`Error::Corrupt`] naming what is wrong (no msg, another type,
/// a msg that does not decode).
pub(super) fn listed_msg(task_key: &str, msg: &[u8]) -> Result<TaskMessage> {
    if msg.is_empty() {
        return Err(Error::Corrupt {
            key: format!("{task_key} msg"),
            reason: "the task hash has no msg".to_string(),
        });
    }
    if let Some(kind) = msg.strip_prefix(b"wrongtype:") {
        return Err(wrong_type(task_key, kind));
    }
    decode_task(task_key, msg).map(|w| w.msg)
}

/// The error of a task key holding `kind` (`string`, `list`, …), not a hash.
fn wrong_type(task_key: &str, kind: &[u8]) -> Error {
    Error::Corrupt {
        key: task_key.to_string(),
        reason: format!(
            "the task key is a {}, not a hash",
            String::from_utf8_lossy(kind)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_parse_as_whole_seconds() {
        assert_eq!(score_of(b"1700000000"), Some(1_700_000_000));
        assert_eq!(score_of(b"1.7e9"), Some(1_700_000_000));
        assert_eq!(score_of(b"12.9"), Some(12));
        assert_eq!(score_of(b"x"), None);
    }

    #[test]
    fn containers_name_go_keys() {
        assert_eq!(
            Container::State(TaskState::Pending).key("q").unwrap(),
            "asynq:{q}:pending"
        );
        assert_eq!(Container::Group("g").key("q").unwrap(), "asynq:{q}:g:g");
        assert_eq!(Container::Group("g").kind(), "zset");
        assert_eq!(Container::State(TaskState::Active).kind(), "list");
        assert!(matches!(
            Container::State(TaskState::Aggregating).key("q"),
            Err(Error::InvalidArgument(_))
        ));
    }
}
