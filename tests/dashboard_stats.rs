//! The dashboard's statistics snapshot on a real Redis (issue 4 performance
//! targets): `Inspector::queues_stats` reads every queue in one script call
//! and returns exactly what `queue_info` does per queue (memory aside), one
//! corrupt queue fails only its own row, the reduced outage-series read gives
//! the same growth figures as the full read; the `StatsCache` serves the
//! previous slot's snapshot without waiting, estimates memory in the
//! background, and `invalidate` still gives the acting viewer fresh numbers.

use std::sync::Arc;
use std::time::Duration;

use crate::support::redis::RawConn;
use asynqdeck::broker::{Broker, keys, samples_key};
use asynqdeck::clock::SimulatedClock;
use asynqdeck::inspector::{QueueInfo, QueueSample, StatsHints, retry_growth};
use asynqdeck::web::{AppState, MemoryEstimate, StatsCache, WebConfig};
use asynqdeck::{Client, EnqueueOptions, Error, Inspector, Task};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use chrono::DateTime;
use http_body_util::BodyExt;
use redis::AsyncCommands;
use tower::ServiceExt;

use crate::support::clock::{Clocked as World, clocked_on, now};
use crate::support::http;
use crate::support::seed;
use crate::support::{self};

async fn enqueue(w: &World, q: &str, opts: EnqueueOptions) {
    w.client
        .enqueue(&Task::new("t", b"payload".to_vec()), opts.queue(q))
        .await
        .unwrap();
}

/// Queues in several states: `critical` with every state, groups, counters,
/// a pause and a 42 s latency; `plain` with pending tasks only; `retrying`
/// with retry tasks only; `grouped` with aggregating tasks only.
async fn seed_queues(w: &mut World) {
    let q = "critical";
    w.clock.set(now() - chrono::Duration::seconds(42));
    enqueue(w, q, EnqueueOptions::new()).await;
    w.clock.set(now());
    enqueue(w, q, EnqueueOptions::new()).await;
    enqueue(
        w,
        q,
        EnqueueOptions::new().process_in(Duration::from_secs(60)),
    )
    .await;
    for g in ["g1", "g1", "g2"] {
        enqueue(w, q, EnqueueOptions::new().group(g)).await;
    }
    seed::seeded_unleased(&mut w.conn, q, "a1", "active").await;
    for i in 0..3 {
        seed::seeded_unleased(&mut w.conn, q, &format!("r{i}"), "retry").await;
    }
    seed::seeded_unleased(&mut w.conn, q, "x1", "archived").await;
    seed::seeded_unleased(&mut w.conn, q, "c1", "completed").await;
    let today = now().date_naive();
    let _: () = w.conn.set(keys::processed_key(q, today), 7).await.unwrap();
    let _: () = w.conn.set(keys::failed_key(q, today), 2).await.unwrap();
    let _: () = w.conn.set(keys::processed_total_key(q), 100).await.unwrap();
    let _: () = w.conn.set(keys::failed_total_key(q), 10).await.unwrap();
    w.inspector.pause_queue(q).await.unwrap();

    for _ in 0..4 {
        enqueue(w, "plain", EnqueueOptions::new()).await;
    }
    for i in 0..2 {
        seed::seeded_unleased(&mut w.conn, "retrying", &format!("r{i}"), "retry").await;
    }
    enqueue(w, "grouped", EnqueueOptions::new().group("only")).await;
}

/// `queue_info` with the memory estimate left out (`queues_stats` reports 0).
async fn info_without_memory(insp: &Inspector, q: &str) -> QueueInfo {
    QueueInfo {
        memory_usage: 0,
        ..insp.queue_info(q).await.unwrap()
    }
}

/// One `queues_stats` call gives, for each queue, exactly what `queue_info`
/// gives (memory aside): counts per state, groups, aggregating, counters,
/// pause, latency and time; a queue not in `asynq:queues` is
/// `QueueNotFound` and a blank name `InvalidQueueName`, each in its own row.
#[tokio::test]
async fn queues_stats_equals_queue_info_per_queue() {
    let db = support::redis();
    let mut w = clocked_on(db.clone(), now()).await;
    seed_queues(&mut w).await;
    let names = w.inspector.queues().await.unwrap();
    assert_eq!(names, ["critical", "grouped", "plain", "retrying"]);
    let mut asked = names.clone();
    asked.insert(1, "gone".to_string());
    asked.push(String::new());

    let rows = w.inspector.queues_stats(&asked, true).await.unwrap();
    assert_eq!(
        rows.iter().map(|r| r.queue.as_str()).collect::<Vec<_>>(),
        ["critical", "gone", "grouped", "plain", "retrying", ""]
    );
    for row in &rows {
        match row.queue.as_str() {
            "gone" => assert!(
                matches!(&row.info, Err(Error::QueueNotFound { queue }) if queue == "gone"),
                "{row:?}"
            ),
            "" => assert!(matches!(row.info, Err(Error::InvalidQueueName)), "{row:?}"),
            q => {
                let expected = info_without_memory(&w.inspector, q).await;
                assert_eq!(row.info.as_ref().unwrap(), &expected, "{q}");
                assert_eq!(
                    row.samples.as_ref().unwrap().as_ref().unwrap(),
                    &Vec::new(),
                    "{q}: no series"
                );
            }
        }
    }
    // Without samples: the same numbers, no samples read.
    let counts_only = w.inspector.queues_stats(&names, false).await.unwrap();
    for (row, full) in counts_only
        .iter()
        .zip(rows.iter().filter(|r| names.contains(&r.queue)))
    {
        assert_eq!(row.queue, full.queue);
        assert_eq!(row.info.as_ref().unwrap(), full.info.as_ref().unwrap());
        assert!(row.samples.is_none());
    }

    let critical = rows[0].info.as_ref().unwrap();
    assert_eq!(
        (
            critical.pending,
            critical.active,
            critical.scheduled,
            critical.retry,
            critical.archived,
            critical.completed,
            critical.aggregating,
            critical.groups,
        ),
        (2, 1, 1, 3, 1, 1, 3, 2)
    );
    assert_eq!(critical.size, 12);
    assert_eq!((critical.processed, critical.failed), (7, 2));
    assert_eq!((critical.processed_total, critical.failed_total), (100, 10));
    assert!(critical.paused);
    assert_eq!(critical.latency, Duration::from_secs(42));
    assert_eq!(critical.timestamp, now());
    assert_eq!(critical.memory_usage, 0);
}

/// The batched memory estimates (ten queues per script call) equal the
/// per-queue estimate of `queue_info`, for queues with every state, groups
/// and more queues than one call takes; a queue with a key of the wrong type
/// gets its error, the others their numbers.
#[tokio::test]
async fn queues_memory_usage_equals_per_queue_estimates() {
    let db = support::redis();
    let mut w = clocked_on(db.clone(), now()).await;
    seed_queues(&mut w).await;
    for i in 0..12 {
        for j in 0..(i % 4) {
            enqueue(&w, &format!("extra-{i:02}"), EnqueueOptions::new()).await;
            seed::seeded_unleased(
                &mut w.conn,
                &format!("extra-{i:02}"),
                &format!("r{j}"),
                "retry",
            )
            .await;
        }
        let _: () = w
            .conn
            .sadd(keys::ALL_QUEUES, format!("extra-{i:02}"))
            .await
            .unwrap();
    }
    enqueue(&w, "typed", EnqueueOptions::new()).await;
    let _: () = w
        .conn
        .set(keys::completed_key("typed"), "a string")
        .await
        .unwrap();
    let names = w.inspector.queues().await.unwrap();
    assert_eq!(names.len(), 17);
    let estimates = w.inspector.queues_memory_usage(&names).await.unwrap();
    assert_eq!(
        estimates.iter().map(|(q, _)| q.clone()).collect::<Vec<_>>(),
        names
    );
    for (q, estimate) in &estimates {
        if q == "typed" {
            let err = estimate.as_ref().unwrap_err();
            assert!(err.to_string().contains("WRONGTYPE"), "{err}");
            assert!(w.inspector.queue_memory_usage(q).await.is_err());
        } else {
            let expected = w.inspector.queue_info(q).await.unwrap().memory_usage;
            assert_eq!(estimate.as_ref().unwrap(), &expected, "{q}");
            assert_eq!(w.inspector.queue_memory_usage(q).await.unwrap(), expected);
        }
    }
}

/// More queues than one script call reads (100): every queue is read, in
/// order, each with its own count.
#[tokio::test]
async fn queues_stats_reads_any_number_of_queues() {
    let db = support::redis();
    let mut w = clocked_on(db.clone(), now()).await;
    let names: Vec<String> = (0..130).map(|i| format!("q{i:03}")).collect();
    for (i, q) in names.iter().enumerate() {
        for j in 0..(i % 3) {
            seed::seeded_unleased(&mut w.conn, q, &format!("r{j}"), "retry").await;
        }
        let _: () = w.conn.sadd(keys::ALL_QUEUES, q).await.unwrap();
    }
    let rows = w.inspector.queues_stats(&names, true).await.unwrap();
    assert_eq!(rows.len(), 130);
    for (i, (row, q)) in rows.iter().zip(&names).enumerate() {
        assert_eq!(&row.queue, q);
        assert_eq!(row.info.as_ref().unwrap().retry, (i % 3) as i64, "{q}");
    }
}

/// A queue with a key of the wrong type (the archive is a string) gets an
/// error row with Redis's WRONGTYPE text, a queue with a counter that is not
/// a number the same `Corrupt` error `queue_info` gives, a series of the
/// wrong type only fails that queue's samples; every other queue is intact.
#[tokio::test]
async fn one_corrupt_queue_fails_only_its_row() {
    let db = support::redis();
    let mut w = clocked_on(db.clone(), now()).await;
    seed_queues(&mut w).await;
    enqueue(&w, "typed", EnqueueOptions::new()).await;
    let _: () = w
        .conn
        .set(keys::archived_key("typed"), "a string, not a zset")
        .await
        .unwrap();
    enqueue(&w, "counted", EnqueueOptions::new()).await;
    let _: () = w
        .conn
        .set(keys::processed_total_key("counted"), "not-a-number")
        .await
        .unwrap();
    let _: () = w
        .conn
        .set(samples_key("plain"), "a string, not a series")
        .await
        .unwrap();

    let names = w.inspector.queues().await.unwrap();
    let rows = w.inspector.queues_stats(&names, true).await.unwrap();
    assert_eq!(rows.len(), 6);
    for row in &rows {
        match row.queue.as_str() {
            "typed" => {
                let err = row.info.as_ref().unwrap_err();
                assert!(matches!(err, Error::Redis(_)), "{err:?}");
                assert!(!err.is_redis_unavailable());
                let text = err.to_string();
                assert!(
                    text.starts_with(
                        "redis: \"WRONGTYPE\": Operation against a key holding the wrong kind of value"
                    ),
                    "{text}"
                );
                assert!(w.inspector.queue_info("typed").await.is_err());
            }
            "counted" => {
                let err = row.info.as_ref().unwrap_err();
                assert_eq!(
                    err.to_string(),
                    "corrupt data in Redis at asynq:{counted}:processed: counter is not an integer: \"not-a-number\""
                );
                assert_eq!(
                    w.inspector
                        .queue_info("counted")
                        .await
                        .unwrap_err()
                        .to_string(),
                    err.to_string()
                );
            }
            q => {
                let expected = info_without_memory(&w.inspector, q).await;
                assert_eq!(row.info.as_ref().unwrap(), &expected, "{q}");
                let samples = row.samples.as_ref().unwrap();
                if q == "plain" {
                    let err = samples.as_ref().unwrap_err();
                    assert!(err.to_string().contains("WRONGTYPE"), "{err}");
                } else {
                    assert_eq!(samples.as_ref().unwrap(), &Vec::new());
                }
            }
        }
    }
}

/// Asserts that every row equals `queue_info` (memory aside), or fails
/// with Redis's WRONGTYPE where `queue_info` fails.
async fn assert_rows_exact(w: &World, rows: &[asynqdeck::inspector::QueueStatsRow]) {
    for row in rows {
        match w.inspector.queue_info(&row.queue).await {
            Ok(info) => assert_eq!(
                row.info.as_ref().unwrap(),
                &QueueInfo {
                    memory_usage: 0,
                    ..info
                },
                "{}",
                row.queue
            ),
            Err(e) => {
                let wrongtype =
                    "redis: \"WRONGTYPE\": Operation against a key holding the wrong kind of value";
                assert!(e.to_string().starts_with(wrongtype), "{e}");
                let err = row.info.as_ref().unwrap_err();
                assert_eq!(err.to_string(), wrongtype, "{}", row.queue);
            }
        }
    }
}

/// The hints of the previous call (which keys held something) never change
/// the numbers: a kind that appears where the hints say absent is found
/// (one more transaction) and read, one that went away reads 0, a key of
/// the wrong type where nothing was expected fails only its queue. With
/// hints that match, one transaction reads everything.
#[tokio::test]
async fn hints_never_change_the_numbers() {
    let db = support::redis();
    let mut w = clocked_on(db.clone(), now()).await;
    seed_queues(&mut w).await;
    enqueue(&w, "typed", EnqueueOptions::new()).await;
    let names = w.inspector.queues().await.unwrap();
    // Loads the script (the transaction counts below leave NOSCRIPT out).
    w.inspector.queues_stats(&names, false).await.unwrap();
    let mut hints = StatsHints::default();
    assert_eq!(hints.members(), None);
    // On a cluster every queue is read in a transaction of its own, all
    // its kinds at once, whatever the hints say (COMPATIBILITY.md K5).
    let tx = |standalone: usize| {
        if support::redis::cluster_mode() {
            names.len()
        } else {
            standalone
        }
    };

    // No hints yet: every kind present somewhere is found, then read.
    let rows = w
        .inspector
        .queues_stats_with(&names, true, &mut hints)
        .await
        .unwrap();
    assert_rows_exact(&w, &rows).await;
    assert_eq!(hints.members(), Some(names.as_slice()));
    assert_eq!(hints.last_transactions(), tx(2));
    let rows = w
        .inspector
        .queues_stats_with(&names, false, &mut hints)
        .await
        .unwrap();
    assert_rows_exact(&w, &rows).await;
    assert_eq!(
        hints.last_transactions(),
        tx(1),
        "hints right: one transaction"
    );

    // `plain` (pending only) gets every other kind; `retrying` loses its
    // retry set; `typed` gets an active "list" that is a string.
    let q = "plain";
    seed::seeded_unleased(&mut w.conn, q, "a1", "active").await;
    enqueue(
        &w,
        q,
        EnqueueOptions::new().process_in(Duration::from_secs(60)),
    )
    .await;
    seed::seeded_unleased(&mut w.conn, q, "r1", "retry").await;
    seed::seeded_unleased(&mut w.conn, q, "x1", "archived").await;
    seed::seeded_unleased(&mut w.conn, q, "c1", "completed").await;
    enqueue(&w, q, EnqueueOptions::new().group("g")).await;
    let _: () = w.conn.del(keys::retry_key("retrying")).await.unwrap();
    let _: () = w
        .conn
        .set(keys::active_key("typed"), "a string, not a list")
        .await
        .unwrap();
    let rows = w
        .inspector
        .queues_stats_with(&names, true, &mut hints)
        .await
        .unwrap();
    assert_rows_exact(&w, &rows).await;
    assert_eq!(hints.last_transactions(), tx(2));
    let typed = rows.iter().find(|r| r.queue == "typed").unwrap();
    assert!(typed.info.is_err());
    let plain = rows.iter().find(|r| r.queue == "plain").unwrap();
    let plain = plain.info.as_ref().unwrap();
    assert_eq!(
        (
            plain.pending,
            plain.active,
            plain.scheduled,
            plain.retry,
            plain.archived,
            plain.completed,
            plain.groups,
            plain.aggregating
        ),
        (4, 1, 1, 1, 1, 1, 1, 1)
    );
    let retrying = rows.iter().find(|r| r.queue == "retrying").unwrap();
    assert_eq!(retrying.info.as_ref().unwrap().retry, 0);
    // The new hints match again.
    let rows = w
        .inspector
        .queues_stats_with(&names, true, &mut hints)
        .await
        .unwrap();
    assert_rows_exact(&w, &rows).await;
    assert_eq!(hints.last_transactions(), tx(1));
}

/// The queue list of the hints is checked in the same transaction: a queue
/// deleted since is `QueueNotFound` and the hints carry the new list; the
/// statistics cache then reads the new list, so its snapshot has exactly
/// the queues that exist. A flushed script cache is reloaded.
#[tokio::test]
async fn queue_list_changes_and_script_flush_are_seen() {
    let db = support::redis();
    let mut w = clocked_on(db.clone(), now()).await;
    for q in ["a", "b"] {
        enqueue(&w, q, EnqueueOptions::new()).await;
    }
    let cache = StatsCache::new(Duration::from_secs(60));
    let snap = cache.get(&w.inspector).await;
    let names = |snap: &asynqdeck::web::Snapshot| {
        snap.queues
            .iter()
            .map(|r| r.name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&snap), ["a", "b"]);

    w.inspector.delete_queue("b", true).await.unwrap();
    enqueue(&w, "c", EnqueueOptions::new()).await;
    enqueue(&w, "c", EnqueueOptions::new()).await;
    let mut hints = StatsHints::default();
    let old = vec!["a".to_string(), "b".to_string()];
    let rows = w
        .inspector
        .queues_stats_with(&old, false, &mut hints)
        .await
        .unwrap();
    assert!(matches!(&rows[1].info, Err(Error::QueueNotFound { queue }) if queue == "b"));
    assert_eq!(rows[0].info.as_ref().unwrap().pending, 1);
    assert_eq!(hints.members().unwrap(), ["a", "c"]);

    cache.invalidate().await;
    let snap = cache.get(&w.inspector).await;
    assert_eq!(names(&snap), ["a", "c"]);
    assert_eq!((pending(&snap, "a"), pending(&snap, "c")), (1, 2));

    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut w.conn)
        .await
        .unwrap();
    let rows = w
        .inspector
        .queues_stats_with(&["a".to_string(), "c".to_string()], true, &mut hints)
        .await
        .unwrap();
    assert_rows_exact(&w, &rows).await;
    // On a cluster, each of the two queues is its own transaction.
    let per_queue = if support::redis::cluster_mode() { 2 } else { 1 };
    assert_eq!(
        hints.last_transactions(),
        2 * per_queue,
        "one to find NOSCRIPT, one to read"
    );
}

/// Samples `(seconds before now, retry size, member suffix)`.
type Series<'a> = Vec<(i64, i64, &'a str)>;

/// Writes samples `(seconds before now, retry size)` to `q`'s series as the
/// sampler does (member `<t>:<retry>:<archived>`, score t); `suffix` makes a
/// second engine's sample of the same second distinct.
async fn write_series(conn: &mut RawConn, q: &str, samples: &[(i64, i64, &str)]) {
    for (ago, retry, suffix) in samples {
        let t = now().timestamp() - ago;
        let member = format!("{t}:{retry}:{}{suffix}", retry / 2);
        let _: () = conn.zadd(samples_key(q), member, t).await.unwrap();
    }
}

/// The reduced series read (at most 5 samples) gives exactly the growth
/// figures of the full read, for short, medium, long and irregular series,
/// samples of one second from two engines, one sample, and none.
#[tokio::test]
async fn growth_from_the_reduced_read_equals_the_full_read() {
    let db = support::redis();
    let mut w = clocked_on(db.clone(), now()).await;
    // Every 5 s for 2 h (older than the 1 h window: not read), growing.
    let long: Vec<(i64, i64, &str)> = (0..1440).map(|i| (i * 5, 2000 - i, "")).collect();
    // Irregular: gaps, and two engines sampling the same seconds.
    let irregular = vec![
        (0, 90, ""),
        (0, 91, "0"),
        (250, 70, ""),
        (301, 60, ""),
        (301, 61, "0"),
        (899, 40, ""),
        (1200, 30, ""),
        (1200, 29, "0"),
        (3500, 5, ""),
        (3500, 4, "0"),
    ];
    let series: Vec<(&str, Series)> = vec![
        ("long", long),
        (
            "medium",
            (0..240)
                .map(|i| (i * 5, 300 - i))
                .map(|(a, r)| (a, r, ""))
                .collect(),
        ),
        ("short", vec![(0, 50, ""), (10, 20, ""), (20, 0, "")]),
        ("irregular", irregular),
        ("one", vec![(30, 7, "")]),
        ("stale", vec![(4000, 3, ""), (3700, 9, "")]),
        ("none", vec![]),
    ];
    let mut names = Vec::new();
    for (q, samples) in &series {
        seed::seeded_unleased(&mut w.conn, q, "r0", "retry").await;
        write_series(&mut w.conn, q, samples).await;
        names.push(q.to_string());
    }
    names.sort();
    let rows = w.inspector.queues_stats(&names, true).await.unwrap();
    for row in rows {
        let reduced = row.samples.unwrap().unwrap();
        let full = w.inspector.queue_samples(&row.queue).await.unwrap();
        assert!(reduced.len() <= 5, "{}: {reduced:?}", row.queue);
        for s in &reduced {
            assert!(full.contains(s), "{}: {s:?} is a real sample", row.queue);
        }
        for at in [now(), now() + chrono::Duration::seconds(200)] {
            assert_eq!(
                retry_growth(&reduced, at),
                retry_growth(&full, at),
                "{} at {at}",
                row.queue
            );
        }
        match row.queue.as_str() {
            "none" | "stale" => assert!(reduced.is_empty()),
            "one" => assert_eq!(reduced.len(), 1),
            _ => assert!(retry_growth(&reduced, now()).is_some()),
        }
    }
    // Exact figures for the irregular series. Within one second the members
    // sort by text, and the full read takes the last of the newest second
    // and the first of the oldest: newest "…:91:450"; 5 min back the 301 s
    // second's "…:61:300"; 15 min back the 1200 s second's "…:30:15"; 1 h
    // back none, so the oldest, the 3500 s second's "…:4:20".
    let irregular = w
        .inspector
        .queues_stats(&["irregular".to_string()], true)
        .await
        .unwrap();
    let samples = irregular[0].samples.as_ref().unwrap().as_ref().unwrap();
    let at = |ago: i64| DateTime::from_timestamp(now().timestamp() - ago, 0).unwrap();
    assert_eq!(
        samples,
        &vec![
            QueueSample {
                at: at(3500),
                retry: 4,
                archived: 20
            },
            QueueSample {
                at: at(1200),
                retry: 30,
                archived: 15
            },
            QueueSample {
                at: at(301),
                retry: 61,
                archived: 300
            },
            QueueSample {
                at: at(0),
                retry: 91,
                archived: 450
            },
        ]
    );
    let g = retry_growth(samples, now()).unwrap();
    assert_eq!((g.last_5m.from, g.last_5m.to), (61, 91));
    assert_eq!((g.last_15m.from, g.last_15m.to), (30, 91));
    assert_eq!((g.last_1h.from, g.last_1h.to), (4, 91));
}

/// Pending count of `q` in a snapshot.
fn pending(snap: &asynqdeck::web::Snapshot, q: &str) -> i64 {
    snap.queues
        .iter()
        .find(|r| r.name == q)
        .unwrap()
        .info
        .as_ref()
        .unwrap()
        .pending
}

/// A view never computes the memory estimate: the first snapshot has none
/// ("…" on the page), the background run fills it in, equal to the
/// per-queue estimate, without computing another snapshot; the page then
/// shows it with its time, the API and `/metrics` report it.
#[tokio::test]
async fn memory_estimate_arrives_in_the_background() {
    let db = support::redis();
    let mut w = clocked_on(db.clone(), now()).await;
    seed_queues(&mut w).await;
    let state = AppState::new(
        w.inspector.clone(),
        WebConfig {
            poll_interval: Duration::from_secs(3600),
            ..WebConfig::default()
        },
    );
    let app = asynqdeck::web::router(state.clone());

    let snap = state.stats.get(&w.inspector).await;
    assert_eq!(state.stats.computations(), 1);
    assert!(snap.queues.iter().all(|r| r.memory.is_none()), "{snap:?}");
    assert!(
        snap.queues
            .iter()
            .all(|r| r.info.as_ref().unwrap().memory_usage == 0)
    );
    // `/metrics` first: it reads only the snapshot, so the background
    // estimate (this runtime has one thread) cannot run meanwhile; the
    // overview then awaits Redis (retry pressure) after taking its
    // snapshot, so its cells are those of the snapshot without estimates.
    let (_, metrics) = http::get(&app, "/metrics").await.parts();
    assert!(
        !metrics.contains("asynq_queue_memory_usage_approx_bytes{"),
        "{metrics}"
    );
    let (_, html) = http::get(&app, "/").await.parts();
    assert!(
        html.contains(r#"<td class="num" title="Being estimated in the background; shown at the next refresh">…</td>"#),
        "{html}"
    );

    state.stats.settle().await;
    assert_eq!(state.stats.memory_estimates(), 4);
    let snap = state.stats.get(&w.inspector).await;
    assert_eq!(state.stats.computations(), 1, "patched, not recomputed");
    for row in &snap.queues {
        let expected = w
            .inspector
            .queue_info(&row.name)
            .await
            .unwrap()
            .memory_usage;
        assert!(expected > 0);
        assert_eq!(
            row.memory,
            Some(MemoryEstimate {
                bytes: Ok(expected),
                at: now()
            }),
            "{}",
            row.name
        );
        assert_eq!(row.info.as_ref().unwrap().memory_usage, expected);
    }
    let plain = w.inspector.queue_memory_usage("plain").await.unwrap();
    let (_, html) = http::get(&app, "/").await.parts();
    let cell = format!(
        r#"<td class="num" title="Estimated by sampling at 2026-03-10 12:00:00 UTC; refreshed at most every 5 minutes">{}</td>"#,
        asynqdeck::web::format::bytes(plain)
    );
    assert!(html.contains(&cell), "{cell} in {html}");
    let (_, json) = http::get(&app, "/api/queues").await.parts();
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["queues"][2]["queue"], "plain");
    assert_eq!(json["queues"][2]["memory_usage_bytes"], plain);
    let (_, metrics) = http::get(&app, "/metrics").await.parts();
    assert!(
        metrics.contains(&format!(
            "asynq_queue_memory_usage_approx_bytes{{queue=\"plain\"}} {plain}"
        )),
        "{metrics}"
    );

    // Within the refresh period a new snapshot starts no memory run.
    state.stats.invalidate().await;
    let _ = state.stats.get(&w.inspector).await;
    state.stats.settle().await;
    assert_eq!(state.stats.computations(), 2);
    assert_eq!(state.stats.memory_estimates(), 4);
    // A new queue is estimated at the next snapshot, the others are not.
    enqueue(&w, "newer", EnqueueOptions::new()).await;
    state.stats.invalidate().await;
    let snap = state.stats.get(&w.inspector).await;
    assert!(
        snap.queues
            .iter()
            .find(|r| r.name == "newer")
            .unwrap()
            .memory
            .is_none()
    );
    state.stats.settle().await;
    assert_eq!(state.stats.memory_estimates(), 5);
    let snap = state.stats.get(&w.inspector).await;
    let newer = snap.queues.iter().find(|r| r.name == "newer").unwrap();
    assert_eq!(
        newer.memory.as_ref().unwrap().bytes,
        Ok(w.inspector.queue_memory_usage("newer").await.unwrap())
    );
}

/// A view in the slot after the snapshot's gets that snapshot at once (old
/// numbers, no waiting) and starts one background refresh; the next view
/// gets the refreshed numbers. A view after more than a slot without
/// viewers computes inline, so nothing ran in between.
#[tokio::test]
async fn previous_slot_is_served_while_refreshing() {
    let db = support::redis();
    let w = clocked_on(db.clone(), now()).await;
    enqueue(&w, "q", EnqueueOptions::new()).await;
    let cache = StatsCache::new(Duration::from_secs(60));

    let snap = cache.get(&w.inspector).await;
    assert_eq!((pending(&snap, "q"), cache.computations()), (1, 1));
    enqueue(&w, "q", EnqueueOptions::new()).await;
    let snap = cache.get(&w.inspector).await;
    assert_eq!(
        (pending(&snap, "q"), cache.computations()),
        (1, 1),
        "same slot"
    );

    w.clock.advance(Duration::from_secs(60));
    let first = cache.get(&w.inspector).await;
    let second = cache.get(&w.inspector).await;
    assert_eq!(
        pending(&first, "q"),
        1,
        "the previous slot's, without waiting"
    );
    assert_eq!(pending(&second, "q"), 1);
    cache.settle().await;
    assert_eq!(
        cache.computations(),
        2,
        "one background refresh for both views"
    );
    let snap = cache.get(&w.inspector).await;
    assert_eq!((pending(&snap, "q"), cache.computations()), (2, 2));

    // Nobody views for two slots: nothing is computed; the next view
    // computes inline (its snapshot would be too old to serve).
    enqueue(&w, "q", EnqueueOptions::new()).await;
    w.clock.advance(Duration::from_secs(120));
    assert_eq!(cache.computations(), 2);
    let snap = cache.get(&w.inspector).await;
    assert_eq!((pending(&snap, "q"), cache.computations()), (3, 3));
}

/// After an action, `invalidate` makes the next view compute fresh numbers
/// inline, even when a background refresh started before the action.
#[tokio::test]
async fn invalidate_gives_fresh_numbers() {
    let db = support::redis();
    let w = clocked_on(db.clone(), now()).await;
    enqueue(&w, "q", EnqueueOptions::new()).await;
    let cache = StatsCache::new(Duration::from_secs(60));
    assert_eq!(pending(&*cache.get(&w.inspector).await, "q"), 1);

    // A view in the next slot starts a background refresh; then an action.
    w.clock.advance(Duration::from_secs(60));
    assert_eq!(pending(&*cache.get(&w.inspector).await, "q"), 1);
    enqueue(&w, "q", EnqueueOptions::new()).await;
    cache.invalidate().await;
    assert_eq!(pending(&*cache.get(&w.inspector).await, "q"), 2, "fresh");
    cache.settle().await;
    assert_eq!(
        pending(&*cache.get(&w.inspector).await, "q"),
        2,
        "still fresh"
    );

    // The queues page's pause action answers with the refreshed row.
    let state = AppState::new(w.inspector.clone(), WebConfig::default());
    let app = asynqdeck::web::router(state.clone());
    let (_, html) = http::get(&app, "/").await.parts();
    assert!(
        html.contains(r#"<span class="badge run">run</span>"#),
        "{html}"
    );
    let res = app
        .clone()
        .oneshot(
            Request::post("/queues/q/pause")
                .header("hx-request", "true")
                .header("x-csrf-token", state.csrf_token.as_ref())
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let body = res.into_body().collect().await.unwrap().to_bytes();
    let html = String::from_utf8_lossy(&body);
    assert!(
        html.contains(r#"<span class="badge paused">paused</span>"#),
        "{html}"
    );
}

/// `MEMORY USAGE` refused (an ACL user without it, as on some managed
/// Redis services) fails only the memory estimate: its cell says "n/a" with
/// the reason, every count is shown, and the estimate is not retried before
/// the refresh period.
#[tokio::test]
async fn refused_memory_usage_is_na_in_its_cell() {
    let db = support::redis();
    let mut w = clocked_on(db.clone(), now()).await;
    seed_queues(&mut w).await;
    let user = format!("no-memory-{}", db.db);
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg(&user)
        .arg("on")
        .arg(">secret")
        .arg("~*")
        .arg("&*")
        .arg("+@all")
        .arg("-memory")
        .query_async(&mut w.conn)
        .await
        .unwrap();
    let url = db.url_as(&user, "secret");
    let broker = Broker::connect(&url)
        .await
        .unwrap()
        .with_clock(Arc::new(w.clock.clone()));
    let inspector = Inspector::from_broker(broker);
    let state = AppState::new(
        inspector.clone(),
        WebConfig {
            poll_interval: Duration::from_secs(60),
            ..WebConfig::default()
        },
    );
    let app = asynqdeck::web::router(state.clone());
    let _ = state.stats.get(&inspector).await;
    state.stats.settle().await;
    let snap = state.stats.get(&inspector).await;
    let plain = snap.queues.iter().find(|r| r.name == "plain").unwrap();
    assert_eq!(plain.info.as_ref().unwrap().pending, 4);
    let err = plain.memory.as_ref().unwrap().bytes.as_ref().unwrap_err();
    assert!(
        err.contains("The user executing the script can't run this command"),
        "{err}"
    );
    let (status, html) = http::get(&app, "/").await.parts();
    assert_eq!(status, StatusCode::OK);
    assert!(
        html.contains(&format!(
            r#"<td class="num" title="Memory estimate failed at 2026-03-10 12:00:00 UTC: {}">n/a</td>"#,
            err.replace('\'', "&#39;").replace('"', "&#34;")
        )),
        "{html}"
    );
    assert!(
        html.contains(r#"<a href="/queues/plain/pending">4</a>"#),
        "{html}"
    );
    assert_eq!(state.stats.memory_estimates(), 4);
    state.stats.invalidate().await;
    let _ = state.stats.get(&inspector).await;
    state.stats.settle().await;
    assert_eq!(
        state.stats.memory_estimates(),
        4,
        "not retried within the period"
    );
    let _: () = redis::cmd("ACL")
        .arg("DELUSER")
        .arg(&user)
        .query_async(&mut w.conn)
        .await
        .unwrap();
}

/// Commands Redis ran since the last call (commands inside scripts
/// included; `INFO`, `CONFIG` and `CLIENT` left out), by name, then resets
/// the counts. Only meaningful on a private server.
async fn commands_since(conn: &mut RawConn) -> std::collections::BTreeMap<String, u64> {
    let mut calls = support::commandstats::since_last(conn).await;
    calls.retain(|name, _| {
        !(name == "info" || name.starts_with("config|") || name.starts_with("client|"))
    });
    calls
}

/// The ids of the clients with key tracking on (`CLIENT LIST` flag `t`).
async fn tracking_clients(conn: &mut RawConn) -> Vec<String> {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(conn)
        .await
        .unwrap();
    list.lines()
        .filter(|l| {
            l.split(' ')
                .any(|f| f.strip_prefix("flags=").is_some_and(|f| f.contains('t')))
        })
        .filter_map(|l| l.split(' ').next()?.strip_prefix("id=").map(str::to_string))
        .collect()
}

/// Tracked hints (Redis key tracking): once every queue's numbers are
/// known, a call with nothing changed costs Redis one PING, yet every change
/// by another connection — a task enqueued, only the next task's
/// `pending_since`, a counter, a retry added or deleted, pause and resume,
/// a new queue, the UTC day turning, a flush — is in the very next call's
/// numbers, which always equal `queue_info`'s. A killed tracking connection
/// is noticed (that call reads everything uncached) and replaced.
#[tokio::test]
async fn tracked_hints_read_only_what_changed_and_stay_exact() {
    let db = support::private_redis();
    let mut w = clocked_on(db.clone(), now()).await;
    for _ in 0..4 {
        enqueue(&w, "plain", EnqueueOptions::new()).await;
    }
    for i in 0..2 {
        seed::seeded_unleased(&mut w.conn, "retrying", &format!("r{i}"), "retry").await;
    }
    enqueue(&w, "held", EnqueueOptions::new()).await;
    w.inspector.pause_queue("held").await.unwrap();
    let today = now().date_naive();
    let _: () = w
        .conn
        .set(keys::processed_key("retrying", today), 5)
        .await
        .unwrap();
    let names = w.inspector.queues().await.unwrap();
    assert_eq!(names, ["held", "plain", "retrying"]);
    let mut hints = StatsHints::tracked();
    let mut conn = w.conn.clone();

    // Call 1 reads everything; call 2 again the queues with a pending
    // task (their next task's hash is declared from now on).
    for _ in 0..2 {
        let rows = w
            .inspector
            .queues_stats_with(&names, false, &mut hints)
            .await
            .unwrap();
        assert_rows_exact(&w, &rows).await;
    }
    assert_eq!(tracking_clients(&mut conn).await.len(), 1);
    commands_since(&mut conn).await;

    // Nothing changed: one PING, and the latency still grows with time.
    w.clock.set(now() + chrono::Duration::seconds(10));
    let rows = w
        .inspector
        .queues_stats_with(&names, false, &mut hints)
        .await
        .unwrap();
    assert_eq!(
        commands_since(&mut conn).await,
        [("ping".to_string(), 1)].into_iter().collect()
    );
    assert_rows_exact(&w, &rows).await;
    let plain = rows[1].info.as_ref().unwrap();
    assert_eq!((plain.pending, plain.latency), (4, Duration::from_secs(10)));
    assert_eq!(hints.members(), Some(names.as_slice()));

    // Growth samples of queues whose numbers are cached: read alone (the
    // sampler writes the series every interval), equal to an untracked read.
    write_series(
        &mut conn,
        "plain",
        &[(30, 5, ""), (400, 3, ""), (4000, 1, "")],
    )
    .await;
    write_series(&mut conn, "held", &[(10, 1, "")]).await;
    commands_since(&mut conn).await;
    let rows = w
        .inspector
        .queues_stats_with(&names, true, &mut hints)
        .await
        .unwrap();
    let ran = commands_since(&mut conn).await;
    assert_eq!(
        (ran.get("ping"), ran.get("evalsha"), ran.get("llen")),
        (Some(&1), Some(&1), None),
        "{ran:?}"
    );
    let untracked = w.inspector.queues_stats(&names, true).await.unwrap();
    for (t, u) in rows.iter().zip(&untracked) {
        assert_eq!(
            t.info.as_ref().unwrap(),
            u.info.as_ref().unwrap(),
            "{}",
            t.queue
        );
        let samples = t.samples.as_ref().unwrap().as_ref().unwrap();
        assert_eq!(
            samples,
            u.samples.as_ref().unwrap().as_ref().unwrap(),
            "{}",
            t.queue
        );
    }
    let plain_samples = rows[1].samples.as_ref().unwrap().as_ref().unwrap();
    assert_eq!(
        plain_samples.iter().map(|s| s.retry).collect::<Vec<_>>(),
        [3, 5],
        "the 4000 s old sample is outside the hour"
    );

    // Each change below is seen by the next call, which reads again.
    let next_plain: String = conn.lindex(keys::pending_key("plain"), -1).await.unwrap();
    let later_ns = (now() + chrono::Duration::seconds(4))
        .timestamp_nanos_opt()
        .unwrap();
    type Change = Box<dyn Fn(RawConn) -> futures_util::future::BoxFuture<'static, ()>>;
    let hash = keys::task_key("plain", &next_plain);
    let changes: Vec<(&str, Change)> = vec![
        (
            "only the next task's pending_since",
            Box::new(move |mut c| {
                let hash = hash.clone();
                Box::pin(async move {
                    let _: () = c.hset(hash, "pending_since", later_ns).await.unwrap();
                })
            }),
        ),
        (
            "a counter",
            Box::new(|mut c| {
                Box::pin(async move {
                    let _: () = c
                        .incr(keys::processed_key("retrying", now().date_naive()), 1)
                        .await
                        .unwrap();
                })
            }),
        ),
        (
            "a retry task",
            Box::new(|mut c| {
                Box::pin(
                    async move { seed::seeded_unleased(&mut c, "retrying", "r9", "retry").await },
                )
            }),
        ),
        (
            "the retry set deleted",
            Box::new(|mut c| {
                Box::pin(async move {
                    let _: () = c.del(keys::retry_key("retrying")).await.unwrap();
                })
            }),
        ),
        (
            "resumed",
            Box::new(|mut c| {
                Box::pin(async move {
                    let _: () = c.del(keys::paused_key("held")).await.unwrap();
                })
            }),
        ),
        (
            "an active task where none was",
            Box::new(|mut c| {
                Box::pin(async move { seed::seeded_unleased(&mut c, "held", "a1", "active").await })
            }),
        ),
        (
            "the next task taken",
            Box::new(|mut c| {
                Box::pin(async move {
                    let _: Option<String> = c.rpop(keys::pending_key("plain"), None).await.unwrap();
                })
            }),
        ),
    ];
    for (what, change) in changes {
        change(conn.clone()).await;
        commands_since(&mut conn).await;
        let rows = w
            .inspector
            .queues_stats_with(&names, false, &mut hints)
            .await
            .unwrap();
        let ran = commands_since(&mut conn).await;
        assert!(ran.contains_key("evalsha"), "{what}: read again: {ran:?}");
        assert_rows_exact(&w, &rows).await;
    }
    let rows = w
        .inspector
        .queues_stats_with(&names, false, &mut hints)
        .await
        .unwrap();
    assert_rows_exact(&w, &rows).await;
    let retrying = rows[2].info.as_ref().unwrap();
    assert_eq!((retrying.retry, retrying.processed), (0, 6));
    let held = rows[0].info.as_ref().unwrap();
    assert_eq!((held.paused, held.active), (false, 1));

    // A new queue: the list read says so.
    enqueue(&w, "newer", EnqueueOptions::new()).await;
    w.inspector
        .queues_stats_with(&names, false, &mut hints)
        .await
        .unwrap();
    assert_eq!(
        hints.members().unwrap(),
        ["held", "newer", "plain", "retrying"]
    );

    // The UTC day turns: today's counters are other keys.
    w.clock.set(now() + chrono::Duration::days(1));
    let rows = w
        .inspector
        .queues_stats_with(&names, false, &mut hints)
        .await
        .unwrap();
    assert_rows_exact(&w, &rows).await;
    assert_eq!(rows[2].info.as_ref().unwrap().processed, 0);

    // The tracking connection killed: the change made meanwhile is seen,
    // and tracking starts again.
    let ids = tracking_clients(&mut conn).await;
    assert_eq!(ids.len(), 1);
    let _: () = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(&ids[0])
        .query_async(&mut conn)
        .await
        .unwrap();
    enqueue(&w, "plain", EnqueueOptions::new()).await;
    for _ in 0..2 {
        let rows = w
            .inspector
            .queues_stats_with(&names, false, &mut hints)
            .await
            .unwrap();
        assert_rows_exact(&w, &rows).await;
        assert_eq!(rows[1].info.as_ref().unwrap().pending, 4);
    }
    let again = tracking_clients(&mut conn).await;
    assert_eq!(again.len(), 1);
    assert_ne!(again, ids);

    // A flush: every queue is gone.
    let _: () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();
    let rows = w
        .inspector
        .queues_stats_with(&names, false, &mut hints)
        .await
        .unwrap();
    for row in &rows {
        assert!(
            matches!(&row.info, Err(Error::QueueNotFound { queue }) if *queue == row.queue),
            "{row:?}"
        );
    }
}

/// Where Redis refuses key tracking (here an ACL user without the `client`
/// command), tracked hints read every queue as untracked ones do: exact
/// numbers, no tracking client.
#[tokio::test]
async fn tracked_hints_without_tracking_read_uncached() {
    let db = support::private_redis();
    let mut admin = db.raw().await;
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER", "limited", "on", ">pw", "~*", "&*", "+@all", "-client",
        ])
        .query_async(&mut admin)
        .await
        .unwrap();
    let url = format!("redis://limited:pw@127.0.0.1:{}/0", db.port);
    let clock = SimulatedClock::new(now());
    let broker = Broker::connect(&url)
        .await
        .unwrap()
        .with_clock(Arc::new(clock.clone()));
    let w = World {
        client: Client::from_broker(broker.clone()),
        inspector: Inspector::from_broker(broker.clone()),
        clock,
        conn: db.raw().await,
        db,
        broker,
    };
    enqueue(&w, "plain", EnqueueOptions::new()).await;
    let names = vec!["plain".to_string()];
    let mut hints = StatsHints::tracked();
    for n in 1..=3 {
        let rows = w
            .inspector
            .queues_stats_with(&names, false, &mut hints)
            .await
            .unwrap();
        assert_rows_exact(&w, &rows).await;
        assert_eq!(rows[0].info.as_ref().unwrap().pending, n);
        enqueue(&w, "plain", EnqueueOptions::new()).await;
    }
    assert!(tracking_clients(&mut admin).await.is_empty());
}

/// Tracked hints under a stream of enqueues (each moves the pending list):
/// an invalidation taken right after a read may come from a change after
/// it, so that queue is not cached; once the stream stops, the next call
/// equals `queue_info` (a queue frozen at an old size was the bug).
#[tokio::test]
async fn tracked_hints_do_not_freeze_a_queue_changing_during_reads() {
    let db = support::private_redis();
    let w = clocked_on(db.clone(), now()).await;
    enqueue(&w, "flood", EnqueueOptions::new()).await;
    let names = vec!["flood".to_string()];
    let mut hints = StatsHints::tracked();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let mut conn = db.raw().await;
        let stop = stop.clone();
        tokio::spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _: () = conn.lpush(keys::pending_key("flood"), "x").await.unwrap();
            }
        })
    };
    for _ in 0..300 {
        w.inspector
            .queues_stats_with(&names, false, &mut hints)
            .await
            .unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.await.unwrap();
    let mut conn = db.raw().await;
    let len: i64 = conn.llen(keys::pending_key("flood")).await.unwrap();
    for _ in 0..2 {
        let rows = w
            .inspector
            .queues_stats_with(&names, false, &mut hints)
            .await
            .unwrap();
        assert_eq!(rows[0].info.as_ref().unwrap().pending, len);
    }
}

/// A dashboard that saw no queue sees the first one appear (the empty
/// list is read again, not taken from the last snapshot).
#[tokio::test]
async fn the_first_queue_appears_after_an_empty_list() {
    let db = support::redis();
    let w = clocked_on(db.clone(), now()).await;
    let cache = StatsCache::new(Duration::from_secs(60));
    assert!(cache.get(&w.inspector).await.queues.is_empty());
    enqueue(&w, "first", EnqueueOptions::new()).await;
    cache.invalidate().await;
    let snap = cache.get(&w.inspector).await;
    assert_eq!(
        snap.queues
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>(),
        ["first"]
    );
}

/// `SWAPDB` sends no invalidation (Redis 7.0): tracked hints keep serving
/// the swapped-out numbers, but never longer than `MAX_CACHE_AGE` (5 min
/// by the broker's clock), after which every queue is read again.
#[tokio::test]
async fn tracked_hints_read_everything_again_after_five_minutes() {
    let db = support::private_redis();
    let w = clocked_on(db.clone(), now()).await;
    enqueue(&w, "q", EnqueueOptions::new()).await;
    let names = vec!["q".to_string()];
    // Database 1 holds `q` with three pending tasks; prepared first, as a
    // write there would invalidate the same key names.
    let other = support::TestDb {
        port: db.port,
        db: 1,
        cluster: false,
    };
    let other_client = Client::from_broker(Broker::connect(&other.url()).await.unwrap());
    for _ in 0..3 {
        other_client
            .enqueue(
                &Task::new("t", b"p".to_vec()),
                EnqueueOptions::new().queue("q"),
            )
            .await
            .unwrap();
    }
    let mut hints = StatsHints::tracked();
    for _ in 0..2 {
        let rows = w
            .inspector
            .queues_stats_with(&names, false, &mut hints)
            .await
            .unwrap();
        assert_eq!(rows[0].info.as_ref().unwrap().pending, 1);
    }
    let mut conn = db.raw().await;
    let _: () = redis::cmd("SWAPDB")
        .arg(0)
        .arg(1)
        .query_async(&mut conn)
        .await
        .unwrap();
    let pending =
        |rows: Vec<asynqdeck::inspector::QueueStatsRow>| rows[0].info.as_ref().unwrap().pending;
    w.clock.set(now() + chrono::Duration::seconds(299));
    let rows = w
        .inspector
        .queues_stats_with(&names, false, &mut hints)
        .await
        .unwrap();
    assert_eq!(pending(rows), 1, "cached: SWAPDB is not heard of");
    w.clock.set(now() + chrono::Duration::seconds(300));
    let rows = w
        .inspector
        .queues_stats_with(&names, false, &mut hints)
        .await
        .unwrap();
    assert_eq!(pending(rows), 3, "read again after 5 minutes");
}
