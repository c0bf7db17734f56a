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

/// The bulk actions on exactly the matches of `query`, or why there are
/// none. A search of one queue tab links to the tab's job confirmation
/// (`…/{state}/all/{op}`, or `…/matching/{op}?search=<filters>`); a wider
/// search links to `/search/bulk/{op}?q=<query>`, which starts one job per
/// tab ([`crate::inspector::SearchJobPlan`]). An action is offered when a
/// state in scope allows it.
pub fn bulk_links(query: &SearchQuery) -> std::result::Result<Vec<BulkLink>, String> {
    let states = query.scope_states();
    let ops: Vec<TaskAction> = TaskAction::ALL
        .into_iter()
        .filter(|op| states.iter().any(|s| op.allowed_in(*s)))
        .collect();
    if ops.is_empty() {
        return Err("No bulk action applies to the states searched.".into());
    }
    let label = |op: TaskAction| match op {
        TaskAction::Run => "Run",
        TaskAction::Archive => "Archive",
        TaskAction::Delete => "Delete",
        TaskAction::Cancel => "Cancel",
    };
    let href = |op: TaskAction| match (query.queues.as_slice(), states.as_slice()) {
        ([queue], [state]) => {
            let filters = query.clone().filters_only();
            let base = format!("/queues/{}/{}", segment(queue), state.as_str());
            if filters.is_unfiltered() {
                format!("{base}/all/{}", op.as_str())
            } else {
                format!(
                    "{base}/matching/{}?search={}",
                    op.as_str(),
                    encode(&filters.to_text())
                )
            }
        }
        _ => format!(
            "/search/bulk/{}?q={}",
            op.as_str(),
            encode(&query.to_text())
        ),
    };
    Ok(ops
        .into_iter()
        .map(|op| BulkLink {
            label: label(op),
            href: href(op),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TaskState;

    #[test]
    fn bulk_links_per_tab_and_across_tabs() {
        let q = SearchQuery::parse("queue:a state:retry type:email:* error~\"time out\" age>1h")
            .unwrap();
        let hrefs: Vec<String> = bulk_links(&q)
            .unwrap()
            .into_iter()
            .map(|l| l.href)
            .collect();
        assert_eq!(
            hrefs,
            [
                "/queues/a/retry/matching/run?search=type%3Aemail%3A%2A%20error~%22time%20out%22%20age%3E3600s",
                "/queues/a/retry/matching/archive?search=type%3Aemail%3A%2A%20error~%22time%20out%22%20age%3E3600s",
                "/queues/a/retry/matching/delete?search=type%3Aemail%3A%2A%20error~%22time%20out%22%20age%3E3600s",
            ]
        );
        let all = bulk_links(&SearchQuery::parse("queue:a state:pending").unwrap()).unwrap();
        assert_eq!(all[0].href, "/queues/a/pending/all/archive");
        assert_eq!(TaskAction::for_state(TaskState::Pending).len(), all.len());
        let wide = bulk_links(&SearchQuery::parse("retried>2").unwrap()).unwrap();
        let labels: Vec<&str> = wide.iter().map(|l| l.label).collect();
        assert_eq!(labels, ["Run", "Archive", "Delete", "Cancel"]);
        assert_eq!(wide[0].href, "/search/bulk/run?q=retried%3E2");
        let active = bulk_links(&SearchQuery::parse("state:active").unwrap()).unwrap();
        assert_eq!(
            active.iter().map(|l| l.label).collect::<Vec<_>>(),
            ["Cancel"]
        );
    }
}
