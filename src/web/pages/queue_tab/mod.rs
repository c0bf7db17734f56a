//! The queue page: one tab per task state (active, pending, aggregating per
//! group, scheduled, retry, archived, completed), each labelled with its
//! count, with a queue banner, paginated task tables, filters, per-task type
//! counts, LastErr groups, and actions on one task, a selection, every task
//! matching a filter, or the whole tab (S14, S17, S28, S29).
//!
//! Go: asynqmon's `/queues/:q?status=` page and its list and batch routes;
//! asynq `Inspector.List*Tasks`, `RunTask`, `ArchiveTask`, `DeleteTask`,
//! `RunAll*`, `ArchiveAll*`, `DeleteAll*`, `CancelProcessing`.
//!
//! Counts and the banner come from the shared stats snapshot (one
//! computation per poll interval for every viewer). What a tab shows (the
//! page, the filters' bounded scan, the lookup by id, the join with active
//! workers) and its summary are one inspector call each
//! ([`Inspector::read_tab`](crate::Inspector::read_tab),
//! [`Inspector::tab_summary`](crate::Inspector::tab_summary)); the handlers
//! here parse, call and format.
//!
//! Files: `routes.rs` (routes, the page and summary handlers), `query.rs`
//! (the query parameters and the parsed [`View`]), `view.rs` (rows, banner,
//! links, buttons and the templates), `render.rs` (one tab read and its
//! formatting), `actions.rs` (buttons, toasts and the POST actions on a selection),
//! `bulk.rs` (actions on a whole tab or on what a filter matches, as
//! background jobs: the confirmation page and the start), `export.rs`
//! (the tab's tasks as an NDJSON or CSV download, S31), `signatures.rs`
//! (the error signatures of the retry and archived tabs, formatted).

mod actions;
mod bulk;
mod export;
mod query;
mod render;
mod routes;
mod signatures;
mod view;

pub use actions::{Op, OpText, op_views, respond_tab, trigger};
pub use query::{View, ViewQuery, parse_state};
pub use routes::routes;
pub use view::{OpView, TimeView};
