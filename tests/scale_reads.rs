//! Issue 15 targets 5 and 6 on a real Redis: every large read is bounded
//! and paged. Groups are walked by cursor (every group once, each page one
//! bounded SSCAN step; `/api/queues/{q}/groups` keeps asynqmon's shape,
//! bounded, with a cursor to page); the group total of the statistics reads
//! at most 1,000 group zsets; servers and their workers are read one page
//! at a time (page, `/api/servers`); scheduler history is paged; the memory
//! estimate runs `MEMORY USAGE` once per queue per 5 minutes, not per view.
//! COMPATIBILITY.md "Scale (issue 15)" L9–L12.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use asynqdeck::Error;
use asynqdeck::broker::keys;
use asynqdeck::broker::proto::{SchedulerEnqueueEvent, Timestamp};
use asynqdeck::inspector::{GROUPS_PAGE_MAX, MEMORY_CACHE_TTL, PICKER_GROUPS, Page};
use asynqdeck::web::WebConfig;
use axum::http::{Method, StatusCode};
use futures_util::StreamExt;
use prost::Message;
use redis::AsyncCommands;

use crate::support::clock::{Clocked, clocked, clocked_on, now};
use crate::support::http::Dashboard;
use crate::support::redis::RawConn;
use crate::support::{self, seed};

/// Writes `n` groups `g0000`.. into queue `q` as Go's `AddToGroup` leaves
/// them (the name in `asynq:{q}:groups`, ids in `asynq:{q}:g:<name>`),
/// group `i` holding `size(i)` ids, and registers the queue. Group keys
/// share the queue's hash tag, so each pipeline stays in one slot.
async fn seed_groups(conn: &mut RawConn, q: &str, n: usize, size: impl Fn(usize) -> usize) {
    let _: () = conn.sadd(keys::ALL_QUEUES, q).await.unwrap();
    for start in (0..n).step_by(500) {
        let mut pipe = redis::pipe();
        for i in start..(start + 500).min(n) {
            let name = format!("g{i:04}");
            pipe.sadd(keys::all_groups_key(q), &name).ignore();
            for j in 0..size(i) {
                pipe.zadd(keys::group_key(q, &name), format!("t-{i}-{j}"), j as i64)
                    .ignore();
            }
        }
        let () = pipe.query_async(conn).await.unwrap();
    }
}

/// Sizes 1 to 5 by name, so each page's sizes can be checked exactly.
fn varied(i: usize) -> usize {
    i % 5 + 1
}

/// A walk of 3,000 groups in pages of 100 returns every group exactly once
/// with its exact size; each page is one SSCAN step of COUNT 100 (at most
/// 2 × 100 names: Redis returns whole hash buckets), sorted by name, and
/// the walk ends on cursor 0. `groups()` is one bounded page, not all.
#[tokio::test]
async fn groups_walk_returns_each_group_once_in_bounded_pages() {
    let mut w = clocked(now()).await;
    seed_groups(&mut w.conn, "agg", 3000, varied).await;
    let mut seen: BTreeMap<String, i64> = BTreeMap::new();
    let (mut cursor, mut pages) = (0u64, 0usize);
    loop {
        let page = w.inspector.groups_page("agg", cursor, 100).await.unwrap();
        pages += 1;
        assert!(page.groups.len() <= 200, "page of {}", page.groups.len());
        let names: Vec<&str> = page.groups.iter().map(|g| g.group.as_str()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "a page is sorted by name");
        for g in page.groups {
            let i: usize = g.group[1..].parse().unwrap();
            assert_eq!(g.size, varied(i) as i64, "size of {}", g.group);
            assert!(
                seen.insert(g.group.clone(), g.size).is_none(),
                "{} twice",
                g.group
            );
        }
        cursor = page.next_cursor;
        if cursor == 0 {
            break;
        }
        assert!(pages < 3000, "the walk ends");
    }
    assert_eq!(seen.len(), 3000);
    assert!(pages >= 3000 / 200, "{pages} pages");

    let first = w.inspector.groups("agg").await.unwrap();
    assert!(!first.is_empty() && first.len() <= 2 * GROUPS_PAGE_MAX);
    assert!(first.len() < 3000, "groups() is bounded: {}", first.len());
    assert!(first.windows(2).all(|p| p[0].group < p[1].group));

    // Page sizes outside 1..=1000 are refused; a small queue comes whole.
    for size in [0, GROUPS_PAGE_MAX + 1] {
        match w.inspector.groups_page("agg", 0, size).await {
            Err(Error::InvalidArgument(_)) => {}
            other => panic!("size {size}: {other:?}"),
        }
    }
    // A small queue: its one page of 1,000 holds every group, cursor 0.
    seed_groups(&mut w.conn, "few", 7, varied).await;
    let few = w
        .inspector
        .groups_page("few", 0, GROUPS_PAGE_MAX)
        .await
        .unwrap();
    assert_eq!(few.next_cursor, 0);
    let names: Vec<String> = few.groups.into_iter().map(|g| g.group).collect();
    assert_eq!(
        names,
        (0..7).map(|i| format!("g{i:04}")).collect::<Vec<_>>()
    );
}

/// The statistics' group total is exact up to 1,000 groups (700 here);
/// past that it reads about 200 group zsets: with 3,000 groups of 2 tasks
/// each it is the sample's mean (2) times the count, 6,000; the group
/// count is SCARD.
#[tokio::test]
async fn queue_stats_group_total_is_bounded() {
    let mut w = clocked(now()).await;
    seed_groups(&mut w.conn, "small", 700, varied).await;
    let info = w.inspector.queue_info("small").await.unwrap();
    assert_eq!(info.groups, 700);
    assert_eq!(
        info.aggregating,
        (0..700).map(|i| varied(i) as i64).sum::<i64>()
    );
    seed_groups(&mut w.conn, "wide", 3000, |_| 2).await;
    let info = w.inspector.queue_info("wide").await.unwrap();
    assert_eq!(info.groups, 3000);
    assert_eq!(info.aggregating, 6000);
}

/// `/api/queues/{q}/groups` keeps asynqmon's `{groups, stats}` (plus
/// `next_cursor` while more follow): without parameters one page of about
/// 500 groups; following `next_cursor` with `size=500` lists all 3,000
/// exactly once. A queue of few groups answers asynqmon's body exactly;
/// bad parameters are 400.
#[tokio::test]
async fn api_groups_route_is_bounded_and_pages() {
    let mut w = clocked(now()).await;
    seed_groups(&mut w.conn, "agg", 3000, varied).await;
    seed_groups(&mut w.conn, "few", 3, varied).await;
    let dash = Dashboard::new(w.inspector.clone(), WebConfig::default());

    let r = dash.api(Method::GET, "/api/queues/few/groups").await;
    assert_eq!(r.status, StatusCode::OK);
    let body = r.json();
    assert_eq!(
        body["groups"],
        serde_json::json!([
            {"group": "g0000", "size": 1},
            {"group": "g0001", "size": 2},
            {"group": "g0002", "size": 3},
        ])
    );
    assert_eq!(body["stats"]["queue"], "few");
    assert_eq!(body.as_object().unwrap().len(), 2, "asynqmon's two fields");

    let first = dash.api(Method::GET, "/api/queues/agg/groups").await.json();
    let n = first["groups"].as_array().unwrap().len();
    assert!(n > 0 && n <= 2 * GROUPS_PAGE_MAX && n < 3000, "{n} groups");
    assert!(first["next_cursor"].as_str().is_some_and(|c| c != "0"));

    let mut seen = BTreeSet::new();
    let mut cursor = "0".to_string();
    for _ in 0..3000 {
        let uri = format!("/api/queues/agg/groups?cursor={cursor}&size=500");
        let body = dash.api(Method::GET, &uri).await.json();
        let groups = body["groups"].as_array().unwrap();
        assert!(groups.len() <= 1000);
        for g in groups {
            let name = g["group"].as_str().unwrap().to_string();
            let i: usize = name[1..].parse().unwrap();
            assert_eq!(g["size"], varied(i) as i64);
            assert!(seen.insert(name), "twice");
        }
        match body["next_cursor"].as_str() {
            Some(next) => cursor = next.to_string(),
            None => break,
        }
    }
    assert_eq!(seen.len(), 3000);

    for bad in ["size=0", "size=501", "cursor=abc"] {
        let r = dash
            .api(Method::GET, &format!("/api/queues/agg/groups?{bad}"))
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad}");
    }
}

/// The aggregating tab's group picker lists one bounded page of groups,
/// says how many of how many, and offers a group by name; a group named
/// in the query is shown with its size even when outside the picker.
#[tokio::test]
async fn aggregating_picker_is_bounded() {
    let mut w = clocked(now()).await;
    seed_groups(&mut w.conn, "agg", 3000, varied).await;
    let dash = Dashboard::new(w.inspector.clone(), WebConfig::default());
    let html = dash.hx_get("/queues/agg/aggregating").await.text();
    let buttons = html.matches("?group=").count();
    assert!(buttons > 0 && buttons <= 2 * PICKER_GROUPS, "{buttons}");
    assert!(
        html.contains(&format!("{buttons} of 3000 groups listed.")),
        "{html}"
    );
    assert!(html.contains("group-by-name"));
    let picked: BTreeSet<String> = support::http::attr_values(&html, "href")
        .into_iter()
        .filter_map(|h| h.split("group=").nth(1).map(|g| g[..5].to_string()))
        .collect();
    let outside = (0..3000)
        .map(|i| format!("g{i:04}"))
        .find(|g| !picked.contains(g))
        .unwrap();
    let r = w
        .inspector
        .read_tab(&asynqdeck::inspector::TabRequest {
            queue: "agg",
            state: asynqdeck::TaskState::Aggregating,
            group: Some(&outside),
            page: Page::new(1, 20).unwrap(),
            filter: &Default::default(),
            stats: None,
        })
        .await
        .unwrap();
    let i: usize = outside[1..].parse().unwrap();
    assert_eq!(r.group.as_deref(), Some(outside.as_str()));
    assert_eq!(r.total, Some(varied(i)));
}

/// 1,200 servers written as Go writes them (`WriteServerState`: the two
/// registries, the SETEX'd ServerInfo, the workers hash), every tenth with
/// 3 workers: pages of 100 walk them in (host, pid, id) order exactly once
/// with their workers; a page past the end is empty; the page and
/// `/api/servers` page too, and `/api/servers` without parameters lists
/// all, as asynqmon.
#[tokio::test]
async fn servers_are_read_one_page_at_a_time() {
    let w = clocked(now()).await;
    let broker = w.broker.clone();
    futures_util::stream::iter(0..1200)
        .map(|i| {
            let broker = broker.clone();
            async move {
                let s = seed::server(&format!("host-{i:04}"), 100 + i, &format!("sid-{i}"), 0);
                let workers: Vec<_> = if i % 10 == 0 {
                    (0..3)
                        .map(|j| seed::worker(&s, &format!("t{i}-{j}"), b"p".to_vec(), 10 - j, 60))
                        .collect()
                } else {
                    Vec::new()
                };
                broker
                    .write_server_state(&s, &workers, Duration::from_secs(600))
                    .await
                    .unwrap();
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;

    let mut hosts = Vec::new();
    for number in 1..=12 {
        let page = w
            .inspector
            .servers_page(Page::new(number, 100).unwrap())
            .await
            .unwrap();
        assert_eq!(page.total, 1200);
        assert_eq!(page.servers.len(), 100);
        for s in page.servers {
            let i: usize = s.host[5..].parse().unwrap();
            assert_eq!(s.pid, 100 + i as i32);
            let want = if i.is_multiple_of(10) { 3 } else { 0 };
            assert_eq!(s.active_workers.len(), want, "{}", s.host);
            hosts.push(s.host);
        }
    }
    assert_eq!(
        hosts,
        (0..1200)
            .map(|i| format!("host-{i:04}"))
            .collect::<Vec<_>>()
    );
    let past = w
        .inspector
        .servers_page(Page::new(13, 100).unwrap())
        .await
        .unwrap();
    assert!(past.servers.is_empty());
    assert_eq!(past.total, 1200);

    let dash = Dashboard::new(w.inspector.clone(), WebConfig::default());
    let html = dash.hx_get("/servers").await.text();
    assert_eq!(html.matches("<tr class=\"server\">").count(), 20);
    assert!(html.contains("Servers 1–20 of 1200"), "{html}");
    let html = dash.hx_get("/servers?page=60&size=20").await.text();
    assert_eq!(html.matches("<tr class=\"server\">").count(), 20);
    assert!(html.contains("host-1180") && html.contains("host-1199"));
    assert!(!html.contains("host-1179"));
    let r = dash.hx_get("/servers?size=0").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);

    let all = dash.api(Method::GET, "/api/servers").await.json();
    assert_eq!(all["servers"].as_array().unwrap().len(), 1200);
    let page = dash
        .api(Method::GET, "/api/servers?page=2&size=50")
        .await
        .json();
    let servers = page["servers"].as_array().unwrap();
    assert_eq!(servers.len(), 50);
    assert_eq!(servers[0]["host"], "host-0050");
    assert_eq!(servers[49]["host"], "host-0099");
    assert_eq!(servers[0]["active_workers"].as_array().unwrap().len(), 3);
}

/// A scheduler entry's history of 1,000 events (Go's cap) reads in pages
/// of 100 newest first, each event exactly once; the page after is empty;
/// the web page shows one page and its rank.
#[tokio::test]
async fn scheduler_history_is_paged() {
    let mut w = clocked(now()).await;
    let key = keys::scheduler_history_key("entry-1");
    let base = now().timestamp() - 5000;
    for start in (0..1000).step_by(250) {
        let mut pipe = redis::pipe();
        for i in start..start + 250 {
            let e = SchedulerEnqueueEvent {
                task_id: format!("task-{i:04}"),
                enqueue_time: Some(Timestamp {
                    seconds: base + i,
                    nanos: 0,
                }),
            };
            pipe.zadd(&key, e.encode_to_vec(), base + i).ignore();
        }
        let () = pipe.query_async(&mut w.conn).await.unwrap();
    }
    let mut ids = Vec::new();
    for number in 1..=10 {
        let events = w
            .inspector
            .scheduler_enqueue_events("entry-1", Page::new(number, 100).unwrap())
            .await
            .unwrap();
        assert_eq!(events.len(), 100);
        ids.extend(events.into_iter().map(|e| e.task_id));
    }
    assert_eq!(
        ids,
        (0..1000)
            .rev()
            .map(|i| format!("task-{i:04}"))
            .collect::<Vec<_>>()
    );
    let after = w
        .inspector
        .scheduler_enqueue_events("entry-1", Page::new(11, 100).unwrap())
        .await
        .unwrap();
    assert!(after.is_empty());

    let dash = Dashboard::new(w.inspector.clone(), WebConfig::default());
    let html = dash
        .hx_get("/schedulers/entry-1/events?page=3&size=100")
        .await
        .text();
    assert!(html.contains("task-0799") && html.contains("task-0700"));
    assert!(!html.contains("task-0800") && !html.contains("task-0699"));
}

/// `MEMORY USAGE` calls on the server so far (`INFO commandstats`).
async fn memory_usage_calls(conn: &mut RawConn) -> u64 {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    stats
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_memory|usage:calls="))
        .and_then(|rest| rest.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

/// Two views of a queue's statistics in a row run the memory estimate
/// once: the second sends no `MEMORY USAGE` and reports the first
/// estimate with its age; after [`MEMORY_CACHE_TTL`] it runs again.
#[tokio::test]
async fn memory_estimate_runs_once_per_ttl() {
    let db = support::private_redis();
    let mut w: Clocked = clocked_on(db, now()).await;
    for i in 0..30 {
        seed::seeded(&mut w.conn, "mem", &format!("m{i}"), "pending").await;
    }
    let _: () = w.conn.sadd(keys::ALL_QUEUES, "mem").await.unwrap();
    assert_eq!(memory_usage_calls(&mut w.conn).await, 0);

    let first = w.inspector.queue_info("mem").await.unwrap();
    let after_first = memory_usage_calls(&mut w.conn).await;
    assert!(after_first > 0);
    assert!(first.memory_usage > 0);

    w.clock.set(now() + chrono::Duration::seconds(42));
    let second = w.inspector.queue_info("mem").await.unwrap();
    assert_eq!(memory_usage_calls(&mut w.conn).await, after_first);
    assert_eq!(second.memory_usage, first.memory_usage);
    let cached = w.inspector.queue_memory_estimate("mem").await.unwrap();
    assert_eq!(memory_usage_calls(&mut w.conn).await, after_first);
    assert_eq!(cached.bytes, first.memory_usage);
    assert_eq!(cached.taken_at, now());
    assert_eq!(cached.age(w.inspector.now()), Duration::from_secs(42));

    w.clock
        .set(now() + chrono::Duration::from_std(MEMORY_CACHE_TTL).unwrap());
    let again = w.inspector.queue_memory_estimate("mem").await.unwrap();
    assert!(memory_usage_calls(&mut w.conn).await > after_first);
    assert_eq!(again.taken_at, w.inspector.now());
}
