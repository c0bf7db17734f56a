//! `GET /redis_info` (asynqmon `redis_info_handlers.go`) and the
//! unsupported Prometheus proxy `GET /metrics`.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::ApiResult;
use crate::web::AppState;

/// asynqmon `queueLocationInfo`.
#[derive(Serialize)]
struct QueueLocationJson {
    queue: String,
    keyslot: i64,
    /// `null` when no node serves the slot (a Go nil slice).
    nodes: Option<Vec<String>>,
}

/// One node of a cluster (asynqdeck only, `nodes`).
#[derive(Serialize)]
struct NodeJson {
    id: String,
    addr: String,
    role: String,
    flags: String,
    link: String,
    /// Inclusive `[start, end]` ranges.
    slots: Vec<[u16; 2]>,
    used_memory_human: Option<String>,
    instantaneous_ops_per_sec: Option<String>,
    /// Queues whose slot the node serves as master.
    queues: Vec<String>,
    /// Why its `INFO` could not be read.
    error: Option<String>,
}

/// Behind Sentinel (an asynqdeck field; COMPATIBILITY.md K14).
#[derive(Serialize)]
struct SentinelJson {
    master_name: String,
    sentinels: Vec<String>,
    /// `host:port` in use; `null` before the first lookup.
    master: Option<String>,
    failovers: u64,
    /// `{at (RFC 3339), from, to}`; `null` when none was seen.
    last_failover: Option<FailoverJson>,
}

#[derive(Serialize)]
struct FailoverJson {
    at: String,
    from: String,
    to: String,
}

fn sentinel_json(s: crate::inspector::SentinelStatus) -> SentinelJson {
    SentinelJson {
        master_name: s.master_name,
        sentinels: s.sentinels,
        master: s.master,
        failovers: s.failovers,
        last_failover: s.last_failover.map(|f| FailoverJson {
            at: f.at.to_rfc3339(),
            from: f.from,
            to: f.to,
        }),
    }
}

/// asynqmon `redisInfoResponse`, plus `nodes` (a cluster) and `sentinel`.
#[derive(Serialize)]
struct RedisInfoResponse {
    address: String,
    /// Parsed `INFO`; on a cluster, parsed `CLUSTER INFO` (as asynqmon).
    info: BTreeMap<String, String>,
    /// Raw `INFO`; on a cluster, raw `CLUSTER INFO` (as asynqmon).
    raw_info: String,
    cluster: bool,
    /// Raw `CLUSTER NODES`; `""` outside a cluster.
    raw_cluster_nodes: String,
    /// `null` outside a cluster or when there is no queue.
    queue_locations: Option<Vec<QueueLocationJson>>,
    /// asynqdeck only (asynqmon's UI ignores it): every node of the
    /// cluster connected to with `--redis-cluster-nodes`; `null` otherwise.
    // asynqmon divergence: COMPATIBILITY.md#k5
    #[serde(skip_serializing_if = "Option::is_none")]
    nodes: Option<Vec<NodeJson>>,
    /// Behind Sentinel only (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    sentinel: Option<SentinelJson>,
}

/// `GET /redis_info`: `{address, info, raw_info, cluster,
/// raw_cluster_nodes, queue_locations, nodes}`. 503 when Redis is unreachable or
/// refuses `INFO`.
pub async fn redis_info(State(state): State<AppState>) -> ApiResult {
    let info = state.inspector.redis_info().await?;
    let sentinel = info.sentinel.map(sentinel_json);
    let resp = match info.cluster {
        None => RedisInfoResponse {
            address: info.address,
            info: info.info,
            raw_info: info.raw_info,
            cluster: false,
            raw_cluster_nodes: String::new(),
            queue_locations: None,
            nodes: None,
            sentinel,
        },
        Some(c) => {
            let locations: Vec<QueueLocationJson> = c
                .queue_locations
                .into_iter()
                .map(|l| QueueLocationJson {
                    queue: l.queue,
                    keyslot: l.keyslot,
                    nodes: (!l.nodes.is_empty()).then_some(l.nodes),
                })
                .collect();
            let nodes: Vec<NodeJson> = c
                .nodes
                .into_iter()
                .map(|n| NodeJson {
                    id: n.id,
                    addr: n.addr,
                    role: n.role,
                    flags: n.flags,
                    link: n.link,
                    slots: n.slots.iter().map(|(a, b)| [*a, *b]).collect(),
                    used_memory_human: n.used_memory_human,
                    instantaneous_ops_per_sec: n.ops_per_sec,
                    queues: n.queues,
                    error: n.error,
                })
                .collect();
            RedisInfoResponse {
                address: info.address,
                info: c.cluster_info,
                raw_info: c.raw_cluster_info,
                cluster: true,
                raw_cluster_nodes: c.raw_cluster_nodes,
                queue_locations: (!locations.is_empty()).then_some(locations),
                nodes: (!nodes.is_empty()).then_some(nodes),
                sentinel,
            }
        }
    };
    Ok(Json(resp).into_response())
}

#[derive(Serialize)]
struct MetricsUnsupported {
    error: &'static str,
}

/// `GET /metrics`: asynqmon proxies Prometheus `query_range` here for its
/// Metrics page; asynqdeck has no such page, so this is a 404 with a JSON
/// error. Prometheus scrapes asynqdeck's own `/metrics` instead.
// asynqmon divergence: COMPATIBILITY.md#a9
pub async fn metrics() -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(MetricsUnsupported {
            error: "the metrics page (Prometheus query proxy) is not supported by asynqdeck; scrape asynqdeck's /metrics with Prometheus instead",
        }),
    )
        .into_response()
}
