//! The attention board (issue 17 item 4, COMPATIBILITY.md N5): every
//! finding kind from seeded data on a simulated clock, with its exact
//! text, severity and link, in board order; and the board on the overview.

use std::collections::BTreeMap;
use std::time::Duration;

use asynqdeck::broker::keys;
use asynqdeck::inspector::{Finding, FindingKind, FindingTarget, Severity, StatsHints};
use asynqdeck::web::{AppState, WebConfig};
use asynqdeck::{EnqueueOptions, Inspector, Task};
use redis::AsyncCommands;

use crate::support::clock::{self, Clocked, clocked};
use crate::support::{http, seed};

fn finding(
    severity: Severity,
    kind: FindingKind,
    queue: Option<&str>,
    text: &str,
    target: FindingTarget,
    value: i64,
) -> Finding {
    Finding {
        severity,
        kind,
        queue: queue.map(str::to_string),
        text: text.into(),
        target,
        value,
    }
}

fn tab(q: &str, t: &'static str) -> FindingTarget {
    FindingTarget::Queue(q.into(), Some(t))
}

/// Seeds one queue per finding kind (see the expected list in
/// `every_kind_from_seeded_data`), advancing the clock 10 minutes midway.
async fn seed_all(c: &mut Clocked) {
    let t0 = clock::now().timestamp();
    // A server consuming `critical` and `default`, beating for an hour.
    let good = seed::server("good", 1, "s1", 0);
    c.broker
        .write_server_state(&good, &[], Duration::from_secs(3600))
        .await
        .unwrap();
    // The dashboard's engine registers every queue at concurrency 0: it
    // consumes nothing.
    let mut engine = seed::server("engine", 3, "s3", 0);
    engine.concurrency = 0;
    engine.queues = BTreeMap::from([("idle".to_string(), 1), ("default".to_string(), 1)]);
    c.broker
        .write_server_state(&engine, &[], Duration::from_secs(3600))
        .await
        .unwrap();
    for q in ["default", "idle"] {
        c.client
            .enqueue(
                &Task::new("job", b"{}".to_vec()),
                EnqueueOptions::new().queue(q),
            )
            .await
            .unwrap();
    }
    seed::seeded_unleased(&mut c.conn, "orphan", "o1", "active").await;
    seed::task(&mut c.conn, "stalled", "s1", "scheduled", t0 - 300).await;
    // An active task whose lease ran out 2 minutes ago (after the advance).
    seed::task(&mut c.conn, "expired", "e1", "active", t0 + 480).await;
    c.clock.advance(Duration::from_secs(600));
    let now = t0 + 600;

    let _: () = c.conn.sadd(keys::ALL_QUEUES, "paused").await.unwrap();
    let _: () = c
        .conn
        .set(keys::paused_key("paused"), now - 7200)
        .await
        .unwrap();
    let _: () = c.conn.sadd(keys::ALL_QUEUES, "wave").await.unwrap();
    let wave: Vec<(i64, String)> = (0..100).map(|i| (now + 120, format!("w{i}"))).collect();
    let _: () = c
        .conn
        .zadd_multiple(keys::retry_key("wave"), &wave)
        .await
        .unwrap();
    let _: () = c.conn.sadd(keys::ALL_QUEUES, "full").await.unwrap();
    let mut pipe = redis::pipe();
    for chunk in (0..10_000).collect::<Vec<i64>>().chunks(1000) {
        let members: Vec<(i64, String)> =
            chunk.iter().map(|i| (now - 60, format!("a{i}"))).collect();
        pipe.zadd_multiple(keys::archived_key("full"), &members)
            .ignore();
    }
    let _: () = pipe.query_async(&mut c.conn).await.unwrap();
    // A server whose registration expires in 1 s: a beat missed.
    let mut late = seed::server("late", 2, "s2", 0);
    late.queues = BTreeMap::from([("other".to_string(), 1)]);
    c.broker
        .write_server_state(&late, &[], Duration::from_secs(1))
        .await
        .unwrap();
}

fn expected() -> Vec<Finding> {
    use FindingKind::*;
    use Severity::*;
    vec![
        finding(
            Critical,
            NoConsumer,
            Some("idle"),
            "Queue idle has 1 pending tasks and no server consumes it.",
            tab("idle", "pending"),
            1,
        ),
        finding(
            Critical,
            PastDue,
            Some("stalled"),
            "A scheduled task of queue stalled was due 15m 0s ago and is still waiting: is the forwarder running?",
            tab("stalled", "scheduled"),
            900,
        ),
        finding(
            Warning,
            OldestPending,
            Some("default"),
            "The oldest pending task of queue default has waited 10m 0s.",
            tab("default", "pending"),
            600,
        ),
        finding(
            Warning,
            OldestPending,
            Some("idle"),
            "The oldest pending task of queue idle has waited 10m 0s.",
            tab("idle", "pending"),
            600,
        ),
        finding(
            Warning,
            Orphaned,
            Some("expired"),
            "A lease of queue expired expired 2m 0s ago and its task is still active (orphaned).",
            tab("expired", "active"),
            1,
        ),
        finding(
            Warning,
            Orphaned,
            Some("orphan"),
            "1 active tasks of queue orphan hold no lease (orphaned).",
            tab("orphan", "active"),
            1,
        ),
        finding(
            Warning,
            RetryWave,
            Some("wave"),
            "A retry wave is coming on queue wave: 100 retries due in the next 5 minutes (0 in the next minute).",
            tab("wave", "retry"),
            100,
        ),
        finding(
            Warning,
            PausedLong,
            Some("paused"),
            "Queue paused has been paused for 2h 0m.",
            FindingTarget::Queue("paused".into(), None),
            7200,
        ),
        finding(
            Warning,
            ArchiveFull,
            Some("full"),
            "The archive of queue full holds 10000 tasks, asynq's cap: each new archived task evicts the oldest (export them to keep them).",
            tab("full", "archived"),
            10_000,
        ),
        finding(
            Warning,
            StaleServer,
            None,
            "Server late:2:s2 missed its heartbeat: its registration expires in 1s.",
            FindingTarget::Servers,
            1,
        ),
    ]
}

/// One queue per kind: the exact findings, most urgent first.
#[tokio::test]
async fn every_kind_from_seeded_data() {
    let mut c = clocked(clock::now()).await;
    seed_all(&mut c).await;
    let (snap, _) = c
        .inspector
        .stats_snapshot(false, &mut StatsHints::default())
        .await;
    let got = c.inspector.attention(&snap).await.unwrap();
    assert_eq!(got, expected());
    // What it costs the Redis budget: 6 commands for each of the 5 queues
    // holding scheduled, retry or active tasks or paused (expired, orphan,
    // paused, stalled, wave), 3 `ZCOUNT`s for wave, the late-server read
    // and the registry script, one `GET` per live server (3).
    assert_eq!(c.inspector.attention_commands(&snap), 6 * 5 + 3 + 2);
    let (again, sent) = c.inspector.attention_counted(&snap).await.unwrap();
    assert_eq!((again, sent), (expected(), 6 * 5 + 3 + 2 + 3));
}

/// Nothing to report on a healthy queue: a consumed queue with fresh
/// pending work and future scheduled tasks.
#[tokio::test]
async fn a_healthy_queue_has_no_finding() {
    let mut c = clocked(clock::now()).await;
    let good = seed::server("good", 1, "s1", 0);
    c.broker
        .write_server_state(&good, &[], Duration::from_secs(3600))
        .await
        .unwrap();
    c.client
        .enqueue(
            &Task::new("job", b"{}".to_vec()),
            EnqueueOptions::new().queue("default"),
        )
        .await
        .unwrap();
    let now = clock::now().timestamp();
    seed::task(&mut c.conn, "default", "later", "scheduled", now + 60).await;
    seed::seeded(&mut c.conn, "default", "busy", "active").await;
    let (snap, _) = c
        .inspector
        .stats_snapshot(false, &mut StatsHints::default())
        .await;
    assert_eq!(c.inspector.attention(&snap).await.unwrap(), vec![]);
}

/// The overview shows the board above the table: each finding with its
/// severity, escaped text and link, in order.
#[tokio::test]
async fn the_overview_shows_the_board() {
    let mut c = clocked(clock::now()).await;
    seed_all(&mut c).await;
    let state = AppState::new(
        Inspector::from_broker(c.broker.clone()),
        WebConfig::default(),
    );
    let app = asynqdeck::web::router(state);
    let (status, html) = http::get(&app, "/").await.parts();
    assert_eq!(status, 200);
    assert!(
        html.contains("<h2 class=\"attention-title\">Needs attention (10)</h2>"),
        "{html}"
    );
    let kinds: Vec<&str> = html
        .split("<li class=\"finding ")
        .skip(1)
        .map(|s| {
            s.split("data-kind=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "no_consumer",
            "past_due",
            "oldest_pending",
            "oldest_pending",
            "orphaned",
            "orphaned",
            "retry_wave",
            "paused_long",
            "archive_full",
            "stale_server"
        ]
    );
    assert!(html.contains(r#"<span class="finding-text">Queue idle has 1 pending tasks and no server consumes it.</span> <a class="finding-link" href="/queues/idle/pending">Pending tab →</a>"#), "{html}");
    assert!(html.contains(r#"<a class="finding-link" href="/servers">Servers →</a>"#));
    assert!(html.contains(r#"<a class="finding-link" href="/queues/paused">Queue →</a>"#));
    let board = html.find("id=\"attention\"").unwrap();
    assert!(board < html.find("<table class=\"grid queues-table\">").unwrap());
}

/// A queue name with markup is escaped on the board.
#[tokio::test]
async fn queue_names_are_escaped() {
    let mut c = clocked(clock::now()).await;
    c.client
        .enqueue(
            &Task::new("job", b"{}".to_vec()),
            EnqueueOptions::new().queue("<b>x</b>"),
        )
        .await
        .unwrap();
    let state = AppState::new(
        Inspector::from_broker(c.broker.clone()),
        WebConfig::default(),
    );
    let app = asynqdeck::web::router(state);
    let (_, html) = http::get(&app, "/").await.parts();
    assert!(
        html.contains("Queue &#60;b&#62;x&#60;/b&#62; has 1 pending tasks"),
        "{html}"
    );
    assert!(!html.contains("Queue <b>x</b>"));
    let _ = &mut c;
}

/// Behind Sentinel: after a failover this process saw, the board has a
/// warning linking to the Redis page, naming both masters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_failover_in_the_last_hour() {
    use crate::support::cluster::{SentinelConfig, SentinelSet};
    let set = tokio::task::spawn_blocking(|| {
        SentinelSet::start_with(SentinelConfig {
            min_replicas: true,
            ..SentinelConfig::default()
        })
    })
    .await
    .unwrap();
    let old = set.master_port;
    let broker = asynqdeck::broker::Broker::connect(&set.url())
        .await
        .unwrap();
    let inspector = Inspector::from_broker(broker.clone());
    let (snap, _) = inspector
        .stats_snapshot(false, &mut StatsHints::default())
        .await;
    assert_eq!(inspector.attention(&snap).await.unwrap(), vec![]);
    let set = std::sync::Arc::new(set);
    let s = set.clone();
    let new = tokio::task::spawn_blocking(move || s.failover())
        .await
        .unwrap();
    // The broker learns of it on its next command (or from the watcher).
    let (snap, _) = inspector
        .stats_snapshot(false, &mut StatsHints::default())
        .await;
    let got = crate::support::eventually(Duration::from_secs(15), || {
        let inspector = inspector.clone();
        let snap = snap.clone();
        async move {
            let got = inspector.attention(&snap).await.ok()?;
            (!got.is_empty()).then_some(got)
        }
    })
    .await
    .expect("a failover finding within 15 s");
    assert_eq!(got.len(), 1, "{got:?}");
    let f = &got[0];
    assert_eq!(
        (f.severity, f.kind, f.queue.as_deref(), &f.target),
        (
            Severity::Warning,
            FindingKind::Failover,
            None,
            &FindingTarget::Redis
        )
    );
    let prefix = format!("Sentinel failed over from 127.0.0.1:{old} to 127.0.0.1:{new} ");
    assert!(f.text.starts_with(&prefix), "{}", f.text);
}

/// The board's lines in `html`: (class, kind, severity, queue or "+N" for
/// an "and N more" line, text).
fn board_lines(html: &str) -> Vec<(String, String, String, String, String)> {
    let board = &html[html.find("id=\"attention\"").unwrap()..];
    let board = &board[..board.find("</section>").unwrap()];
    let attr = |s: &str, name: &str| {
        s.split(&format!("{name}=\""))
            .nth(1)
            .map(|v| v.split('"').next().unwrap().to_string())
            .unwrap_or_default()
    };
    board
        .split("<li class=\"")
        .skip(1)
        .map(|li| {
            let li = li.split("</li>").next().unwrap();
            let class = li.split([' ', '"']).next().unwrap().to_string();
            let who = if class == "finding-more" {
                format!("+{}", attr(li, "data-more"))
            } else {
                attr(li, "data-queue")
            };
            let text = li
                .split("<span class=\"finding-text\">")
                .nth(1)
                .unwrap()
                .split("</span>")
                .next()
                .unwrap()
                .to_string();
            (
                class,
                attr(li, "data-kind"),
                attr(li, "data-severity"),
                who,
                text,
            )
        })
        .collect()
}

/// 300 queues with pending tasks and no server: the board lists at most 5
/// findings per kind and severity, the most pressing first (more pending
/// tasks, an older task), and counts the rest on one line linking to the
/// overview sorted by the telling column; the title counts every finding,
/// the board stays small.
#[tokio::test]
async fn many_queues_fold_into_counted_lines() {
    let mut c = clocked(clock::now()).await;
    async fn one(c: &Clocked, q: String) {
        c.client
            .enqueue(
                &Task::new("job", b"{}".to_vec()),
                EnqueueOptions::new().queue(&q),
            )
            .await
            .unwrap();
    }
    // q123 waits longest (35 min: critical); q150 holds 3 tasks, q299 2.
    one(&c, "q123".into()).await;
    c.clock.advance(Duration::from_secs(25 * 60));
    for i in 0..300 {
        let q = format!("q{i:03}");
        let n = match i {
            123 => 0,
            150 => 3,
            299 => 2,
            _ => 1,
        };
        for _ in 0..n {
            one(&c, q.clone()).await;
        }
    }
    c.clock.advance(Duration::from_secs(10 * 60));
    let (snap, _) = c
        .inspector
        .stats_snapshot(false, &mut StatsHints::default())
        .await;
    // The inspector still returns every finding (the alerter needs them).
    assert_eq!(c.inspector.attention(&snap).await.unwrap().len(), 600);

    let state = AppState::new(
        Inspector::from_broker(c.broker.clone()),
        WebConfig::default(),
    );
    let app = asynqdeck::web::router(state);
    let (status, html) = http::get(&app, "/").await.parts();
    assert_eq!(status, 200);
    assert!(
        html.contains("<h2 class=\"attention-title\">Needs attention (600)</h2>"),
        "{html}"
    );
    let line = |class: &str, kind: &str, sev: &str, who: &str, text: &str| {
        (
            class.to_string(),
            kind.to_string(),
            sev.to_string(),
            who.to_string(),
            text.to_string(),
        )
    };
    let none = |q: &str, n: i64| {
        line(
            "finding",
            "no_consumer",
            "critical",
            q,
            &format!("Queue {q} has {n} pending tasks and no server consumes it."),
        )
    };
    let old = |q: &str| {
        line(
            "finding",
            "oldest_pending",
            "warning",
            q,
            &format!("The oldest pending task of queue {q} has waited 10m 0s."),
        )
    };
    assert_eq!(
        board_lines(&html),
        vec![
            none("q150", 3),
            none("q299", 2),
            none("q000", 1),
            none("q001", 1),
            none("q002", 1),
            line(
                "finding-more",
                "no_consumer",
                "critical",
                "+295",
                "and 295 more queues: pending tasks and no server consumes them."
            ),
            line(
                "finding",
                "oldest_pending",
                "critical",
                "q123",
                "The oldest pending task of queue q123 has waited 35m 0s."
            ),
            old("q000"),
            old("q001"),
            old("q002"),
            old("q003"),
            old("q004"),
            line(
                "finding-more",
                "oldest_pending",
                "warning",
                "+294",
                "and 294 more queues: the oldest pending task has waited over 5 minutes."
            ),
        ]
    );
    assert!(
        html.contains(
            r#"<a class="finding-link" href="/?sort=pending&#38;dir=desc">By pending →</a>"#
        ),
        "{html}"
    );
    assert!(html.contains(
        r#"<a class="finding-link" href="/?sort=latency&#38;dir=desc">By latency →</a>"#
    ));
    // The board's size is bounded by its lines, not by the queues.
    let board = &html[html.find("<section id=\"attention\"").unwrap()..];
    let board = &board[..board.find("</section>").unwrap()];
    assert!(board.len() < 6_000, "{} bytes", board.len());
    assert!(board_lines(&html).len() <= asynqdeck::web::attention::BOARD_MAX_LINES);
    let _ = &mut c;
}
