//! The demo workload: handlers that act out the seed stories, and a
//! producer that keeps every dashboard tab populated.
//!
//! | Task type | What it does | Seed |
//! | --- | --- | --- |
//! | `email:send` | fails now and then with a network error; default Sidekiq retries | S4 |
//! | `webhook:deliver` | calls a simulated partner that has outage windows; during one every call fails with the same error, so the retry tab grows and the outage banner fires; afterwards the retries drain | S14, S29 |
//! | `payment:charge` | answers "rate limited, retry after N s"; the policy honours the hint, and is linear for `payment:` otherwise | S9, S10 |
//! | `order:import` | an invalid payload returns SkipRetry wrapped with context: archived at once with a self-explanatory LastErr | S19, S22 |
//! | `webhook:dedupe` | duplicates return RevokeTask (logged) | S23 |
//! | `report:render` | panics on a poisoned input; kept 10 min as completed otherwise | S25 |
//! | `resource:heavy` | "no resource available" is not a failure: retried without counting | S24 |
//! | `email:digest` | grouped per user (`user:0` .. `user:2`, queue `low`); the server's group aggregator turns each group into one `email:digest:send` (grace 10 s, at most 10 per digest, none waits over 20 s: a digest of each user about every 20 s), kept 10 min as completed | issue 16 |
//! | `report:daily` | enqueued every 30 s by the demo's periodic scheduler (`/schedulers`), kept 10 min as completed | issue 16 |

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use anyhow::Context;
use chrono::Utc;
use rand::Rng;
use tokio_util::sync::CancellationToken;

use crate::server::{
    Backoff, Config, GroupAggregator, RetryAfter, RetryPolicy, RevokeTask, ServeMux, SkipRetry,
    TaskContext, TaskError,
};
use crate::{Client, EnqueueOptions, Task};

/// The simulated webhook partner: down during outage windows.
#[derive(Debug, Default)]
pub struct Partner {
    /// Unix seconds until which the partner is down (0 = up).
    down_until: AtomicI64,
}

impl Partner {
    /// Starts an outage lasting `d` from now.
    pub fn start_outage(&self, d: Duration) {
        let until = Utc::now().timestamp() + d.as_secs() as i64;
        self.down_until.store(until, Ordering::SeqCst);
    }

    /// Ends any outage now.
    pub fn end_outage(&self) {
        self.down_until.store(0, Ordering::SeqCst);
    }

    /// Seconds of outage left, 0 when up.
    pub fn outage_left(&self) -> i64 {
        (self.down_until.load(Ordering::SeqCst) - Utc::now().timestamp()).max(0)
    }

    fn call(&self) -> Result<(), TaskError> {
        if self.outage_left() > 0 {
            anyhow::bail!("POST https://partner.example/hooks: 503 Service Unavailable");
        }
        Ok(())
    }
}

/// Settings of the demo workload.
#[derive(Clone, Debug)]
pub struct DemoConfig {
    /// Outage windows of the webhook partner: every `outage_every`, down for
    /// `outage_for` (the first starts `outage_every / 4` after start).
    pub outage_every: Duration,
    /// Length of each outage window.
    pub outage_for: Duration,
    /// Tasks the producer enqueues per second (spread over the task types).
    pub rate_per_sec: u32,
}

impl Default for DemoConfig {
    fn default() -> Self {
        DemoConfig {
            outage_every: Duration::from_secs(180),
            outage_for: Duration::from_secs(60),
            rate_per_sec: 8,
        }
    }
}

fn sleep_ms(lo: u64, hi: u64) -> tokio::time::Sleep {
    tokio::time::sleep(Duration::from_millis(rand::rng().random_range(lo..=hi)))
}

/// The demo's handlers.
pub fn mux(partner: Arc<Partner>) -> ServeMux {
    let mut mux = ServeMux::new();
    mux.handle_fn("email:send", |_ctx: TaskContext, _t: Task| async move {
        sleep_ms(50, 400).await;
        if rand::rng().random_bool(0.2) {
            anyhow::bail!("dial tcp 10.0.3.7:25: connect: connection timed out");
        }
        Ok(())
    });
    let p = partner.clone();
    mux.handle_fn("webhook:deliver", move |_ctx: TaskContext, _t: Task| {
        let p = p.clone();
        async move {
            sleep_ms(20, 200).await;
            p.call()
        }
    });
    mux.handle_fn("payment:charge", |_ctx: TaskContext, _t: Task| async move {
        sleep_ms(100, 600).await;
        if rand::rng().random_bool(0.3) {
            let secs = rand::rng().random_range(20..=40);
            return Err(
                anyhow::Error::new(RetryAfter(Duration::from_secs(secs))).context(format!(
                    "payment provider: 429 rate limited, retry after {secs} s"
                )),
            );
        }
        Ok(())
    });
    mux.handle_fn("order:import", |ctx: TaskContext, t: Task| async move {
        sleep_ms(20, 100).await;
        let order: serde_json::Value = serde_json::from_slice(t.payload()).map_err(|e| {
            anyhow::Error::new(SkipRetry).context(format!("order payload is not JSON: {e}"))
        })?;
        if order.get("sku").is_none() {
            return Err(anyhow::Error::new(SkipRetry)).with_context(|| {
                format!(
                    "task {} (attempt {}): order {} invalid: missing field \"sku\"",
                    ctx.task_id(),
                    ctx.retry_count() + 1,
                    order.get("order").and_then(|o| o.as_i64()).unwrap_or(0)
                )
            });
        }
        Ok(())
    });
    mux.handle_fn("webhook:dedupe", |ctx: TaskContext, t: Task| async move {
        if t.payload().ends_with(b"dup") {
            tracing::info!(id = ctx.task_id(), "duplicate webhook: revoked");
            return Err(RevokeTask.into());
        }
        Ok(())
    });
    mux.handle_fn("report:render", |ctx: TaskContext, t: Task| async move {
        sleep_ms(500, 3000).await;
        if t.payload().windows(6).any(|w| w == b"poison") {
            panic!("report template crashed on poisoned input");
        }
        ctx.result_writer()
            .write(br#"{"pages":3,"url":"https://reports.example/r.pdf"}"#)
            .await
            .context("writing result")?;
        Ok(())
    });
    mux.handle_fn(DIGEST_TYPE, |_ctx: TaskContext, _t: Task| async move {
        sleep_ms(50, 300).await;
        Ok(())
    });
    mux.handle_fn(REPORT_TYPE, |ctx: TaskContext, _t: Task| async move {
        sleep_ms(200, 800).await;
        ctx.result_writer()
            .write(br#"{"rows":1200}"#)
            .await
            .context("writing result")?;
        Ok(())
    });
    mux.handle_fn("resource:heavy", |_ctx: TaskContext, _t: Task| async move {
        sleep_ms(200, 2000).await;
        if rand::rng().random_bool(0.3) {
            anyhow::bail!("no resource available: GPU pool busy");
        }
        Ok(())
    });
    mux
}

/// The server settings of the demo: the policies of S8–S10 and is_failure (S24).
pub fn config() -> Config {
    let policy = RetryPolicy::new(Backoff::Capped(Duration::from_secs(600)))
        .rule("payment:", Backoff::Linear(Duration::from_secs(20)))
        .rule(
            "webhook:",
            Backoff::Exponential {
                base: Duration::from_secs(5),
                factor: 2,
                cap: Duration::from_secs(40),
            },
        )
        .rule("resource:", Backoff::Constant(Duration::from_secs(10)));
    Config {
        // A little less capacity than the default rate needs, so the
        // pending tab always has rows; the producer holds back when the
        // backlog passes MAX_BACKLOG.
        concurrency: 3,
        queues: [
            ("critical".to_string(), 6),
            ("default".to_string(), 3),
            ("low".to_string(), 1),
        ]
        .into(),
        retry_delay_func: policy.into_fn(),
        is_failure: Arc::new(|err: &TaskError| {
            !format!("{err:#}").contains("no resource available")
        }),
        forwarder_interval: Duration::from_secs(2),
        group_aggregator: Some(digest_aggregator()),
        group_grace_period: Duration::from_secs(10),
        group_max_delay: Duration::from_secs(20),
        group_max_size: 10,
        ..Config::default()
    }
}

/// The aggregated task type: one e-mail digest per user group.
pub const DIGEST_TYPE: &str = "email:digest:send";
/// The periodic task type (`@every 30s`, see [`report_entry`]).
pub const REPORT_TYPE: &str = "report:daily";

/// Turns a group of `email:digest` tasks into one `email:digest:send`
/// whose payload lists them: `{"group":"user:1","count":3,"items":[...]}`,
/// kept 10 min as completed so the completed tab of `low` shows it.
pub fn digest_aggregator() -> std::sync::Arc<dyn GroupAggregator> {
    Arc::new(|group: &str, tasks: Vec<Task>| {
        let items: Vec<serde_json::Value> = tasks
            .iter()
            .map(|t| {
                serde_json::from_slice(t.payload()).unwrap_or_else(|_| {
                    serde_json::Value::String(String::from_utf8_lossy(t.payload()).into_owned())
                })
            })
            .collect();
        let body = serde_json::json!({"group": group, "count": tasks.len(), "items": items});
        Task::new(DIGEST_TYPE, body.to_string())
            .with_options(EnqueueOptions::new().retention(Duration::from_secs(600)))
    })
}

/// The demo's periodic entry: `(cronspec, task, options)`.
pub fn report_entry() -> (&'static str, Task, EnqueueOptions) {
    (
        "@every 30s",
        Task::new(REPORT_TYPE, br#"{"report":"daily"}"#.to_vec()),
        EnqueueOptions::new()
            .queue("low")
            .max_retry(3)
            .retention(Duration::from_secs(600)),
    )
}

/// Enqueues a steady mix of tasks until `shutdown`, and runs the partner's
/// outage windows.
pub async fn produce(
    client: Client,
    partner: Arc<Partner>,
    cfg: DemoConfig,
    shutdown: CancellationToken,
) {
    let outage = {
        let (partner, cfg, shutdown) = (partner.clone(), cfg.clone(), shutdown.clone());
        tokio::spawn(async move {
            let mut next = tokio::time::Instant::now() + cfg.outage_every / 4;
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep_until(next) => {}
                }
                tracing::info!("demo: partner outage starts ({:?})", cfg.outage_for);
                partner.start_outage(cfg.outage_for);
                next += cfg.outage_every;
            }
        })
    };
    let period = Duration::from_millis(1000 / u64::from(cfg.rate_per_sec.max(1)));
    let inspector = crate::Inspector::from_broker(client.broker().clone());
    let mut n: u64 = 0;
    let (mut backlog, mut aggregating) = (0, 0);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(period) => {}
        }
        n += 1;
        if n.is_multiple_of(20) {
            (backlog, aggregating) = backlogs(&inspector).await;
        }
        if backlog > MAX_BACKLOG {
            continue;
        }
        let (task, opts) = next_task(n);
        // The aggregator drains the groups; this only bounds them while
        // the workers are far behind.
        if task.type_name() == GROUPED_TYPE && aggregating > MAX_AGGREGATING {
            continue;
        }
        if let Err(err) = client.enqueue(&task, opts).await {
            tracing::warn!(%err, "demo producer: enqueue failed");
        }
    }
    let _ = outage.await;
}

/// Pending tasks above which the producer pauses (the demo runs for hours
/// without its backlog growing without bound).
const MAX_BACKLOG: i64 = 200;
/// Aggregating tasks above which the producer stops adding grouped ones.
const MAX_AGGREGATING: i64 = 100;
/// The task type the demo puts in groups.
const GROUPED_TYPE: &str = "email:digest";

/// Pending and aggregating tasks over the demo's queues.
async fn backlogs(inspector: &crate::Inspector) -> (i64, i64) {
    let (mut pending, mut aggregating) = (0, 0);
    for q in ["critical", "default", "low"] {
        if let Ok(info) = inspector.queue_info(q).await {
            pending += info.pending;
            aggregating += info.aggregating;
        }
    }
    (pending, aggregating)
}

/// The n-th task of the mix.
fn next_task(n: u64) -> (Task, EnqueueOptions) {
    let mut rng = rand::rng();
    match n % 10 {
        0 | 1 => (
            Task::new(
                "email:send",
                format!(r#"{{"to":"user{n}@example.com","template":"welcome"}}"#),
            ),
            EnqueueOptions::new(),
        ),
        2 | 3 => (
            Task::new(
                "webhook:deliver",
                format!(r#"{{"event":"order.paid","order":{n}}}"#),
            )
            .with_header("trace-id", format!("{:016x}", rng.random::<u64>())),
            EnqueueOptions::new().queue("critical").max_retry(8),
        ),
        4 => (
            Task::new(
                "payment:charge",
                format!(
                    r#"{{"order":{n},"amount_cents":{}}}"#,
                    rng.random_range(100..50_000)
                ),
            ),
            EnqueueOptions::new().queue("critical").max_retry(5),
        ),
        5 => {
            let body = if rng.random_bool(0.4) {
                format!(r#"{{"order":{n}}}"#)
            } else {
                format!(
                    r#"{{"order":{n},"sku":"SKU-{}"}}"#,
                    rng.random_range(1..999)
                )
            };
            (Task::new("order:import", body), EnqueueOptions::new())
        }
        6 => {
            let body = if rng.random_bool(0.3) {
                format!("event-{}-dup", n - 1)
            } else {
                format!("event-{n}")
            };
            (
                Task::new("webhook:dedupe", body),
                EnqueueOptions::new().queue("low"),
            )
        }
        7 => {
            let body = if rng.random_bool(0.15) {
                format!("report {n} poison")
            } else {
                format!("report {n}")
            };
            (
                Task::new("report:render", body),
                EnqueueOptions::new()
                    .queue("low")
                    .max_retry(1)
                    .retention(Duration::from_secs(600)),
            )
        }
        8 => (
            Task::new("resource:heavy", format!(r#"{{"job":{n}}}"#)),
            EnqueueOptions::new().process_in(Duration::from_secs(rng.random_range(5..120))),
        ),
        _ => (
            Task::new(GROUPED_TYPE, format!(r#"{{"user":{}}}"#, n % 7)),
            EnqueueOptions::new()
                .group(format!("user:{}", n % 3))
                .queue("low"),
        ),
    }
}
