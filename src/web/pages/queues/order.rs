//! The overview's view of the snapshot: which queues a page shows — the
//! name filter (substring), the sort (any column, ascending or descending,
//! ties by name) and the page — as read from the query string
//! (`?q=…&sort=…&dir=…&page=…&size=…`), and the links that keep them
//! (issue 15 target 3).

use std::cmp::Ordering;

use serde::Deserialize;

use crate::inspector::MemoryEstimate;
use crate::web::state::QueueRow;
use crate::web::urls;

/// Rows per page unless `size` says otherwise.
pub const DEFAULT_PAGE_SIZE: usize = 50;
/// Most rows one page shows: a page of 150 rows of 11-character names is
/// about 245 KB (1.6 KB a row with the actions), under the 300 KB bound.
pub const MAX_PAGE_SIZE: usize = 150;

/// The query string as sent: every value optional, never a 400 (a value
/// that does not parse means its default).
#[derive(Debug, Default, Deserialize)]
pub struct OverviewQuery {
    pub page: Option<String>,
    pub size: Option<String>,
    pub sort: Option<String>,
    pub dir: Option<String>,
    pub q: Option<String>,
}

/// A column the overview sorts by; `key` is its value of `sort=`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Column {
    Name,
    State,
    Size,
    Active,
    Pending,
    Aggregating,
    Scheduled,
    Retry,
    Archived,
    Completed,
    Processed,
    Failed,
    ErrorRate,
    Memory,
    Latency,
    Growth,
}

impl Column {
    /// Every column, in the table's order.
    pub const ALL: [Column; 16] = [
        Column::Name,
        Column::State,
        Column::Size,
        Column::Active,
        Column::Pending,
        Column::Aggregating,
        Column::Scheduled,
        Column::Retry,
        Column::Archived,
        Column::Completed,
        Column::Processed,
        Column::Failed,
        Column::ErrorRate,
        Column::Memory,
        Column::Latency,
        Column::Growth,
    ];

    /// Its value of `sort=`.
    pub fn key(self) -> &'static str {
        match self {
            Column::Name => "name",
            Column::State => "state",
            Column::Size => "size",
            Column::Active => "active",
            Column::Pending => "pending",
            Column::Aggregating => "aggregating",
            Column::Scheduled => "scheduled",
            Column::Retry => "retry",
            Column::Archived => "archived",
            Column::Completed => "completed",
            Column::Processed => "processed",
            Column::Failed => "failed",
            Column::ErrorRate => "error_rate",
            Column::Memory => "memory",
            Column::Latency => "latency",
            Column::Growth => "growth",
        }
    }

    fn parse(s: &str) -> Option<Column> {
        Column::ALL.into_iter().find(|c| c.key() == s)
    }

    /// The direction a first click on its header sorts by: names A→Z,
    /// numbers largest first.
    pub fn default_desc(self) -> bool {
        self != Column::Name
    }
}

/// A sort key of one row: a number (integers are exact in f64 up to 2^53)
/// or, for a row whose statistics failed, nothing (such rows come last in
/// either direction).
fn value(row: &QueueRow, col: Column) -> Option<f64> {
    let i = row.info.as_ref().ok()?;
    let n = |v: i64| Some(v as f64);
    match col {
        Column::Name => Some(0.0),
        Column::State => Some(if i.paused { 1.0 } else { 0.0 }),
        Column::Size => n(i.size),
        Column::Active => n(i.active),
        Column::Pending => n(i.pending),
        Column::Aggregating => n(i.aggregating),
        Column::Scheduled => n(i.scheduled),
        Column::Retry => n(i.retry),
        Column::Archived => n(i.archived),
        Column::Completed => n(i.completed),
        Column::Processed => n(i.processed),
        Column::Failed => n(i.failed),
        Column::ErrorRate => Some(if i.processed > 0 {
            i.failed as f64 / i.processed as f64
        } else {
            0.0
        }),
        // Not estimated yet or failed: below every estimate.
        Column::Memory => Some(match &row.memory {
            Some(MemoryEstimate { bytes: Ok(b), .. }) => *b as f64,
            _ => -1.0,
        }),
        Column::Latency => Some(i.latency.as_secs_f64()),
        // No growth figures: below every figure.
        Column::Growth => Some(
            row.growth
                .map(|g| g.last_5m.delta() as f64)
                .unwrap_or(f64::NEG_INFINITY),
        ),
    }
}

/// What a request asks the overview to show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overview {
    /// 1-based page, at most the last page.
    pub page: usize,
    pub size: usize,
    pub sort: Column,
    pub desc: bool,
    /// The name filter: a queue shows when its name contains it (case
    /// sensitive, as queue names are); empty: every queue.
    pub filter: String,
}

impl Overview {
    /// The view `q` asks for (defaults for what is missing or does not
    /// parse; `size` clamped to 1..=[`MAX_PAGE_SIZE`]; `page` ≥ 1, clamped to
    /// the last page by [`Overview::select`]).
    pub fn of(q: &OverviewQuery) -> Overview {
        let sort = q
            .sort
            .as_deref()
            .and_then(Column::parse)
            .unwrap_or(Column::Name);
        let desc = match q.dir.as_deref() {
            Some("desc") => true,
            Some("asc") => false,
            _ => sort.default_desc() && q.sort.is_some(),
        };
        Overview {
            page: q
                .page
                .as_deref()
                .and_then(|p| p.trim().parse().ok())
                .unwrap_or(1usize)
                .max(1),
            size: q
                .size
                .as_deref()
                .and_then(|p| p.trim().parse().ok())
                .unwrap_or(DEFAULT_PAGE_SIZE)
                .clamp(1, MAX_PAGE_SIZE),
            sort,
            desc,
            filter: q.q.clone().unwrap_or_default().trim().to_string(),
        }
    }

    /// The rows matching the filter, sorted, and the page's slice of them:
    /// `(matching rows, the page's rows)`. Clamps `page` to the last page.
    pub fn select<'a>(&mut self, rows: &'a [QueueRow]) -> (usize, Vec<&'a QueueRow>) {
        let mut matching: Vec<&QueueRow> = rows
            .iter()
            .filter(|r| self.filter.is_empty() || r.name.contains(&self.filter))
            .collect();
        let n = matching.len();
        self.page = self.page.min(self.pages(n));
        let (col, desc) = (self.sort, self.desc);
        let cmp = |a: &&QueueRow, b: &&QueueRow| {
            let by_value = match (value(a, col), value(b, col)) {
                (Some(x), Some(y)) => {
                    let o = x.partial_cmp(&y).unwrap_or(Ordering::Equal);
                    if desc { o.reverse() } else { o }
                }
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (None, None) => Ordering::Equal,
            };
            let by_name = if col == Column::Name && desc {
                b.name.cmp(&a.name)
            } else {
                a.name.cmp(&b.name)
            };
            by_value.then(by_name)
        };
        let from = (self.page - 1) * self.size;
        let to = (from + self.size).min(n);
        if to < n && from < n {
            // Only the page's rows need their order: partition, then sort
            // the slice (O(n) + O(size log size)).
            matching.select_nth_unstable_by(to, cmp);
            matching.truncate(to);
        }
        matching.sort_unstable_by(cmp);
        let page = matching.get(from..to).unwrap_or(&[]).to_vec();
        (n, page)
    }

    /// Pages for `n` matching rows (at least 1).
    pub fn pages(&self, n: usize) -> usize {
        n.div_ceil(self.size).max(1)
    }

    /// The query string (with `?`) of this view at `page`, sorted by
    /// `sort`/`desc`: what links and the live refresh carry.
    /// The default view (page 1 by name A→Z, default size, no filter) is
    /// the bare path: an empty string.
    pub fn query(&self, page: usize, sort: Column, desc: bool) -> String {
        if page == 1
            && sort == Column::Name
            && !desc
            && self.size == DEFAULT_PAGE_SIZE
            && self.filter.is_empty()
        {
            return String::new();
        }
        let mut out = format!(
            "?sort={}&dir={}&page={page}",
            sort.key(),
            if desc { "desc" } else { "asc" }
        );
        if self.size != DEFAULT_PAGE_SIZE {
            out.push_str(&format!("&size={}", self.size));
        }
        if !self.filter.is_empty() {
            out.push_str("&q=");
            out.push_str(&urls::encode(&self.filter));
        }
        out
    }

    /// This view's own query string.
    pub fn here(&self) -> String {
        self.query(self.page, self.sort, self.desc)
    }

    /// The link of column `col`'s header: sorts by it from page 1, the
    /// other way round when it is already the sort.
    pub fn header_link(&self, col: Column) -> String {
        let desc = if col == self.sort {
            !self.desc
        } else {
            col.default_desc()
        };
        self.query(1, col, desc)
    }
}
