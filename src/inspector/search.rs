//! Search across queues and states (issue 17 item 1): a bounded, resumable
//! scan of the (queue, state) containers a [`SearchQuery`] names.
//!
//! The scan visits the queues in scope sorted by name and, in each, the
//! states in [`SEARCH_STATES`] order; it reads each container in listing
//! order (the tab's order) one page at a time, the same page reads as a
//! queue tab ([`Inspector::list_tasks`]). One call reads at most its budget
//! of tasks (at most [`SEARCH_BUDGET`]) and answers the matches found with
//! a [`SearchCursor`] where the next call resumes. Containers the
//! statistics snapshot counts as empty are skipped without a Redis call, so
//! thousands of empty queues cost no reads.
//!
//! The cursor is a position (queue name, state, offset in the container):
//! on a set that does not change, consecutive calls see every task once.
//! Tasks that move while a scan is under way (run, retried, deleted) may be
//! missed or seen twice, as when paging a tab.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::search_query::{SEARCH_STATES, SearchQuery};
use super::tab::state_count;
use super::{Inspector, QueueInfo, SCAN_PAGE, Snapshot, TaskRow};
use crate::broker::PAGE_READ_BYTES;
use crate::error::{Error, Result};
use crate::task::{TaskInfo, TaskState};

/// Most tasks one search call reads.
pub const SEARCH_BUDGET: usize = 2_000;
/// Most reads (listing script calls) one search call makes, however small
/// the containers.
pub const SEARCH_MAX_READS: usize = 200;
/// Most task data (msg and result bytes) one search call reads: past it
/// the step ends with a cursor, so a step over big tasks holds about this
/// much (plus one read of at most [`PAGE_READ_BYTES`] or one task), not
/// 2,000 tasks of several MB.
pub const SEARCH_STEP_BYTES: u64 = 8 * 1024 * 1024;

/// Largest offset and scanned count a cursor may carry (2^40 tasks: far
/// past any Redis container).
const MAX_CURSOR_COUNT: usize = 1 << 40;

/// Where a search resumes: the next container position to read, the page
/// size of the scan, and the tasks read by the calls before.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchCursor {
    /// The queue being scanned (the scan goes on with the first queue in
    /// scope at or after this name).
    pub queue: String,
    /// The state being scanned in that queue.
    pub state: TaskState,
    /// Offset in the container (tasks before it in tab order).
    pub offset: usize,
    /// Most tasks per read, fixed for the whole scan (1..=[`SCAN_PAGE`]);
    /// a read of big tasks takes fewer.
    pub chunk: usize,
    /// Tasks read by the calls before this one.
    pub scanned: usize,
}

impl SearchCursor {
    /// The cursor as an opaque URL-safe string.
    pub fn encode(&self) -> String {
        hex::encode(format!(
            "1\n{}\n{}\n{}\n{}\n{}",
            self.state.as_str(),
            self.offset,
            self.chunk,
            self.scanned,
            self.queue
        ))
    }

    /// Reads an [`SearchCursor::encode`]d cursor. Errors with
    /// [`Error::InvalidArgument`] for anything else.
    pub fn decode(s: &str) -> Result<SearchCursor> {
        let bad = || Error::InvalidArgument(format!("bad search cursor {s:?}"));
        let bytes = hex::decode(s.trim()).map_err(|_| bad())?;
        let text = String::from_utf8(bytes).map_err(|_| bad())?;
        let mut parts = text.splitn(6, '\n');
        let mut next = || parts.next().ok_or_else(bad);
        if next()? != "1" {
            return Err(bad());
        }
        let state: TaskState = next()?.parse().map_err(|_| bad())?;
        let offset: usize = next()?.parse().map_err(|_| bad())?;
        let chunk: usize = next()?.parse().map_err(|_| bad())?;
        let scanned: usize = next()?.parse().map_err(|_| bad())?;
        let queue = next()?.to_string();
        if !SEARCH_STATES.contains(&state)
            || chunk == 0
            || chunk > SCAN_PAGE
            // No container holds more; bounds keep the page arithmetic
            // from overflowing on a crafted cursor.
            || offset > MAX_CURSOR_COUNT
            || scanned > MAX_CURSOR_COUNT
        {
            return Err(bad());
        }
        Ok(SearchCursor {
            queue,
            state,
            offset,
            chunk,
            scanned,
        })
    }
}

/// One match.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchHit {
    /// The queue it is in.
    pub queue: String,
    /// The state (container) it was found in.
    pub state: TaskState,
    /// The task, or a corrupt row (always listed: whether it matches
    /// cannot be told).
    pub row: TaskRow,
    /// When it entered its state, as [`SearchQuery::older_than`] reads it;
    /// `None` when the data holds no such time.
    pub since: Option<DateTime<Utc>>,
}

/// What one search call found.
#[derive(Clone, Debug)]
pub struct SearchPage {
    /// The matches, in scan order.
    pub hits: Vec<SearchHit>,
    /// Tasks read by this call.
    pub scanned_now: usize,
    /// Tasks read by the scan so far, this call included.
    pub scanned: usize,
    /// Tasks in scope by the statistics snapshot: the sizes of the states
    /// in scope summed over the queues in scope (queues without statistics
    /// count 0), and never less than `scanned`.
    pub total: usize,
    /// Where the next call resumes; `None` when the scan is complete.
    pub cursor: Option<SearchCursor>,
    /// Containers this call could not read and skipped (a key of the wrong
    /// type, say), as `<queue> <state>: <error>`.
    pub errors: Vec<String>,
}

impl Inspector {
    /// Runs one bounded step of the search `query`: from `cursor` (or the
    /// start), reads at most `budget` tasks (clamped to 1..=[`SEARCH_BUDGET`];
    /// a resumed scan keeps its page size) and returns the matches. The
    /// queues in scope are the query's, or every queue of `snapshot`; the
    /// snapshot's counts skip empty containers and make the total. A queue
    /// named but unknown is skipped.
    ///
    /// Errors: [`Error::InvalidQueueName`] for a blank or (on a cluster)
    /// unusable queue name, [`Error::Redis`].
    pub async fn search(
        &self,
        query: &SearchQuery,
        snapshot: &Snapshot,
        cursor: Option<&SearchCursor>,
        budget: usize,
    ) -> Result<SearchPage> {
        let budget = budget.clamp(1, SEARCH_BUDGET);
        let counts: HashMap<&str, Option<&QueueInfo>> = snapshot
            .queues
            .iter()
            .map(|r| (r.name.as_str(), r.info.as_ref().ok()))
            .collect();
        let queues: Vec<String> = if !query.queues.is_empty() {
            query.queues.clone()
        } else if snapshot.error.is_some() {
            self.queues().await?
        } else {
            snapshot.queues.iter().map(|r| r.name.clone()).collect()
        };
        for q in &queues {
            self.broker.check_queue_name(q)?;
        }
        let states = query.scope_states();
        let info_of = |q: &str| counts.get(q).copied().flatten();
        let total: usize = queues
            .iter()
            .filter_map(|q| info_of(q))
            .map(|i| {
                states
                    .iter()
                    .map(|s| state_count(i, *s).max(0) as usize)
                    .sum::<usize>()
            })
            .sum();

        let chunk = cursor.map_or(budget.min(SCAN_PAGE), |c| c.chunk);
        let scanned_before = cursor.map_or(0, |c| c.scanned);
        let first_queue = match cursor {
            Some(c) => queues.partition_point(|q| q.as_str() < c.queue.as_str()),
            None => 0,
        };
        let mut out = SearchPage {
            hits: Vec::new(),
            scanned_now: 0,
            scanned: scanned_before,
            total,
            cursor: None,
            errors: Vec::new(),
        };
        let (mut reads, mut bytes) = (0, 0u64);
        for queue in &queues[first_queue..] {
            // Resume inside the cursor's queue; any later queue starts over.
            let resume = cursor.filter(|c| &c.queue == queue);
            let first_state = resume.map_or(0, |c| {
                states.iter().position(|s| *s == c.state).unwrap_or(0)
            });
            let info = info_of(queue);
            'states: for (i, &state) in states.iter().enumerate().skip(first_state) {
                let count = info.map(|i| state_count(i, state).max(0) as usize);
                if count == Some(0) {
                    continue;
                }
                let mut offset = match resume {
                    Some(c) if i == first_state && c.state == state => c.offset,
                    _ => 0,
                };
                loop {
                    // The next read's size: a page, or what the statistics
                    // say is left of the container.
                    let next = count.map_or(chunk, |t| t.saturating_sub(offset).clamp(1, chunk));
                    let full = out.scanned_now + next > budget
                        || reads == SEARCH_MAX_READS
                        || bytes >= SEARCH_STEP_BYTES;
                    if reads > 0 && full {
                        out.cursor = Some(SearchCursor {
                            queue: queue.clone(),
                            state,
                            offset,
                            chunk,
                            scanned: out.scanned,
                        });
                        out.total = out.total.max(out.scanned);
                        return Ok(out);
                    }
                    let budget_left = SEARCH_STEP_BYTES.saturating_sub(bytes);
                    let read = self
                        .read_tasks_from(
                            queue,
                            state,
                            None,
                            offset,
                            next,
                            PAGE_READ_BYTES.min(budget_left).max(1),
                        )
                        .await;
                    let (rows, ids, stopped) = match read {
                        Ok(r) => r,
                        // Deleted since, or never there: nothing to find.
                        Err(Error::QueueNotFound { .. }) => break 'states,
                        // Data Redis cannot read as a container: skipped, said.
                        Err(e) if unreadable(&e) => {
                            reads += 1;
                            out.errors.push(format!("{queue} {state}: {e}"));
                            break;
                        }
                        Err(e) => return Err(e),
                    };
                    reads += 1;
                    offset += ids;
                    bytes += rows.iter().map(TaskRow::data_bytes).sum::<u64>();
                    let n = rows.len();
                    out.scanned_now += n;
                    out.scanned += n;
                    self.collect_hits(query, queue, state, rows, &mut out.hits)
                        .await?;
                    // The end: nothing read, the container's size in the
                    // statistics reached, or (without statistics) a read
                    // the byte budget did not cut short that came back
                    // short.
                    if ids == 0 || count.map_or(!stopped && ids < next, |t| offset >= t) {
                        break;
                    }
                }
            }
        }
        out.total = out.total.max(out.scanned);
        Ok(out)
    }

    /// Adds the rows of one page that match `query` to `hits` (corrupt
    /// rows always), reading `pending_since` for pending tasks.
    async fn collect_hits(
        &self,
        query: &SearchQuery,
        queue: &str,
        state: TaskState,
        rows: Vec<TaskRow>,
        hits: &mut Vec<SearchHit>,
    ) -> Result<()> {
        let error = query.error.as_deref().map(str::to_lowercase);
        let rows: Vec<TaskRow> = rows
            .into_iter()
            .filter(|r| {
                r.task()
                    .is_none_or(|t| matches_fields(query, error.as_deref(), t))
            })
            .collect();
        let of: Vec<(&str, Option<&TaskInfo>)> = rows.iter().map(|r| (r.id(), r.task())).collect();
        let since = self.entered_at(queue, state, &of).await?;
        let cutoff = self.age_cutoff(query);
        for (row, since) in rows.into_iter().zip(since) {
            let old_enough = match (cutoff, row.task()) {
                (Some(cut), Some(_)) => since.is_some_and(|s| s < cut),
                _ => true,
            };
            if old_enough {
                hits.push(SearchHit {
                    queue: queue.to_string(),
                    state,
                    row,
                    since,
                });
            }
        }
        Ok(())
    }
}

/// The type, error (`error`: the query's, lower-cased), payload and
/// retried filters (the age filter needs the time, [`SearchHit::since`]).
fn matches_fields(q: &SearchQuery, error: Option<&str>, t: &TaskInfo) -> bool {
    q.type_matches(&t.task_type)
        && error.is_none_or(|e| t.last_err.to_lowercase().contains(e))
        && q.payload
            .as_deref()
            .is_none_or(|p| contains(&t.payload, p.as_bytes()))
        && q.retried_over.is_none_or(|n| t.retried > n)
}

impl SearchQuery {
    /// Whether `t` passes the type, error, payload and retried filters
    /// (not the age filter: [`Inspector::age_keeps`]).
    pub fn fields_match(&self, t: &TaskInfo) -> bool {
        let error = self.error.as_deref().map(str::to_lowercase);
        matches_fields(self, error.as_deref(), t)
    }
}

impl Inspector {
    /// For each of `tasks` (of `queue`'s `state`), whether it passes
    /// `query`'s age filter, as the search reads it ([`SearchQuery::older_than`]):
    /// all true without one; pending tasks by `pending_since` (one
    /// pipelined read). Errors: [`Error::Redis`].
    pub async fn age_keeps(
        &self,
        query: &SearchQuery,
        queue: &str,
        state: TaskState,
        tasks: &[&TaskInfo],
    ) -> Result<Vec<bool>> {
        let Some(cutoff) = self.age_cutoff(query) else {
            return Ok(vec![true; tasks.len()]);
        };
        let of: Vec<(&str, Option<&TaskInfo>)> =
            tasks.iter().map(|t| (t.id.as_str(), Some(*t))).collect();
        let since = self.entered_at(queue, state, &of).await?;
        Ok(since
            .into_iter()
            .map(|s| s.is_some_and(|s| s < cutoff))
            .collect())
    }

    /// When each of `tasks` (id, and the task when readable) of `queue`'s
    /// `state` entered it, as [`SearchQuery::older_than`] reads it: pending
    /// tasks by `pending_since` (one pipelined read), others from the task
    /// ([`since_of`]). Errors: [`Error::Redis`].
    async fn entered_at(
        &self,
        queue: &str,
        state: TaskState,
        tasks: &[(&str, Option<&TaskInfo>)],
    ) -> Result<Vec<Option<DateTime<Utc>>>> {
        if state == TaskState::Pending {
            let ids: Vec<&str> = tasks.iter().map(|(id, _)| *id).collect();
            return Ok(self
                .broker
                .pending_since(queue, &ids)
                .await?
                .into_iter()
                .map(|ns| ns.map(DateTime::from_timestamp_nanos))
                .collect());
        }
        Ok(tasks
            .iter()
            .map(|(_, t)| t.and_then(|t| since_of(state, t)))
            .collect())
    }

    /// The time before which a task entered its state to pass `query`'s
    /// age filter; `None` without one. An age past the representable range
    /// gives the earliest instant (nothing matches).
    fn age_cutoff(&self, query: &SearchQuery) -> Option<DateTime<Utc>> {
        query.older_than.map(|d| {
            chrono::Duration::from_std(d)
                .ok()
                .and_then(|d| self.now().checked_sub_signed(d))
                .unwrap_or(DateTime::<chrono::Utc>::MIN_UTC)
        })
    }
}

/// An error of the data (a key of the wrong type, a corrupt value), not of
/// the connection to Redis.
fn unreadable(e: &Error) -> bool {
    match e {
        Error::Corrupt { .. } | Error::FailedPrecondition(_) => true,
        Error::Redis(_) => !e.is_redis_unavailable(),
        _ => false,
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// When a listed task entered `state`, except pending (read apart):
/// scheduled, its due time; retry and archived, `LastFailedAt`;
/// completed, `CompletedAt`; active, unknown.
fn since_of(state: TaskState, t: &TaskInfo) -> Option<DateTime<Utc>> {
    match state {
        TaskState::Scheduled => t.next_process_at,
        TaskState::Retry | TaskState::Archived => t.last_failed_at,
        TaskState::Completed => t.completed_at,
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_round_trip_and_refusals() {
        let c = SearchCursor {
            queue: "we ird\nq".into(),
            state: TaskState::Retry,
            offset: 1_000,
            chunk: 500,
            scanned: 4_321,
        };
        assert_eq!(SearchCursor::decode(&c.encode()).unwrap(), c);
        for s in ["", "zz", &hex::encode("1\nretry\n7\n0\n0\nq")] {
            assert!(SearchCursor::decode(s).is_err(), "{s}");
        }
        let agg = hex::encode("1\naggregating\n0\n5\n0\nq");
        assert!(SearchCursor::decode(&agg).is_err());
    }
}
