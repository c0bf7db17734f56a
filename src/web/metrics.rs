//! `GET /metrics`: queue metrics in the Prometheus text format (version
//! 0.0.4, what Go's `promhttp` serves by default), with the names, labels,
//! help texts and types of Go asynq's exporter (`x/metrics`,
//! `QueueMetricsCollector`), so dashboards and alerts built on asynqmon's
//! `--enable-metrics-exporter` keep working:
//!
//! | metric | type | labels |
//! | --- | --- | --- |
//! | `asynq_tasks_enqueued_total` | gauge | `queue`, `state` (active, pending, scheduled, retry, archived, completed) |
//! | `asynq_queue_size` | gauge | `queue` |
//! | `asynq_queue_latency_seconds` | gauge | `queue` |
//! | `asynq_queue_memory_usage_approx_bytes` | gauge | `queue` |
//! | `asynq_tasks_processed_total` | counter | `queue` |
//! | `asynq_tasks_failed_total` | counter | `queue` |
//! | `asynq_queue_paused_total` | gauge (1 paused, 0 not) | `queue` |
//!
//! plus `asynqdeck_queue_stats_failed{queue}` (gauge, 1) for a queue whose
//! statistics could not be read; Go's exporter drops every queue then.
//! The memory gauge is the queue's last background estimate (at most about
//! 5 minutes old); a queue without one yet, or whose estimate failed, has no
//! memory sample rather than a made-up 0.
//!
//! Values come from the shared statistics snapshot (`state.rs`), so a scrape
//! costs Redis nothing beyond what the pages already cost in that interval.
//! When the queue list itself cannot be read (Redis down) the answer is 503,
//! so Prometheus records the scrape as failed (`up == 0`); Go answers 200
//! with no queue metrics. Basic auth, when configured, covers this route as
//! every other.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, prometheus_text};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use super::AppState;
use super::state::Snapshot;
use crate::inspector::QueueInfo;

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/metrics", get(metrics))
}

async fn metrics(State(state): State<AppState>) -> Response {
    let snapshot = state.stats.get(&state.inspector).await;
    if let Some(e) = &snapshot.error {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("cannot read queue statistics: {e}\n"),
        )
            .into_response();
    }
    match render(&snapshot) {
        Ok(body) => (
            [(header::CONTENT_TYPE, prometheus_text::CONTENT_TYPE)],
            body,
        )
            .into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "cannot encode metrics\n").into_response(),
    }
}

/// The text exposition of `snapshot`.
pub(crate) fn render(snapshot: &Snapshot) -> Result<String, std::fmt::Error> {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(QueueCollector(
        snapshot
            .queues
            .iter()
            .map(|row| {
                let memory_known = matches!(&row.memory, Some(m) if m.bytes.is_ok());
                (row.name.clone(), row.info.clone().ok(), memory_known)
            })
            .collect(),
    )));
    let mut body = String::new();
    prometheus_text::encode(&mut body, &registry)?;
    Ok(body)
}

/// Per queue: its statistics, or `None` when they could not be read, and
/// whether its memory estimate is known.
#[derive(Debug)]
struct QueueCollector(Vec<(String, Option<QueueInfo>, bool)>);

type Labels<'a> = [(&'static str, &'a str)];

/// One metric family: its name (without `_total` for counters, which the
/// encoder appends), Go's help text, type, and the value per queue.
struct Family {
    name: &'static str,
    help: &'static str,
    kind: MetricType,
    value: fn(&QueueInfo) -> f64,
    /// Only for queues whose memory estimate is known.
    needs_memory: bool,
}

const FAMILIES: &[Family] = &[
    Family {
        name: "asynq_queue_size",
        help: "Number of tasks in a queue",
        kind: MetricType::Gauge,
        value: |q| q.size as f64,
        needs_memory: false,
    },
    Family {
        name: "asynq_queue_latency_seconds",
        help: "Number of seconds the oldest pending task is waiting in pending state to be processed.",
        kind: MetricType::Gauge,
        value: |q| q.latency.as_secs_f64(),
        needs_memory: false,
    },
    Family {
        name: "asynq_queue_memory_usage_approx_bytes",
        help: "Number of memory used by a given queue (approximated number by sampling).",
        kind: MetricType::Gauge,
        value: |q| q.memory_usage as f64,
        needs_memory: true,
    },
    Family {
        name: "asynq_tasks_processed",
        help: "Number of tasks processed (both succeeded and failed); broken down by queue",
        kind: MetricType::Counter,
        value: |q| q.processed_total as f64,
        needs_memory: false,
    },
    Family {
        name: "asynq_tasks_failed",
        help: "Number of tasks failed; broken down by queue",
        kind: MetricType::Counter,
        value: |q| q.failed_total as f64,
        needs_memory: false,
    },
    Family {
        name: "asynq_queue_paused_total",
        help: "Number of queues paused",
        kind: MetricType::Gauge,
        value: |q| if q.paused { 1.0 } else { 0.0 },
        needs_memory: false,
    },
];

/// Reads one size out of a queue's statistics.
type Size = fn(&QueueInfo) -> i64;

/// Sizes per state, as Go's exporter lists them.
const STATES: &[(&str, Size)] = &[
    ("active", |q| q.active),
    ("pending", |q| q.pending),
    ("scheduled", |q| q.scheduled),
    ("retry", |q| q.retry),
    ("archived", |q| q.archived),
    ("completed", |q| q.completed),
];

impl Collector for QueueCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let ok: Vec<(&str, &QueueInfo, bool)> = self
            .0
            .iter()
            .filter_map(|(name, info, mem)| info.as_ref().map(|i| (name.as_str(), i, *mem)))
            .collect();
        if !ok.is_empty() {
            let mut family = encoder.encode_descriptor(
                "asynq_tasks_enqueued_total",
                "Number of tasks enqueued; broken down by queue and state.",
                None,
                MetricType::Gauge,
            )?;
            for (name, info, _) in &ok {
                for (state, size) in STATES {
                    let labels: &Labels = &[("queue", name), ("state", state)];
                    ConstGauge::new(size(info)).encode(family.encode_family(&labels)?)?;
                }
            }
            for f in FAMILIES {
                let mut family = encoder.encode_descriptor(f.name, f.help, None, f.kind)?;
                for (name, info, memory_known) in &ok {
                    if f.needs_memory && !memory_known {
                        continue;
                    }
                    let labels: &Labels = &[("queue", name)];
                    let metric = family.encode_family(&labels)?;
                    let v = (f.value)(info);
                    match f.kind {
                        MetricType::Counter => ConstCounter::new(v as u64).encode(metric)?,
                        // Whole numbers print as integers (`3`, not `3.0`), as Go's.
                        _ if v.fract() == 0.0 && v.abs() < 9.0e15 => {
                            ConstGauge::new(v as i64).encode(metric)?
                        }
                        _ => ConstGauge::new(v).encode(metric)?,
                    }
                }
            }
        }
        let failed: Vec<&str> = self
            .0
            .iter()
            .filter(|(_, info, _)| info.is_none())
            .map(|(name, _, _)| name.as_str())
            .collect();
        if !failed.is_empty() {
            let mut family = encoder.encode_descriptor(
                "asynqdeck_queue_stats_failed",
                "1 for a queue whose statistics could not be read (its asynq_* metrics are missing).",
                None,
                MetricType::Gauge,
            )?;
            for name in failed {
                let labels: &Labels = &[("queue", name)];
                ConstGauge::new(1i64).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::web::state::QueueRow;

    fn info(queue: &str) -> QueueInfo {
        QueueInfo {
            queue: queue.into(),
            memory_usage: 1234,
            latency: std::time::Duration::from_millis(1500),
            size: 9,
            groups: 0,
            pending: 3,
            active: 1,
            scheduled: 2,
            retry: 1,
            archived: 1,
            completed: 1,
            aggregating: 0,
            processed: 5,
            failed: 2,
            processed_total: 50,
            failed_total: 20,
            paused: true,
            timestamp: chrono::Utc::now(),
        }
    }

    /// Names, types, labels and values follow Go's exporter (x/metrics).
    #[test]
    fn go_exporter_names() {
        let snap = Snapshot {
            taken_at: chrono::Utc::now(),
            queues: vec![
                QueueRow {
                    name: "bad".into(),
                    info: Err("boom".into()),
                    memory: None,
                    growth: None,
                },
                QueueRow {
                    name: "default".into(),
                    info: Ok(info("default")),
                    memory: Some(crate::web::MemoryEstimate {
                        bytes: Ok(1234),
                        at: chrono::Utc::now(),
                    }),
                    growth: None,
                },
                QueueRow {
                    name: "new".into(),
                    info: Ok(QueueInfo {
                        memory_usage: 0,
                        ..info("new")
                    }),
                    memory: None,
                    growth: None,
                },
            ],
            error: None,
        };
        let text = render(&snap).unwrap();
        for line in [
            "# HELP asynq_tasks_enqueued_total Number of tasks enqueued; broken down by queue and state.",
            "# TYPE asynq_tasks_enqueued_total gauge",
            "asynq_tasks_enqueued_total{queue=\"default\",state=\"active\"} 1",
            "asynq_tasks_enqueued_total{queue=\"default\",state=\"pending\"} 3",
            "asynq_tasks_enqueued_total{queue=\"default\",state=\"completed\"} 1",
            "# HELP asynq_queue_size Number of tasks in a queue",
            "# TYPE asynq_queue_size gauge",
            "asynq_queue_size{queue=\"default\"} 9",
            "asynq_queue_latency_seconds{queue=\"default\"} 1.5",
            "asynq_queue_memory_usage_approx_bytes{queue=\"default\"} 1234",
            "# TYPE asynq_tasks_processed_total counter",
            "asynq_tasks_processed_total{queue=\"default\"} 50",
            "asynq_tasks_failed_total{queue=\"default\"} 20",
            "asynq_queue_paused_total{queue=\"default\"} 1",
            "asynqdeck_queue_stats_failed{queue=\"bad\"} 1",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        assert!(!text.contains("queue=\"bad\",state"), "{text}");
        // Not estimated yet: no memory sample rather than a made-up 0.
        assert!(text.contains("asynq_queue_size{queue=\"new\"} 9"), "{text}");
        assert!(
            !text.contains("asynq_queue_memory_usage_approx_bytes{queue=\"new\"}"),
            "{text}"
        );
    }
}
