//! `GET /queues/{q}/cluster_key_slot` and `GET /queues/{q}/cluster_nodes`:
//! Go asynq's `Inspector.ClusterKeySlot` and `Inspector.ClusterNodes` over
//! HTTP (asynqdeck only: asynqmon has no such routes). Outside a cluster
//! both answer 400 with the reason (Redis has cluster support disabled).
// asynqmon divergence: COMPATIBILITY.md#k6

use axum::Json;
use axum::extract::{Path, State};
use axum::response::IntoResponse;
use serde::Serialize;

use super::ApiResult;
use crate::web::AppState;

#[derive(Serialize)]
struct KeySlotResponse {
    queue: String,
    keyslot: i64,
}

/// `{"queue": "<q>", "keyslot": 1234}`.
pub async fn key_slot(State(state): State<AppState>, Path(queue): Path<String>) -> ApiResult {
    let keyslot = state.inspector.cluster_key_slot(&queue).await?;
    Ok(Json(KeySlotResponse { queue, keyslot }).into_response())
}

#[derive(Serialize)]
struct NodeJson {
    id: String,
    addr: String,
}

#[derive(Serialize)]
struct NodesResponse {
    queue: String,
    /// Master first, then its replicas (Go `ClusterNode{ID, Addr}`).
    nodes: Vec<NodeJson>,
}

/// `{"queue": "<q>", "nodes": [{"id", "addr"}]}`.
pub async fn nodes(State(state): State<AppState>, Path(queue): Path<String>) -> ApiResult {
    let nodes = state
        .inspector
        .cluster_nodes(&queue)
        .await?
        .into_iter()
        .map(|n| NodeJson {
            id: n.id,
            addr: n.addr,
        })
        .collect();
    Ok(Json(NodesResponse { queue, nodes }).into_response())
}
