//! What `/search` and `/api/search` share: the request's parameters, the
//! [`SearchQuery`] they make, one bounded step of the scan, and the bulk
//! actions a search can hand over to the background jobs.
//!
//! Parameters: `q` (the search box's text, [`SearchQuery::parse`]), the
//! same filters one by one (`queue`, `state`, `type`, `error`, `payload`,
//! `age`, `retried`, added to `q`'s; `queue` and `state` may repeat),
//! `cursor` (where the scan resumes)
//! and `limit` (tasks read per step, default and most
//! [`SEARCH_BUDGET`]).

use super::AppState;
use super::urls::{encode, segment};
use crate::error::{Error, Result};
use crate::inspector::{SEARCH_BUDGET, SearchCursor, SearchPage, SearchQuery, TaskAction};

/// The filters that may be given as parameters, as [`SearchQuery::add_param`]
/// names them.
const FILTER_KEYS: [&str; 7] = [
    "queue", "state", "type", "error", "payload", "age", "retried",
];

/// The query string of `/search` and `/api/search` (read as pairs, so
/// `queue` and `state` may repeat; other parameters are ignored).
#[derive(Clone, Debug, Default)]
pub struct SearchParams {
    /// The search box's text (several `q` are joined by spaces).
    pub q: Option<String>,
    /// The separate filters, in request order: `queue`, `state` (both
    /// repeatable, or comma lists), `type`, `error`, `payload`, `age`,
    /// `retried`.
    pub filters: Vec<(String, String)>,
    /// Where the scan resumes ([`SearchCursor::encode`]).
    pub cursor: Option<String>,
    /// Tasks read in this step (1..=[`SEARCH_BUDGET`], the default), as
    /// given.
    pub limit: Option<String>,
}

impl SearchParams {
    /// The parameters of a query string's `pairs`.
    pub fn from_pairs(pairs: Vec<(String, String)>) -> Self {
        let mut out = SearchParams::default();
        for (k, v) in pairs {
            match k.as_str() {
                "q" => {
                    out.q = Some(match out.q.take() {
                        Some(q) => format!("{q} {v}"),
                        None => v,
                    })
                }
                "cursor" => out.cursor = Some(v),
                "limit" => out.limit = Some(v),
                k if FILTER_KEYS.contains(&k) => out.filters.push((k.to_string(), v)),
                _ => {}
            }
        }
        out
    }

    /// The query: `q` parsed, plus the separate filters. Errors with
    /// [`Error::InvalidArgument`] naming the bad word or parameter.
    pub fn query(&self) -> Result<SearchQuery> {
        let mut query = SearchQuery::parse(self.q.as_deref().unwrap_or_default())?;
        for (key, value) in &self.filters {
            query.add_param(key, value)?;
        }
        Ok(query)
    }

    /// The cursor, when one is given.
    pub fn cursor(&self) -> Result<Option<SearchCursor>> {
        self.cursor
            .as_deref()
            .filter(|c| !c.trim().is_empty())
            .map(SearchCursor::decode)
            .transpose()
    }

    /// The step's budget: `limit`, or [`SEARCH_BUDGET`]. Errors with
    /// [`Error::InvalidArgument`] for a limit that is no whole number.
    pub fn budget(&self) -> Result<usize> {
        match self
            .limit
            .as_deref()
            .map(str::trim)
            .filter(|l| !l.is_empty())
        {
            None => Ok(SEARCH_BUDGET),
            Some(l) => l.parse().map_err(|_| {
                Error::InvalidArgument(format!("limit={l:?}: a whole number is needed"))
            }),
        }
    }
}

/// Parses `params` and runs one step of the search over the shared
/// statistics snapshot's queues.
pub async fn run(state: &AppState, params: &SearchParams) -> Result<(SearchQuery, SearchPage)> {
    let query = params.query()?;
    let cursor = params.cursor()?;
    let budget = params.budget()?;
    let snapshot = state.stats.get(&state.inspector).await;
    let page = state
        .inspector
        .search(&query, &snapshot, cursor.as_ref(), budget)
        .await?;
    Ok((query, page))
}

/// A bulk action offered on a search's matches: the confirmation page of
/// the queue tab's job (it shows the preview count, then starts the job).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BulkLink {
    /// `Run`, `Archive`, `Delete` or `Cancel`.
    pub label: &'static str,
    /// Path under the root, with the filters in the query.
    pub href: String,
}

/// The bulk actions whose job acts on exactly the matches of `query`, or
/// why there are none. The jobs work on one queue tab with the tab's
/// filters (exact type, payload substring), so the search must name one
/// queue and one state and use no other filter.
pub fn bulk_links(query: &SearchQuery) -> std::result::Result<Vec<BulkLink>, String> {
    let ([queue], [state]) = (query.queues.as_slice(), query.states.as_slice()) else {
        return Err(
            "Bulk actions act on one queue tab: add one queue: and one state: to the search."
                .into(),
        );
    };
    if query.error.is_some() || query.older_than.is_some() || query.retried_over.is_some() {
        return Err("Bulk actions can filter by exact type: and payload~ only: remove error~, age> and retried> (or use the queue tab's error groups).".into());
    }
    if query.task_type.as_deref().is_some_and(|t| t.ends_with('*')) {
        return Err("Bulk actions need an exact type: (no *).".into());
    }
    let mut qs = Vec::new();
    if let Some(t) = &query.task_type {
        qs.push(format!("type={}", encode(t)));
    }
    if let Some(p) = &query.payload {
        qs.push(format!("q={}", encode(p)));
    }
    let scope = if qs.is_empty() { "all" } else { "matching" };
    let qs = if qs.is_empty() {
        String::new()
    } else {
        format!("?{}", qs.join("&"))
    };
    Ok(TaskAction::for_state(*state)
        .into_iter()
        .map(|op| BulkLink {
            label: match op {
                TaskAction::Run => "Run",
                TaskAction::Archive => "Archive",
                TaskAction::Delete => "Delete",
                TaskAction::Cancel => "Cancel",
            },
            href: format!(
                "/queues/{}/{}/{scope}/{}{qs}",
                segment(queue),
                state.as_str(),
                op.as_str()
            ),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TaskState;

    #[test]
    fn bulk_links_need_one_tab_and_tab_filters() {
        let q = SearchQuery::parse("queue:a state:retry type:email:send payload~u1").unwrap();
        let links = bulk_links(&q).unwrap();
        let hrefs: Vec<&str> = links.iter().map(|l| l.href.as_str()).collect();
        assert_eq!(
            hrefs,
            [
                "/queues/a/retry/matching/run?type=email%3Asend&q=u1",
                "/queues/a/retry/matching/archive?type=email%3Asend&q=u1",
                "/queues/a/retry/matching/delete?type=email%3Asend&q=u1",
            ]
        );
        let all = bulk_links(&SearchQuery::parse("queue:a state:pending").unwrap()).unwrap();
        assert_eq!(all[0].href, "/queues/a/pending/all/archive");
        assert_eq!(TaskAction::for_state(TaskState::Pending).len(), all.len());
        for text in [
            "queue:a",
            "state:retry",
            "queue:a state:retry error~x",
            "queue:a state:retry type:e*",
        ] {
            assert!(
                bulk_links(&SearchQuery::parse(text).unwrap()).is_err(),
                "{text}"
            );
        }
    }
}
