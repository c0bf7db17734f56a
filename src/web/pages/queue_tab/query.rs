//! What the path and the query of a tab view ask for: [`ViewQuery`] (the
//! raw parameters), [`View`] (parsed: tab, page, size, group, filters) and
//! the query strings of its links.

use serde::Deserialize;

use crate::TaskState;
use crate::inspector::{Page, QueueInfo, TabFilter, TabRequest};

pub use crate::web::urls::encode;

/// Page sizes offered; any other `size` falls back to the first.
pub const PAGE_SIZES: [usize; 3] = [20, 50, 100];

/// Server-side filters of a tab (read by the inspector).
pub type Filter = TabFilter;

/// Query parameters of a tab view (and of the actions, which re-render it).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ViewQuery {
    pub page: Option<String>,
    pub size: Option<String>,
    pub group: Option<String>,
    #[serde(rename = "type")]
    pub task_type: Option<String>,
    pub id: Option<String>,
    pub q: Option<String>,
    pub err: Option<String>,
    /// A search's filters (`/search` syntax), for the bulk action of a
    /// search ([`crate::web::search::bulk_links`]); read by the job pages.
    pub search: Option<String>,
    /// asynqmon's `/queues/:q?status=<state>`.
    pub status: Option<String>,
    /// Actions on a single task: the tab to re-render.
    pub tab: Option<String>,
    /// Actions on a single task: `task` when posted from the task page.
    pub from: Option<String>,
}

/// A parsed tab view.
#[derive(Clone, Debug)]
pub struct View {
    pub state: TaskState,
    pub page: usize,
    pub size: usize,
    /// Aggregating tab: the group asked for (else the first group).
    pub group: Option<String>,
    pub filter: Filter,
}

fn nonblank(s: &Option<String>) -> String {
    s.as_deref().map(str::trim).unwrap_or_default().to_string()
}

impl View {
    /// The view of tab `state` with the query's page, size, group and filters.
    pub fn new(state: TaskState, q: &ViewQuery) -> Self {
        let page = q
            .page
            .as_deref()
            .and_then(|p| p.trim().parse::<usize>().ok())
            .filter(|p| *p >= 1)
            .unwrap_or(1);
        let size = q
            .size
            .as_deref()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .filter(|s| PAGE_SIZES.contains(s))
            .unwrap_or(PAGE_SIZES[0]);
        let group = q.group.clone().filter(|g| !g.is_empty());
        View {
            state,
            page,
            size,
            group,
            filter: Filter {
                task_type: nonblank(&q.task_type),
                id: nonblank(&q.id),
                payload: q.q.clone().unwrap_or_default(),
                err: nonblank(&q.err),
                search: None,
            },
        }
    }

    /// The inspector's request for this view of `queue`, with the queue's
    /// statistics from the shared snapshot.
    pub fn request<'a>(&'a self, queue: &'a str, stats: Option<&'a QueueInfo>) -> TabRequest<'a> {
        TabRequest {
            queue,
            state: self.state,
            group: self.group.as_deref(),
            stats,
            // Page and size are at least 1 (see `View::new`).
            page: Page {
                number: self.page,
                size: self.size,
            },
            filter: &self.filter,
        }
    }

    /// Query string of this view at `page` with `size`.
    pub fn qs_at(&self, page: usize, size: usize) -> String {
        let mut parts = vec![format!("page={page}"), format!("size={size}")];
        parts.extend(self.filter_parts());
        parts.join("&")
    }

    fn filter_parts(&self) -> Vec<String> {
        let mut parts = Vec::new();
        let mut add = |k: &str, v: &str| {
            if !v.is_empty() {
                parts.push(format!("{k}={}", encode(v)));
            }
        };
        add("group", self.group.as_deref().unwrap_or_default());
        add("type", &self.filter.task_type);
        add("id", &self.filter.id);
        add("q", &self.filter.payload);
        add("err", &self.filter.err);
        parts
    }

    /// The view's query string.
    pub fn qs(&self) -> String {
        self.qs_at(self.page, self.size)
    }
}

/// Parses a tab name; `None` for anything but the seven states.
pub fn parse_state(s: &str) -> Option<TaskState> {
    s.parse().ok()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in super::super) fn q(pairs: &[(&str, &str)]) -> ViewQuery {
        let mut v = ViewQuery::default();
        for (k, val) in pairs {
            let s = Some(val.to_string());
            match *k {
                "page" => v.page = s,
                "size" => v.size = s,
                "type" => v.task_type = s,
                "q" => v.q = s,
                "group" => v.group = s,
                _ => unreachable!(),
            }
        }
        v
    }

    /// Page and size fall back to 1 and 20 when absent, zero, not a number
    /// or not an offered size; query strings encode filter values.
    #[test]
    fn view_parsing() {
        let v = View::new(TaskState::Retry, &q(&[]));
        assert_eq!((v.page, v.size), (1, 20));
        let v = View::new(TaskState::Retry, &q(&[("page", "0"), ("size", "37")]));
        assert_eq!((v.page, v.size), (1, 20));
        let v = View::new(TaskState::Retry, &q(&[("page", "x"), ("size", "100")]));
        assert_eq!((v.page, v.size), (1, 100));
        let v = View::new(
            TaskState::Retry,
            &q(&[
                ("page", "3"),
                ("size", "50"),
                ("type", "a b"),
                ("q", "x&y=é"),
            ]),
        );
        assert_eq!(v.qs(), "page=3&size=50&type=a%20b&q=x%26y%3D%C3%A9");
    }
}
