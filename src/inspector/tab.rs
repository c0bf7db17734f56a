//! Reading what one tab of a queue shows (S14, S17, S28, S29): a page of
//! its tasks, or the tasks a filter matches, or the one task a filter by
//! id finds; its LastErr summary; the ids an action on "every matching
//! task" applies to; and, for active rows, the start and deadline their
//! workers report.
//!
//! A tab is one task state of a queue (for aggregating tasks: one group).
//! A plain view is one page read. Filters (task type, payload substring,
//! LastErr group) and the summary read the tab in pages of [`SCAN_PAGE`]
//! up to [`SCAN_LIMIT`] tasks: a tab of a million tasks costs a bounded
//! read, not a full one, and the answer says how much was scanned. A
//! filter by id is one exact lookup. Go: asynq `Inspector.List*Tasks`,
//! `GetTaskInfo`, `Groups`, `Servers` (asynqmon joins active tasks with
//! the servers' worker records the same way).

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};

use super::errgroups::{self, ErrGroup};
use super::signatures::{self, ErrSignature};
use super::{GroupInfo, Inspector, Page, QueueInfo, SearchQuery, TaskRow};
use crate::error::{Error, Result};
use crate::task::{TaskInfo, TaskState};

/// Filters and the summary look at no more than this many tasks of a tab.
pub const SCAN_LIMIT: usize = 5_000;
/// Tasks read per call while scanning.
pub const SCAN_PAGE: usize = 500;
/// Most task data (payload, result and LastErr bytes) a tab's bounded scan
/// holds: past it the scan stops early, so a tab of tasks of several MB
/// is summarised from its first few tasks, not 5,000 of them in memory.
pub const SCAN_BYTES: u64 = 32 * 1024 * 1024;
/// Most bounded scans (tab summaries, filters, job previews) one process
/// runs at once; the others wait their turn, so their memory is bounded
/// too: about `SCANS_AT_ONCE` × [`SCAN_BYTES`] (16 concurrent summaries
/// of big tasks held 550 MB).
pub const SCANS_AT_ONCE: usize = 2;

/// The permits of [`SCANS_AT_ONCE`].
pub(crate) static SCANS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(SCANS_AT_ONCE);

/// Filters of a tab; an empty field filters nothing.
#[derive(Clone, Debug, Default)]
pub struct TabFilter {
    /// Exact task type.
    pub task_type: String,
    /// Exact task id (one lookup, no scan).
    pub id: String,
    /// Substring of the payload bytes (case-sensitive).
    pub payload: String,
    /// [`errgroups::group_id`] of a normalised LastErr.
    pub err: String,
    /// A search's filters (issue 17 item 1: a bulk action on a search's
    /// matches): type (exact or prefix), `error~`, `payload~`, `retried>`
    /// here; its `age>` needs the time the task entered its state, which
    /// [`Inspector::age_keeps`] reads. Its queues and states are ignored.
    pub search: Option<SearchQuery>,
}

impl TabFilter {
    /// Whether the filter needs the bounded scan (type, payload or error).
    pub fn scans(&self) -> bool {
        !self.task_type.is_empty()
            || !self.payload.is_empty()
            || !self.err.is_empty()
            || self.search.is_some()
    }

    /// Whether `t` passes the type, payload and error filters (the id
    /// filter is a lookup, not a match).
    pub fn matches(&self, t: &TaskInfo) -> bool {
        (self.task_type.is_empty() || t.task_type == self.task_type)
            && (self.payload.is_empty() || contains(&t.payload, self.payload.as_bytes()))
            && (self.err.is_empty()
                || errgroups::group_id(&errgroups::normalise(&t.last_err)) == self.err)
            && self.search.as_ref().is_none_or(|q| q.fields_match(t))
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// Which tab to read, and how.
#[derive(Clone, Copy, Debug)]
pub struct TabRequest<'a> {
    pub queue: &'a str,
    pub state: TaskState,
    /// Aggregating tab: the group asked for; `None` takes the first group.
    pub group: Option<&'a str>,
    /// The queue's statistics (a snapshot a poll interval old at most):
    /// the tab's size, which bounds the scan. `None` when unknown.
    pub stats: Option<&'a QueueInfo>,
    /// The page to show ([`Inspector::read_tab`] only).
    pub page: Page,
    /// The filters ([`Inspector::read_tab`] and
    /// [`Inspector::tab_matching_ids`]).
    pub filter: &'a TabFilter,
}

/// The start and deadline of each running task, by task id, from the
/// servers' worker records.
pub type WorkerTimes = HashMap<String, (Option<DateTime<Utc>>, Option<DateTime<Utc>>)>;

/// What a filter by id found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdLookup {
    /// The task is in this tab (it is the one row).
    InTab,
    /// The task is in the queue, in another state (or group).
    Elsewhere(TaskState),
    /// No such task in the queue.
    Missing,
    /// The task exists but cannot be read (its row is corrupt).
    Unreadable,
}

/// What a filter scan looked at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanCount {
    /// Tasks that passed the filter.
    pub matching: usize,
    /// Tasks read (at most [`SCAN_LIMIT`]).
    pub scanned: usize,
    /// Tasks in the tab by the statistics (at least `scanned`).
    pub total: usize,
}

/// What a tab shows ([`Inspector::read_tab`]).
#[derive(Debug)]
pub struct TabRead {
    /// The picker's groups, one bounded page ([`PICKER_GROUPS`]) sorted by
    /// name (aggregating tab only, else empty).
    pub groups: Vec<GroupInfo>,
    /// The group shown (aggregating tab with groups only).
    pub group: Option<String>,
    /// The rows of the page, in tab order.
    pub rows: Vec<TaskRow>,
    /// Known size of the tab, or of the filter's matches; `None` when the
    /// statistics are unknown.
    pub total: Option<usize>,
    /// Set when a filter scanned the tab.
    pub scan: Option<ScanCount>,
    /// Set when the filter named an id.
    pub lookup: Option<IdLookup>,
    /// Start and deadline of the active rows (empty for other tabs, and
    /// when the servers could not be read: those columns are then blank).
    pub workers: WorkerTimes,
}

/// Counts per task type and LastErr groups of a tab's bounded scan
/// ([`Inspector::tab_summary`]).
#[derive(Debug)]
pub struct TabSummary {
    /// The group scanned (aggregating tab with groups only).
    pub group: Option<String>,
    /// Tasks read.
    pub scanned: usize,
    /// Tasks in the tab by the statistics (at least `scanned`).
    pub total: usize,
    /// Rows that could not be read.
    pub corrupt: usize,
    /// Tasks per type, most first, ties by name.
    pub types: Vec<(String, usize)>,
    /// LastErr groups ([`errgroups::shown_for`] tabs only, else empty).
    pub error_groups: Vec<ErrGroup>,
    /// [`errgroups::verdict`] of the groups; empty when none.
    pub verdict: String,
    /// Error signatures (task type + normalised LastErr) with their first
    /// and last seen and 1 h trend, judged at the broker's now
    /// ([`errgroups::shown_for`] tabs only, else empty).
    pub signatures: Vec<ErrSignature>,
}

/// A bounded read of a tab.
struct Scan {
    /// Rows in tab order.
    rows: Vec<TaskRow>,
    /// How many tasks the tab had by the statistics (at least `rows.len()`).
    total: usize,
}

/// Groups the aggregating tab's picker lists at most: the first page of
/// a walk of the queue's groups (about this many; see
/// [`Inspector::groups_page`]). Others are reached by name (`?group=`).
pub const PICKER_GROUPS: usize = 100;

/// The groups of an aggregating tab, the one chosen, and the tab's size.
struct Scope {
    groups: Vec<GroupInfo>,
    group: Option<String>,
    total: Option<usize>,
}

/// The statistics' count of the tasks of `queue` in `state`.
pub fn state_count(info: &QueueInfo, state: TaskState) -> i64 {
    match state {
        TaskState::Active => info.active,
        TaskState::Pending => info.pending,
        TaskState::Aggregating => info.aggregating,
        TaskState::Scheduled => info.scheduled,
        TaskState::Retry => info.retry,
        TaskState::Archived => info.archived,
        TaskState::Completed => info.completed,
    }
}

impl Inspector {
    /// What the tab `req` shows: with a filter by id, the one task if it is
    /// in this tab (on page 1); with a type, payload or error filter, the
    /// page of the matches among the first [`SCAN_LIMIT`] tasks; else one
    /// page read. Corrupt tasks are rows.
    ///
    /// Errors: [`Error::InvalidQueueName`], [`Error::QueueNotFound`],
    /// [`Error::InvalidArgument`] for a zero page, [`Error::Redis`].
    pub async fn read_tab(&self, req: &TabRequest<'_>) -> Result<TabRead> {
        let Scope {
            groups,
            group,
            total: tab_total,
        } = self.tab_scope(req).await?;
        let g = group.as_deref();
        let (page, filter) = (req.page, req.filter);
        let mut total = tab_total;
        let mut scan = None;
        let mut lookup = None;
        let rows = if !filter.id.is_empty() {
            let (mut rows, found) = self.tab_lookup(req, g).await?;
            lookup = Some(found);
            total = Some(rows.len());
            if page.number > 1 {
                rows.clear();
            }
            rows
        } else if filter.scans() {
            let scanned = self.scan_tab(req.queue, req.state, g, tab_total).await?;
            let (count, of) = (scanned.rows.len(), scanned.total);
            let matching: Vec<TaskRow> = scanned
                .rows
                .into_iter()
                .filter(|r| r.task().is_some_and(|t| filter.matches(t)))
                .collect();
            scan = Some(ScanCount {
                matching: matching.len(),
                scanned: count,
                total: of,
            });
            total = Some(matching.len());
            let offset = (page.number - 1).saturating_mul(page.size);
            matching.into_iter().skip(offset).take(page.size).collect()
        } else {
            self.list_tab_page(req.queue, req.state, g, page).await?
        };
        // The list call checked the queue; a filter by id did through its lookup.
        let workers = if req.state == TaskState::Active && !rows.is_empty() {
            // A failing read only costs the start and deadline columns.
            self.active_worker_times(None).await.unwrap_or_default()
        } else {
            WorkerTimes::new()
        };
        Ok(TabRead {
            groups,
            group,
            rows,
            total,
            scan,
            lookup,
            workers,
        })
    }

    /// Counts per type and, for the retry and archived tabs, the LastErr
    /// groups and their verdict, over the first [`SCAN_LIMIT`] tasks of the
    /// tab (`req.page` and `req.filter` are not used). An aggregating tab
    /// without groups is empty.
    ///
    /// Errors: as [`Inspector::read_tab`].
    pub async fn tab_summary(&self, req: &TabRequest<'_>) -> Result<TabSummary> {
        let scope = self.tab_scope(req).await?;
        let scanned = if req.state == TaskState::Aggregating && scope.group.is_none() {
            Scan {
                rows: Vec::new(),
                total: 0,
            }
        } else {
            self.scan_tab(req.queue, req.state, scope.group.as_deref(), scope.total)
                .await?
        };
        let mut types: BTreeMap<String, usize> = BTreeMap::new();
        let mut corrupt = 0;
        for row in &scanned.rows {
            match row.task() {
                Some(t) => *types.entry(t.task_type.clone()).or_default() += 1,
                None => corrupt += 1,
            }
        }
        let mut types: Vec<(String, usize)> = types.into_iter().collect();
        types.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let error_groups = if errgroups::shown_for(req.state) {
            errgroups::group(
                scanned
                    .rows
                    .iter()
                    .filter_map(TaskRow::task)
                    .map(|t| (t.id.as_str(), t.last_err.as_str())),
            )
        } else {
            Vec::new()
        };
        let verdict = errgroups::verdict(&error_groups, scanned.rows.len() - corrupt);
        let signatures = if errgroups::shown_for(req.state) {
            signatures::of_tasks(scanned.rows.iter().filter_map(TaskRow::task), self.now())
        } else {
            Vec::new()
        };
        Ok(TabSummary {
            signatures,
            group: scope.group,
            scanned: scanned.rows.len(),
            total: scanned.total,
            corrupt,
            types,
            error_groups,
            verdict,
        })
    }

    /// The ids of the tasks `req.filter` matches among the first
    /// [`SCAN_LIMIT`] tasks of the tab, in tab order; `None` for an
    /// aggregating tab of a queue without groups.
    ///
    /// Errors: as [`Inspector::read_tab`].
    pub async fn tab_matching_ids(&self, req: &TabRequest<'_>) -> Result<Option<Vec<String>>> {
        let scope = self.tab_scope(req).await?;
        if req.state == TaskState::Aggregating && scope.group.is_none() {
            return Ok(None);
        }
        let scanned = self
            .scan_tab(req.queue, req.state, scope.group.as_deref(), scope.total)
            .await?;
        Ok(Some(
            scanned
                .rows
                .iter()
                .filter_map(TaskRow::task)
                .filter(|t| req.filter.matches(t))
                .map(|t| t.id.clone())
                .collect(),
        ))
    }

    /// Start and deadline of every task a server reports running, by task
    /// id; only `queue`'s tasks when given (Go: `Servers` → `ActiveWorkers`).
    ///
    /// Errors: [`Error::Redis`].
    pub async fn active_worker_times(&self, queue: Option<&str>) -> Result<WorkerTimes> {
        Ok(self
            .servers()
            .await?
            .into_iter()
            .flat_map(|s| s.active_workers)
            .filter(|w| queue.is_none_or(|q| w.queue == q))
            .map(|w| (w.task_id, (w.started, w.deadline)))
            .collect())
    }

    /// The filter by id of `req`: one lookup. The row when the task is in
    /// this tab (its state, and `group` when given), a corrupt row when it
    /// cannot be read, else none; and what was found.
    async fn tab_lookup(
        &self,
        req: &TabRequest<'_>,
        group: Option<&str>,
    ) -> Result<(Vec<TaskRow>, IdLookup)> {
        let id = &req.filter.id;
        Ok(match self.get_task_info(req.queue, id).await {
            Ok(t) if t.state == req.state && group.is_none_or(|g| t.group == g) => {
                (vec![TaskRow::Task(t)], IdLookup::InTab)
            }
            Ok(t) => (Vec::new(), IdLookup::Elsewhere(t.state)),
            Err(Error::TaskNotFound { .. }) => (Vec::new(), IdLookup::Missing),
            // An undecodable msg, a state field no version knows, or a
            // task key Redis refuses to read as a hash (WRONGTYPE): a row.
            Err(e @ (Error::Corrupt { .. } | Error::FailedPrecondition(_))) => {
                let row = TaskRow::Corrupt {
                    id: id.clone(),
                    state: req.state,
                    error: e.to_string(),
                };
                (vec![row], IdLookup::Unreadable)
            }
            Err(e @ Error::Redis(_)) if !e.is_redis_unavailable() => {
                let row = TaskRow::Corrupt {
                    id: id.clone(),
                    state: req.state,
                    error: e.to_string(),
                };
                (vec![row], IdLookup::Unreadable)
            }
            Err(e) => return Err(e),
        })
    }

    /// The read every tab call starts with: the aggregating tab's groups
    /// and the group chosen, and the tab's size (the chosen group's size
    /// for the aggregating tab, 0 without groups; else the statistics'
    /// count, `None` when unknown).
    async fn tab_scope(&self, req: &TabRequest<'_>) -> Result<Scope> {
        if req.state != TaskState::Aggregating {
            return Ok(Scope {
                groups: Vec::new(),
                group: None,
                total: req.stats.map(|i| state_count(i, req.state).max(0) as usize),
            });
        }
        // The picker's groups: one bounded page, not every group (issue 15).
        let groups = self.groups_page(req.queue, 0, PICKER_GROUPS).await?.groups;
        let group = req
            .group
            .map(str::to_string)
            .or_else(|| groups.first().map(|g| g.group.clone()));
        let total = match group.as_deref() {
            None => 0,
            Some(g) => match groups.iter().find(|x| x.group == g) {
                Some(x) => x.size.max(0) as usize,
                // A group past the picker's page: its own ZCARD.
                None => self.group_size(req.queue, g).await?.max(0) as usize,
            },
        };
        let total = Some(total);
        Ok(Scope {
            groups,
            group,
            total,
        })
    }

    /// Lists one page of the tab (the aggregating tab without groups lists
    /// the empty group "", which still checks that the queue exists).
    async fn list_tab_page(
        &self,
        queue: &str,
        state: TaskState,
        group: Option<&str>,
        page: Page,
    ) -> Result<Vec<TaskRow>> {
        if state == TaskState::Aggregating {
            self.list_aggregating_tasks(queue, group.unwrap_or(""), page)
                .await
        } else {
            self.list_tasks(queue, state, page).await
        }
    }

    /// Reads up to [`SCAN_LIMIT`] tasks of the tab, [`SCAN_PAGE`] per call
    /// at most and [`PAGE_READ_BYTES`](crate::broker::PAGE_READ_BYTES) of
    /// task data per call, stopping once it holds [`SCAN_BYTES`]. `total`
    /// (from the statistics) stops the scan early when known.
    ///
    /// Errors: [`Error::QueueNotFound`], [`Error::InvalidArgument`] for
    /// aggregating without a group, [`Error::Redis`].
    async fn scan_tab(
        &self,
        queue: &str,
        state: TaskState,
        group: Option<&str>,
        total: Option<usize>,
    ) -> Result<Scan> {
        self.broker.check_queue_name(queue)?;
        let _turn = SCANS
            .acquire()
            .await
            .map_err(|e| Error::Internal(e.to_string()))?;
        if !self.broker.queue_exists(queue).await? {
            return Err(Error::QueueNotFound {
                queue: queue.to_string(),
            });
        }
        let mut rows: Vec<TaskRow> = Vec::new();
        let (mut offset, mut bytes) = (0usize, 0u64);
        while offset < SCAN_LIMIT && bytes < SCAN_BYTES {
            let want = (SCAN_LIMIT - offset).min(SCAN_PAGE);
            let (batch, ids, stopped) = self
                .read_tasks_from(
                    queue,
                    state,
                    group,
                    offset,
                    want,
                    crate::broker::PAGE_READ_BYTES,
                )
                .await?;
            offset += ids;
            bytes += batch.iter().map(TaskRow::data_bytes).sum::<u64>();
            rows.extend(batch);
            // A read the byte budget did not stop that came back short is
            // the end; so is the size the statistics (a poll interval old
            // at most) give.
            if ids == 0 || (!stopped && ids < want) || total.is_some_and(|t| offset >= t) {
                break;
            }
        }
        let total = total.unwrap_or(0).max(rows.len());
        Ok(Scan { rows, total })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Type, payload substring and error group must all match; an empty
    /// filter matches everything and does not scan.
    #[test]
    fn filter_matching() {
        let t = TaskInfo {
            id: "a".into(),
            queue: "q".into(),
            task_type: "email:send".into(),
            payload: b"{\"to\":\"x@y\"}".to_vec(),
            headers: Default::default(),
            state: TaskState::Retry,
            max_retry: 25,
            retried: 1,
            last_err: "dial tcp 10.0.0.1:25: refused".into(),
            last_failed_at: None,
            timeout: std::time::Duration::from_secs(1800),
            deadline: None,
            group: String::new(),
            next_process_at: None,
            is_orphaned: false,
            retention: std::time::Duration::ZERO,
            completed_at: None,
            result: None,
        };
        let none = TabFilter::default();
        assert!(!none.scans() && none.matches(&t));
        let f = TabFilter {
            task_type: "email:send".into(),
            payload: "x@y".into(),
            err: errgroups::group_id("dial tcp <ip>:<n>: refused"),
            ..TabFilter::default()
        };
        assert!(f.scans() && f.matches(&t));
        let other = TabFilter {
            payload: "nobody".into(),
            ..TabFilter::default()
        };
        assert!(!other.matches(&t));
        let by_id = TabFilter {
            id: "a".into(),
            ..TabFilter::default()
        };
        assert!(!by_id.scans());
    }
}
