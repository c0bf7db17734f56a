//! Redis page: the server's version, uptime, memory (used, peak,
//! fragmentation), clients, role and replicas, last save, keyspace and the
//! raw `INFO`; on a cluster node also `CLUSTER INFO`, each queue's hash slot
//! and nodes, and the raw `CLUSTER NODES`; on a cluster connection every
//! node (role, memory, ops/s, slot ranges, the queues it holds); behind
//! Sentinel the master in use and the last failover (asynqmon `/redis`, built on
//! [`Inspector::redis_info`](crate::Inspector::redis_info)). A live fragment.
//!
//! A field Redis does not report (managed services hide some) shows "n/a".

use std::collections::BTreeMap;

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use chrono::{DateTime, Utc};

use super::servers::When;
use super::{Layout, is_htmx};
use crate::inspector::{QueueLocation, RedisInfo, SentinelStatus};
use crate::web::AppState;
use crate::web::error::PageError;
use crate::web::format;
use crate::web::urls::filters;

/// One summary card: a label and its value ("n/a" when Redis did not say).
pub struct Card {
    pub label: &'static str,
    pub value: String,
    /// Smaller print under the value (e.g. the relative time).
    pub note: String,
}

/// One database of the keyspace section.
pub struct KeyspaceRow {
    /// `db0`.
    pub db: String,
    /// `keys=12,expires=0,avg_ttl=0`.
    pub stats: String,
}

/// Cluster facts, formatted.
pub struct ClusterView {
    pub state: String,
    pub known_nodes: String,
    pub size: String,
    pub slots_ok: String,
    pub locations: Vec<QueueLocation>,
    pub raw_info: String,
    pub raw_nodes: String,
    /// Every node (on a cluster connection; empty on one cluster node).
    pub nodes: Vec<NodeView>,
}

/// One cluster node's row.
pub struct NodeView {
    pub addr: String,
    pub id: String,
    pub role: String,
    pub flags: String,
    /// `used_memory_human`, "n/a" when not reported.
    pub memory: String,
    /// `instantaneous_ops_per_sec`, "n/a" when not reported.
    pub ops: String,
    /// `0-5460 10000-10010`, or "none".
    pub slots: String,
    pub queues: Vec<String>,
    pub error: Option<String>,
}

/// Slot ranges as `CLUSTER NODES` writes them (`0-5460`, a lone slot as
/// `12000`), space-separated; "none" when empty.
fn slot_ranges(slots: &[(u16, u16)]) -> String {
    if slots.is_empty() {
        return "none".to_string();
    }
    slots
        .iter()
        .map(|(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Behind Sentinel: the master in use and the last failover seen.
pub struct SentinelView {
    pub master_name: String,
    /// `host:port, host:port`.
    pub sentinels: String,
    /// `host:port`, or "n/a" before the first lookup.
    pub master: String,
    /// Changes of master seen by this process.
    pub failovers: u64,
    /// The last one: when, from, to.
    pub last: Option<(When, String, String)>,
}

impl SentinelView {
    fn new(s: SentinelStatus, now: DateTime<Utc>) -> Self {
        SentinelView {
            master_name: s.master_name,
            sentinels: s.sentinels.join(", "),
            master: s.master.unwrap_or_else(|| "n/a".to_string()),
            failovers: s.failovers,
            last: s
                .last_failover
                .map(|f| (When::new(f.at, now), f.from, f.to)),
        }
    }
}

fn field(info: &BTreeMap<String, String>, key: &str) -> String {
    info.get(key)
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "n/a".to_string())
}

fn cards(info: &BTreeMap<String, String>, now: DateTime<Utc>) -> Vec<Card> {
    let uptime = info
        .get("uptime_in_seconds")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or_else(|| "n/a".to_string(), format::human_duration);
    let last_save = info
        .get("rdb_last_save_time")
        .and_then(|v| v.trim().parse::<i64>().ok())
        .filter(|s| *s > 0)
        .and_then(|s| DateTime::from_timestamp(s, 0))
        .map(|t| When::new(t, now));
    let (save_value, save_note) = match last_save {
        Some(w) => (w.utc, w.relative),
        None => ("n/a".to_string(), String::new()),
    };
    let card = |label, value: String, note: String| Card { label, value, note };
    vec![
        card(
            "Version",
            field(info, "redis_version"),
            field(info, "redis_mode"),
        ),
        card("Uptime", uptime, String::new()),
        card(
            "Used memory",
            field(info, "used_memory_human"),
            match info.get("maxmemory").map(|v| v.trim()) {
                Some("0") => "no maxmemory limit".to_string(),
                _ => format!("maxmemory {}", field(info, "maxmemory_human")),
            },
        ),
        card(
            "Peak memory",
            field(info, "used_memory_peak_human"),
            String::new(),
        ),
        card(
            "Fragmentation ratio",
            field(info, "mem_fragmentation_ratio"),
            String::new(),
        ),
        card(
            "Connected clients",
            field(info, "connected_clients"),
            format!("{} blocked", field(info, "blocked_clients")),
        ),
        card("Role", field(info, "role"), String::new()),
        card(
            "Connected replicas",
            field(info, "connected_slaves"),
            String::new(),
        ),
        card("Last save", save_value, save_note),
        card(
            "Changes since last save",
            field(info, "rdb_changes_since_last_save"),
            String::new(),
        ),
    ]
}

/// `db<N>` entries, in database order.
fn keyspace(info: &BTreeMap<String, String>) -> Vec<KeyspaceRow> {
    let mut rows: Vec<(u32, KeyspaceRow)> = info
        .iter()
        .filter_map(|(k, v)| {
            let n = k.strip_prefix("db")?.parse::<u32>().ok()?;
            Some((
                n,
                KeyspaceRow {
                    db: k.clone(),
                    stats: v.clone(),
                },
            ))
        })
        .collect();
    rows.sort_by_key(|(n, _)| *n);
    rows.into_iter().map(|(_, r)| r).collect()
}

/// The dashboard's Redis budget and its use over the last minute, as the
/// page shows them (`src/broker/stats/budget.rs`).
pub struct BudgetView {
    /// "2000 commands/s" or "unlimited".
    pub commands_limit: String,
    /// "20 ms/s" or "unlimited".
    pub ms_limit: String,
    /// Mean commands/s and Redis ms/s over `window_s`, one decimal.
    pub commands_used: String,
    pub ms_used: String,
    pub window_s: u64,
    /// Refreshes deferred in the window and since start; calls that waited.
    pub deferred: u64,
    pub deferred_total: u64,
    pub waits: u64,
}

fn budget_view(u: crate::inspector::BudgetUsage) -> BudgetView {
    let limit = |v: f64, unit: &str| {
        if v > 0.0 {
            format!("{v} {unit}")
        } else {
            "unlimited".to_string()
        }
    };
    BudgetView {
        commands_limit: limit(u.commands_per_s_limit, "commands/s"),
        ms_limit: limit(u.ms_per_s_limit, "ms/s"),
        commands_used: format!("{:.1}", u.commands_per_s),
        ms_used: format!("{:.1}", u.ms_per_s),
        window_s: u.window_s,
        deferred: u.deferred,
        deferred_total: u.deferred_total,
        waits: u.waits,
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "redis.html")]
struct RedisPage {
    layout: Layout,
    live: RedisLive,
}

#[derive(Template, WebTemplate)]
#[template(path = "redis_live.html")]
struct RedisLive {
    layout: Layout,
    address: String,
    cards: Vec<Card>,
    keyspace: Vec<KeyspaceRow>,
    cluster: Option<ClusterView>,
    sentinel: Option<SentinelView>,
    raw_info: String,
    taken_at: When,
    budget: BudgetView,
}

fn live(state: &AppState, r: RedisInfo, now: DateTime<Utc>) -> RedisLive {
    let cluster = r.cluster.map(|c| ClusterView {
        state: field(&c.cluster_info, "cluster_state"),
        known_nodes: field(&c.cluster_info, "cluster_known_nodes"),
        size: field(&c.cluster_info, "cluster_size"),
        slots_ok: field(&c.cluster_info, "cluster_slots_ok"),
        locations: c.queue_locations,
        raw_info: c.raw_cluster_info,
        raw_nodes: c.raw_cluster_nodes,
        nodes: c
            .nodes
            .into_iter()
            .map(|n| NodeView {
                slots: slot_ranges(&n.slots),
                memory: n.used_memory_human.unwrap_or_else(|| "n/a".into()),
                ops: n.ops_per_sec.unwrap_or_else(|| "n/a".into()),
                addr: n.addr,
                id: n.id,
                role: n.role,
                flags: n.flags,
                queues: n.queues,
                error: n.error,
            })
            .collect(),
    });
    RedisLive {
        layout: Layout::new(state, "Redis", "redis"),
        address: r.address,
        cards: cards(&r.info, now),
        keyspace: keyspace(&r.info),
        cluster,
        sentinel: r.sentinel.map(|s| SentinelView::new(s, now)),
        raw_info: r.raw_info,
        taken_at: When::new(now, now),
        budget: budget_view(state.stats.budget().usage()),
    }
}

pub fn routes() -> Router<AppState> {
    Router::new().route("/redis", get(view_redis_get))
}

/// `GET /redis`: the page, or its live part when htmx asks. Redis
/// unreachable or refusing `INFO` → 503 page.
async fn view_redis_get(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let info = match state.inspector.redis_info().await {
        Ok(i) => i,
        Err(e) => return PageError::from_error(e, &state.config.root_path).into_response(),
    };
    let now = state.inspector.now();
    let live = live(&state, info, now);
    if is_htmx(&headers) {
        return live.into_response();
    }
    RedisPage {
        layout: Layout::new(&state, "Redis", "redis"),
        live,
    }
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspector::parse_info;

    /// Missing fields read "n/a"; uptime and last save are formatted;
    /// keyspace rows come in database order.
    #[test]
    fn cards_and_keyspace() {
        let info = parse_info(
            "# Server\r\nredis_version:7.0.15\r\nuptime_in_seconds:90000\r\n# Persistence\r\nrdb_last_save_time:1000000\r\n# Keyspace\r\ndb10:keys=1,expires=0,avg_ttl=0\r\ndb2:keys=5,expires=1,avg_ttl=9\r\n",
        );
        let now = DateTime::from_timestamp(1_000_060, 0).unwrap();
        let c = cards(&info, now);
        assert_eq!((c[0].label, c[0].value.as_str()), ("Version", "7.0.15"));
        assert_eq!(c[1].value, "1d 1h");
        assert_eq!(c[2].value, "n/a");
        assert_eq!(c[2].note, "maxmemory n/a");
        assert_eq!(c[8].value, "1970-01-12 13:46:40 UTC");
        assert_eq!(c[8].note, "1m 0s ago");
        assert_eq!(slot_ranges(&[(0, 5460), (12000, 12000)]), "0-5460 12000");
        assert_eq!(slot_ranges(&[]), "none");
        let k = keyspace(&info);
        assert_eq!(
            k.iter().map(|r| r.db.as_str()).collect::<Vec<_>>(),
            ["db2", "db10"]
        );
    }
}
