//! Issue 12, inspector and API data paths (R10–R13), against a real Redis
//! and, where wire behaviour matters, real Go asynq v0.26.0 (the peer):
//!
//! - R10: a 5 MB payload's row shows exactly the head of its preview, on
//!   the pages and in `/api` (the O(preview) proof is the unit tests
//!   `r10_*` in `src/web/format.rs` and `src/web/api/go_format.rs`).
//! - R11: `/schedulers` and `/api/scheduler_entries` page 5,000 entries.
//! - R12: left-behind task hashes (state names a set that does not hold
//!   them) never answer 5xx, are shown for what they are, can be deleted
//!   one by one and swept in bulk, a job of bounded slices that the
//!   inspector, `/api` and the page's htmx continuation follow by cursor;
//!   ids without a hash answer 404.
//! - R13: every delete path releases the unique lock of a Go-enqueued
//!   group task, whose lock is named only inside its msg.

use std::time::Duration;

use crate::support::redis::RawConn as Conn;
use asynqdeck::broker::proto::{SchedulerEntry, Timestamp};
use asynqdeck::broker::{Broker, keys};
use asynqdeck::inspector::{SweepBudget, SweepCount};
use asynqdeck::web::WebConfig;
use asynqdeck::{Client, EnqueueOptions, Inspector, Task, TaskState};
use axum::http::{Method, StatusCode};
use redis::AsyncCommands;
use serde_json::Value;

use crate::support::htmx::{HxRequest, continuation, field, form_body, hx_request};
use crate::support::http::{self, Dashboard, Reply};
use crate::support::{self, TestDb};

struct Setup {
    dash: Dashboard,
    insp: Inspector,
    broker: Broker,
    client: Client,
    raw: Conn,
}

async fn setup_with(db: &TestDb, config: WebConfig) -> Setup {
    setup_budget(db, config, SweepBudget::default()).await
}

/// A setup whose inspector (the app's too) sweeps with `budget` per slice.
async fn setup_budget(db: &TestDb, config: WebConfig, budget: SweepBudget) -> Setup {
    let broker = Broker::connect(&db.url()).await.unwrap();
    let insp = Inspector::from_broker(broker.clone()).with_sweep_budget(budget);
    Setup {
        dash: Dashboard::new(insp.clone(), config),
        insp,
        broker,
        client: Client::connect(&db.url()).await.unwrap(),
        raw: db.raw().await,
    }
}

async fn setup(db: &TestDb) -> Setup {
    setup_with(db, WebConfig::default()).await
}

/// The dashboard's requests (`s.post(...)`, `s.app`, `s.token`) are the
/// shared [`Dashboard`]'s.
impl std::ops::Deref for Setup {
    type Target = Dashboard;

    fn deref(&self) -> &Dashboard {
        &self.dash
    }
}

impl Setup {
    async fn exists(&mut self, key: &str) -> bool {
        self.raw.exists(key).await.unwrap()
    }
}

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

// ---------------------------------------------------------------------------
// R10

/// A 5 MB binary payload's row shows the first 200 characters of its spaced
/// hex and the cut marker; a 5 MB payload with a text head and a binary
/// tail shows its text head, on the tab and in `/api`.
#[tokio::test]
async fn r10_big_payload_rows_show_exactly_their_head() {
    let db = support::redis();
    let s = setup(&db).await;
    let binary: Vec<u8> = (0..5_000_000u32).map(|i| (i % 251) as u8 | 0x80).collect();
    let mut mixed = vec![b'a'; 5_000_000];
    mixed[1000..].fill(0);
    for (id, payload) in [("bin", &binary), ("mixed", &mixed)] {
        s.client
            .enqueue(
                &Task::new("big", payload.clone()),
                EnqueueOptions::new().task_id(id),
            )
            .await
            .unwrap();
    }
    let hex: Vec<String> = binary[..67].iter().map(|b| format!("{b:02x}")).collect();
    let hex = hex.join(" ");
    assert_eq!(hex.len(), 200);
    let a200 = "a".repeat(200);

    let tab = s.hx_get("/queues/default/pending").await;
    assert_eq!(tab.status, StatusCode::OK, "{}", tab.body);
    assert_eq!(
        count(
            &tab.body,
            &format!("<pre class=\"payload binary\">{hex}…</pre>")
        ),
        1,
        "binary row: {}",
        &tab.body[..tab.body.len().min(4000)]
    );
    assert_eq!(
        count(
            &tab.body,
            &format!("<pre class=\"payload text\">{a200}…</pre>")
        ),
        1
    );
    assert!(tab.body.len() < 100_000, "tab is {} bytes", tab.body.len());

    let api = s
        .api(Method::GET, "/api/queues/default/pending_tasks")
        .await;
    assert_eq!(api.status, StatusCode::OK, "{}", api.body);
    let tasks = api.json()["tasks"].as_array().unwrap().clone();
    let payload_of = |id: &str| {
        tasks
            .iter()
            .find(|t| t["id"] == id)
            .unwrap_or_else(|| panic!("{id} listed"))["payload"]
            .clone()
    };
    assert_eq!(payload_of("bin"), "non-printable bytes");
    assert_eq!(payload_of("mixed"), format!("{a200}…"));
}

// ---------------------------------------------------------------------------
// R11

/// 5,000 entries in two schedulers (3,000 and 2,000).
async fn seed_entries(s: &Setup) -> Vec<String> {
    let entry = |i: usize| SchedulerEntry {
        id: format!("entry-{i:04}"),
        spec: "@every 1h".into(),
        task_type: "report".into(),
        task_payload: format!("{{\"n\":{i}}}").into_bytes(),
        enqueue_options: vec!["Queue(\"default\")".into()],
        next_enqueue_time: Some(Timestamp {
            seconds: 2_000_000_000,
            nanos: 0,
        }),
        prev_enqueue_time: None,
    };
    let first: Vec<SchedulerEntry> = (0..3000).map(entry).collect();
    let second: Vec<SchedulerEntry> = (3000..5000).map(entry).collect();
    s.broker
        .write_scheduler_entries("sched-a", &first, Duration::from_secs(600))
        .await
        .unwrap();
    s.broker
        .write_scheduler_entries("sched-b", &second, Duration::from_secs(900))
        .await
        .unwrap();
    let all: Vec<String> = s
        .insp
        .scheduler_entries()
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(all.len(), 5000);
    all
}

fn ids(v: &Value) -> Vec<String> {
    v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect()
}

/// The API honours `page`/`size` (default size 20), across the boundary
/// of two schedulers, and keeps asynqmon's answer (every entry) without
/// either; the page shows 20 rows with a pager, its refresh keeps the page.
#[tokio::test]
async fn r11_scheduler_entries_are_paged() {
    let db = support::redis();
    let s = setup(&db).await;
    let all = seed_entries(&s).await;

    let get_ids = |uri: &'static str| {
        let s = &s;
        async move {
            let a = s.api(Method::GET, uri).await;
            assert_eq!(a.status, StatusCode::OK, "{uri}: {}", a.body);
            ids(&a.json())
        }
    };
    assert_eq!(
        get_ids("/api/scheduler_entries?page=3&size=20").await,
        all[40..60]
    );
    assert_eq!(get_ids("/api/scheduler_entries?page=1").await, all[..20]);
    assert_eq!(get_ids("/api/scheduler_entries?size=5").await, all[..5]);
    // Ranks 2996..=3002 span both schedulers.
    assert_eq!(
        get_ids("/api/scheduler_entries?page=429&size=7").await,
        all[2996..3003]
    );
    assert_eq!(
        get_ids("/api/scheduler_entries?page=250&size=20").await,
        all[4980..]
    );
    assert!(
        get_ids("/api/scheduler_entries?page=251&size=20")
            .await
            .is_empty()
    );
    assert_eq!(get_ids("/api/scheduler_entries").await, all);
    let bad = s.api(Method::GET, "/api/scheduler_entries?page=0").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);

    let page = s.hx_get("/schedulers").await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(count(&page.body, "<tr class=\"entry\">"), 20);
    assert!(page.body.contains("1–20 of 5000"), "{}", page.body);
    assert!(page.body.contains(&format!(">{} <button", all[0])));
    assert!(
        page.body.len() < 60_000,
        "page is {} bytes",
        page.body.len()
    );
    let last = s.hx_get("/schedulers?page=100&size=50").await;
    assert_eq!(count(&last.body, "<tr class=\"entry\">"), 50);
    assert!(last.body.contains("4951–5000 of 5000"));
    assert!(last.body.contains(&format!(">{} <button", all[4999])));
    assert!(!last.body.contains("rel=\"next\""));
    // The live refresh asks for the page it shows.
    assert!(
        last.body
            .contains("hx-get=\"/schedulers?page=100&amp;size=50\" hx-trigger=\"every"),
        "{}",
        &last.body[..600]
    );
    let bad = s.hx_get("/schedulers?page=0").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
}

// ---------------------------------------------------------------------------
// R12

/// Makes `id` (archived in `queue`) left behind as Go's archive trim
/// leaves a task: the id leaves the archived zset, the hash stays.
async fn leave_behind(s: &mut Setup, queue: &str, id: &str, state: TaskState) {
    let key = match state {
        TaskState::Archived => keys::archived_key(queue),
        TaskState::Retry => keys::retry_key(queue),
        TaskState::Scheduled => keys::scheduled_key(queue),
        other => panic!("not a zset state: {other}"),
    };
    let removed: i64 = s.raw.zrem(&key, id).await.unwrap();
    assert_eq!(removed, 1, "{id} was in {key}");
}

async fn archived_task(s: &Setup, queue: &str, id: &str, opts: EnqueueOptions) {
    s.client
        .enqueue(
            &Task::new("t", id.as_bytes().to_vec()),
            opts.task_id(id).queue(queue),
        )
        .await
        .unwrap();
    s.insp.archive_task(queue, id).await.unwrap();
}

/// Run and delete of a left-behind task never answer 5xx: run is refused
/// (400), delete removes it, from `/api` and from the task page, which
/// says what the task is; an id in a zset without a hash answers 404 to
/// run, archive and delete.
#[tokio::test]
async fn r12_left_behind_task_is_shown_and_deleted_never_5xx() {
    let db = support::redis();
    let mut s = setup(&db).await;
    for id in ["lb1", "lb2", "lb3"] {
        archived_task(&s, "default", id, EnqueueOptions::new()).await;
        leave_behind(&mut s, "default", id, TaskState::Archived).await;
    }

    let run = s
        .api(Method::POST, "/api/queues/default/archived_tasks/lb1:run")
        .await;
    assert_eq!(run.status, StatusCode::BAD_REQUEST, "{}", run.body);
    assert!(run.body.contains("left behind"), "{}", run.body);
    let archive = s
        .api(
            Method::POST,
            "/api/queues/default/archived_tasks/lb1:archive",
        )
        .await;
    assert!(archive.status.is_client_error(), "{}", archive.status);
    let del = s
        .api(Method::DELETE, "/api/queues/default/archived_tasks/lb1")
        .await;
    assert_eq!(del.status, StatusCode::NO_CONTENT, "{}", del.body);
    assert!(!s.exists(&keys::task_key("default", "lb1")).await);

    let page = s.hx_get("/queues/default/tasks/lb2").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body
            .contains("Left behind:</strong> not in its archived set"),
        "{}",
        page.body
    );
    assert_eq!(count(&page.body, "data-op=\"delete\""), 1);
    assert_eq!(count(&page.body, "data-op=\"run\""), 0);
    let run = s
        .post("/queues/default/tasks/lb2/run?from=task&tab=archived", "")
        .await;
    assert_eq!(run.status, StatusCode::BAD_REQUEST, "{}", run.body);
    let del = s
        .post(
            "/queues/default/tasks/lb2/delete?from=task&tab=archived",
            "",
        )
        .await;
    assert_eq!(del.status, StatusCode::OK, "{}", del.body);
    assert!(!s.exists(&keys::task_key("default", "lb2")).await);

    // An archived task in its set is not left behind.
    archived_task(&s, "default", "ok1", EnqueueOptions::new()).await;
    let page = s.hx_get("/queues/default/tasks/ok1").await;
    assert!(!page.body.contains("Left behind"));
    assert_eq!(count(&page.body, "data-op=\"run\""), 1);

    // The reverse: an id in a zset whose hash is gone.
    let _: i64 = s
        .raw
        .zadd(keys::scheduled_key("default"), "ghost", 2_000_000_000i64)
        .await
        .unwrap();
    for (method, uri) in [
        (
            Method::POST,
            "/api/queues/default/scheduled_tasks/ghost:run",
        ),
        (
            Method::POST,
            "/api/queues/default/scheduled_tasks/ghost:archive",
        ),
        (Method::DELETE, "/api/queues/default/scheduled_tasks/ghost"),
    ] {
        let a = s.api(method.clone(), uri).await;
        assert_eq!(
            a.status,
            StatusCode::NOT_FOUND,
            "{method} {uri}: {}",
            a.body
        );
    }
    for op in ["run", "archive", "delete"] {
        let a = s
            .post(&format!("/queues/default/tasks/ghost/{op}?from=task"), "")
            .await;
        assert_eq!(a.status, StatusCode::NOT_FOUND, "{op}: {}", a.body);
    }
}

/// One step per slice: ~160 task keys among ~370 keys (SCAN COUNT 100)
/// make every sweep several slices.
const ONE_STEP: SweepBudget = SweepBudget {
    max_steps: 1,
    max_time: Duration::from_secs(60),
};

/// `n` left-behind tasks `lb-<i>` of `queue` (scheduled, their zset then
/// deleted), and 200 keys outside every queue, enough that deleting the
/// left-behind ones never makes Redis shrink its key table (which would let
/// SCAN return a key twice and the scanned totals differ).
async fn bulk_left_behind(s: &mut Setup, queue: &str, n: usize) {
    for i in 0..n {
        s.client
            .enqueue(
                &Task::new("t", Vec::new()),
                EnqueueOptions::new()
                    .task_id(format!("lb-{i}"))
                    .queue(queue)
                    .process_in(Duration::from_secs(3600)),
            )
            .await
            .unwrap();
    }
    let _: i64 = s.raw.del(keys::scheduled_key(queue)).await.unwrap();
    let noise: Vec<(String, i64)> = (0..200).map(|i| (format!("noise:{i}"), i)).collect();
    let _: () = s.raw.mset(&noise).await.unwrap();
}

/// Keys in the database, the dashboard's audit log left out (a refused
/// action is audited, and the log's first entry creates its key).
async fn dbsize(s: &mut Setup) -> u64 {
    let (size, audit): (u64, u64) = redis::pipe()
        .cmd("DBSIZE")
        .cmd("EXISTS")
        .arg(asynqdeck::broker::keys::AUDIT_LOG)
        .query_async(&mut s.raw)
        .await
        .unwrap();
    size - audit
}

/// Follows `/api` slices of `uri` from cursor 0 until the cursor is 0;
/// each answer is exactly `{"scanned", <field>, "cursor"}`. Returns the
/// summed `scanned` and `<field>` and the number of slices.
async fn api_sweep(s: &Setup, method: Method, uri: &str, field: &str) -> (u64, u64, usize) {
    let (mut cursor, mut scanned, mut n, mut slices) = (0u64, 0, 0, 0);
    loop {
        let a = s
            .api(method.clone(), &format!("{uri}?cursor={cursor}"))
            .await;
        assert_eq!(a.status, StatusCode::OK, "{uri}: {}", a.body);
        let v = a.json();
        let mut names: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        names.sort_unstable();
        let mut want = vec!["cursor", "scanned", field];
        want.sort_unstable();
        assert_eq!(names, want, "{}", a.body);
        scanned += v["scanned"].as_u64().unwrap();
        n += v[field].as_u64().unwrap();
        slices += 1;
        cursor = v["cursor"].as_u64().unwrap();
        if cursor == 0 {
            return (scanned, n, slices);
        }
        assert!(slices < 10_000, "the sweep never ends");
    }
}

/// Follows [`Inspector::left_behind_slice`] from cursor 0 to the end.
async fn inspector_sweep(s: &Setup, queue: &str, delete: bool) -> (SweepCount, usize) {
    let (mut cursor, mut total, mut slices) = (0, SweepCount::default(), 0);
    loop {
        let (next, c) = s
            .insp
            .left_behind_slice(queue, cursor, delete)
            .await
            .unwrap();
        total.add(c);
        slices += 1;
        if next == 0 {
            return (total, slices);
        }
        cursor = next;
    }
}

/// The bulk sweep, a job of bounded slices driven by a cursor: the count
/// (preview) changes nothing; the delete removes exactly the left-behind
/// tasks (archived, retry, aggregating) with their locks, and keeps every
/// task in its set, pending ones, and a task of a queue whose name extends
/// this queue's key prefix (`default}:t:x`). With one step per slice the
/// inspector and `/api` take several slices whose numbers add up to the
/// exact totals. CSRF and read-only refuse the delete as every action.
#[tokio::test]
async fn r12_left_behind_sweep_counts_then_deletes_only_them() {
    let db = support::redis();
    let mut s = setup_budget(&db, WebConfig::default(), ONE_STEP).await;
    bulk_left_behind(&mut s, "default", 150).await;
    for id in ["a1", "a2", "a3"] {
        archived_task(&s, "default", id, EnqueueOptions::new()).await;
        leave_behind(&mut s, "default", id, TaskState::Archived).await;
    }
    // A left-behind task with a lock (ours writes unique_key in the hash).
    s.client
        .enqueue(
            &Task::new("t", b"r1".to_vec()),
            EnqueueOptions::new()
                .task_id("r1")
                .unique(Duration::from_secs(3600))
                .process_in(Duration::from_secs(3600)),
        )
        .await
        .unwrap();
    let r1_lock = keys::unique_key("default", "t", Some(b"r1"));
    assert!(s.exists(&r1_lock).await);
    leave_behind(&mut s, "default", "r1", TaskState::Scheduled).await;
    // An aggregating hash in no group and no aggregation set.
    s.client
        .enqueue(
            &Task::new("t", b"g1".to_vec()),
            EnqueueOptions::new().task_id("g1").group("grp"),
        )
        .await
        .unwrap();
    let _: i64 = s
        .raw
        .zrem(keys::group_key("default", "grp"), "g1")
        .await
        .unwrap();
    // Tasks that stay: in their sets, pending, and another queue's.
    archived_task(&s, "default", "keep-archived", EnqueueOptions::new()).await;
    s.client
        .enqueue(
            &Task::new("t", b"p".to_vec()),
            EnqueueOptions::new().task_id("keep-pending"),
        )
        .await
        .unwrap();
    s.client
        .enqueue(
            &Task::new("t", b"s".to_vec()),
            EnqueueOptions::new()
                .task_id("keep-scheduled")
                .process_in(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    archived_task(&s, "default}:t:x", "other", EnqueueOptions::new()).await;
    let other_key = keys::task_key("default}:t:x", "other");
    assert!(other_key.starts_with(&keys::task_key_prefix("default")));
    let size = dbsize(&mut s).await;

    // Scanned: the 159 task keys and the other queue's archived zset
    // (`asynq:{default}:t:x}:archived` matches the prefix; not a hash).
    let (c, slices) = inspector_sweep(&s, "default", false).await;
    assert_eq!((c.scanned, c.found, c.deleted), (160, 155, 0));
    assert!(slices > 1, "one step per slice: {slices} slices");
    // The time bound: no time left after the first step ends each slice.
    let timed = Setup {
        insp: s.insp.clone().with_sweep_budget(SweepBudget {
            max_steps: 1000,
            max_time: Duration::ZERO,
        }),
        ..setup(&db).await
    };
    let (c, slices) = inspector_sweep(&timed, "default", false).await;
    assert_eq!((c.scanned, c.found, c.deleted), (160, 155, 0));
    assert!(slices > 1, "one step per slice: {slices} slices");
    // The whole count in one call (for library users).
    let c = s.insp.count_left_behind("default").await.unwrap();
    assert_eq!((c.scanned, c.found, c.deleted), (160, 155, 0));
    let (scanned, found, slices) = api_sweep(
        &s,
        Method::GET,
        "/api/queues/default/left_behind_tasks",
        "left_behind",
    )
    .await;
    assert_eq!((scanned, found), (160, 155));
    assert!(slices > 1, "one step per slice: {slices} slices");
    assert_eq!(dbsize(&mut s).await, size, "counting deletes nothing");
    assert!(s.insp.is_left_behind("default", "a1").await.unwrap());
    assert!(s.insp.is_left_behind("default", "lb-0").await.unwrap());
    assert!(
        !s.insp
            .is_left_behind("default", "keep-archived")
            .await
            .unwrap()
    );
    assert!(
        !s.insp
            .is_left_behind("default", "keep-pending")
            .await
            .unwrap()
    );
    let bad = s
        .api(
            Method::GET,
            "/api/queues/default/left_behind_tasks?cursor=x",
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);

    // Without the CSRF token, and in read-only mode: refused.
    let refused = http::as_page(
        &s.app,
        Method::POST,
        "/queues/default/left_behind/delete",
        true,
        None,
        "cursor=0",
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let ro = setup_with(
        &db,
        WebConfig {
            read_only: true,
            ..WebConfig::default()
        },
    )
    .await;
    let refused = ro.post("/queues/default/left_behind/delete", "").await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let refused = ro
        .api(
            Method::POST,
            "/api/queues/default/left_behind_tasks:delete_all?cursor=0",
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let ro_page = ro.hx_get("/queues/default/left_behind").await;
    assert!(!ro_page.body.contains("left_behind/delete"));
    assert_eq!(dbsize(&mut s).await, size, "refusals delete nothing");

    let (scanned, deleted, slices) = api_sweep(
        &s,
        Method::POST,
        "/api/queues/default/left_behind_tasks:delete_all",
        "deleted",
    )
    .await;
    assert_eq!((scanned, deleted), (160, 155));
    assert!(slices > 1, "one step per slice: {slices} slices");
    assert_eq!(dbsize(&mut s).await, size - 155 - 1, "and r1's lock");
    for id in ["a1", "a2", "a3", "r1", "g1", "lb-0", "lb-149"] {
        assert!(
            !s.exists(&keys::task_key("default", id)).await,
            "{id} deleted"
        );
    }
    assert!(
        !s.exists(&r1_lock).await,
        "the swept task's lock is released"
    );
    for id in ["keep-archived", "keep-pending", "keep-scheduled"] {
        assert!(s.exists(&keys::task_key("default", id)).await, "{id} kept");
    }
    assert!(s.exists(&other_key).await, "another queue's task is kept");
    let (c, _) = inspector_sweep(&s, "default", true).await;
    assert_eq!((c.scanned, c.found, c.deleted), (5, 0, 0));
    let unknown = s
        .api(Method::GET, "/api/queues/nope/left_behind_tasks")
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    let unknown = s
        .api(Method::GET, "/api/queues/nope/left_behind_tasks?cursor=5")
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
}

impl Setup {
    /// Sends `r` as htmx would (HX-Request, the CSRF header, the form).
    async fn hx(&self, r: &HxRequest) -> Reply {
        http::as_page(
            &self.app,
            r.method.clone(),
            &r.url,
            true,
            Some(&self.token),
            &form_body(&r.fields),
        )
        .await
    }
}

/// The page's sweep as a browser runs it: the preview fragment re-requests
/// itself with the cursor (`hx-get`, `hx-trigger="load"`) until done,
/// showing the progress, and deletes nothing; its Delete form starts the
/// delete, whose fragments post the next cursor with the CSRF token
/// (hidden inputs) until the final report. Each slice also works without
/// JS (a link, a submit button). The queue name is escaped everywhere;
/// read-only mode and a missing token refuse the delete.
#[tokio::test]
async fn r12_left_behind_page_follows_the_htmx_continuation() {
    const Q: &str = "q<&\"x";
    const Q_URL: &str = "/queues/q%3C%26%22x";
    let db = support::redis();
    let mut s = setup_budget(&db, WebConfig::default(), ONE_STEP).await;
    bulk_left_behind(&mut s, Q, 150).await;
    archived_task(&s, Q, "keep", EnqueueOptions::new()).await;
    let size = dbsize(&mut s).await;

    // The page (no htmx): the first slice, its continuation, a no-JS link.
    let page = http::as_page(
        &s.app,
        Method::GET,
        &format!("{Q_URL}/left_behind"),
        false,
        None,
        "",
    )
    .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("<h1>"), "{}", page.body);
    assert!(!page.body.contains(Q), "escaped: {}", page.body);
    assert!(page.body.contains("q&#60;&#38;&#34;x"), "{}", page.body);
    let mut next = continuation(&page.body).expect("the first slice is not all");
    assert_eq!(next.method, Method::GET);
    assert!(
        next.url
            .starts_with(&format!("{Q_URL}/left_behind?cursor=")),
        "{next:?}"
    );
    assert!(
        page.body
            .contains(&format!("href=\"{}\"", next.url.replace('&', "&#38;"))),
        "a no-JS link to the next slice: {}",
        page.body
    );
    assert!(page.body.contains("keys so far"), "{}", page.body);
    let mut scanned = field(&page.body, "scanned").unwrap();
    let mut slices = 1;
    let done = loop {
        let a = s.hx(&next).await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.body);
        assert!(
            a.body.starts_with("<section id=\"left-behind\""),
            "{}",
            a.body
        );
        slices += 1;
        let now = field(&a.body, "scanned").unwrap();
        assert!(now >= scanned, "{now} after {scanned}");
        scanned = now;
        match continuation(&a.body) {
            Some(n) => {
                assert!(a.body.contains("keys so far"), "{}", a.body);
                next = n;
            }
            None => break a,
        }
    };
    assert!(slices > 2, "{slices} slices");
    assert_eq!(
        (field(&done.body, "scanned"), field(&done.body, "found")),
        (Some(151), Some(150)),
        "{}",
        done.body
    );
    assert_eq!(dbsize(&mut s).await, size, "the preview deletes nothing");

    // Read-only: no Delete form; a delete slice is refused.
    let ro = setup_budget(
        &db,
        WebConfig {
            read_only: true,
            ..WebConfig::default()
        },
        ONE_STEP,
    )
    .await;
    let ro_page = ro.hx_get(&format!("{Q_URL}/left_behind")).await;
    assert!(
        !ro_page.body.contains("left_behind/delete"),
        "{}",
        ro_page.body
    );

    // The Delete form, then the delete's slices.
    let at = done.body.find("<form").expect("a Delete form");
    let mut next = hx_request(&done.body, at + 1);
    assert_eq!(next.method, Method::POST);
    assert_eq!(next.url, format!("{Q_URL}/left_behind/delete"));
    assert!(
        next.fields
            .contains(&("csrf_token".to_string(), s.token.clone())),
        "{next:?}"
    );
    assert_eq!(ro.hx(&next).await.status, StatusCode::FORBIDDEN);
    let no_token = http::as_page(
        &s.app,
        Method::POST,
        &next.url,
        true,
        None,
        &form_body(&next.fields),
    )
    .await;
    assert_eq!(no_token.status, StatusCode::FORBIDDEN);
    assert_eq!(dbsize(&mut s).await, size, "refusals delete nothing");
    let mut slices = 0;
    let mut deleted = 0;
    let done = loop {
        let a = s.hx(&next).await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.body);
        slices += 1;
        let now = field(&a.body, "deleted").unwrap();
        assert!(now >= deleted, "{now} after {deleted}");
        deleted = now;
        match continuation(&a.body) {
            Some(n) => {
                assert!(a.body.contains("keys so far"), "{}", a.body);
                assert_eq!(n.method, Method::POST);
                assert!(
                    n.fields
                        .contains(&("csrf_token".to_string(), s.token.clone())),
                    "{n:?}"
                );
                assert!(
                    a.body.contains(&format!("href=\"{Q_URL}\">Cancel</a>")),
                    "{}",
                    a.body
                );
                assert!(a.body.contains("type=\"submit\""), "no-JS: {}", a.body);
                next = n;
            }
            None => break a,
        }
    };
    assert!(slices > 1, "{slices} slices");
    assert_eq!(
        (field(&done.body, "scanned"), field(&done.body, "deleted")),
        (Some(151), Some(150)),
        "{}",
        done.body
    );
    assert_eq!(dbsize(&mut s).await, size - 150);
    assert!(s.exists(&keys::task_key(Q, "keep")).await);
    assert!(!s.exists(&keys::task_key(Q, "lb-7")).await);
}

// ---------------------------------------------------------------------------
// R13

fn peer_id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

/// Go enqueues a unique task in a group: the lock exists, holds the id, and
/// the hash has no `unique_key` field (the lock is named only in msg).
async fn go_group_task(s: &mut Setup, db: &TestDb, payload: &str) -> (String, String) {
    let id = peer_id(&db.peer_ok(&[
        "enqueue",
        "--type",
        "t",
        "--payload",
        payload,
        "--group",
        "g",
        "--unique",
        "1h",
    ]));
    let lock = keys::unique_key("default", "t", Some(payload.as_bytes()));
    let holder: Option<String> = s.raw.get(&lock).await.unwrap();
    assert_eq!(holder.as_deref(), Some(id.as_str()));
    let field: Option<String> = s
        .raw
        .hget(keys::task_key("default", &id), "unique_key")
        .await
        .unwrap();
    assert_eq!(field, None, "Go writes no unique_key field for group tasks");
    (id, lock)
}

/// Deleting one Go group task, all of a group, and all pending (a group
/// task that was run) each release the task's lock; Go can then enqueue
/// the same unique task again. A lock held by another id is kept.
#[tokio::test]
async fn r13_deleting_go_group_tasks_releases_their_locks() {
    let db = support::redis();
    let mut s = setup(&db).await;

    let (id1, lock1) = go_group_task(&mut s, &db, "p1").await;
    s.insp.delete_task("default", &id1).await.unwrap();
    assert!(!s.exists(&lock1).await, "delete one: lock released");
    db.peer_ok(&[
        "enqueue",
        "--type",
        "t",
        "--payload",
        "p1",
        "--group",
        "g",
        "--unique",
        "1h",
    ]);

    let (_, lock2) = go_group_task(&mut s, &db, "p2").await;
    let (_, lock3) = go_group_task(&mut s, &db, "p3").await;
    assert_eq!(
        s.insp.delete_all_aggregating("default", "g").await.unwrap(),
        3
    );
    for lock in [&lock1, &lock2, &lock3] {
        assert!(
            !s.exists(lock).await,
            "delete all of a group: {lock} released"
        );
    }

    let (id4, lock4) = go_group_task(&mut s, &db, "p4").await;
    s.insp.run_task("default", &id4).await.unwrap();
    assert!(s.exists(&lock4).await, "run keeps the lock (as Go)");
    assert_eq!(
        s.insp
            .delete_all("default", TaskState::Pending)
            .await
            .unwrap(),
        1
    );
    assert!(!s.exists(&lock4).await, "delete all pending: lock released");

    // Through the API: one group task, then a group.
    let (id5, lock5) = go_group_task(&mut s, &db, "p5").await;
    let a = s
        .api(
            Method::DELETE,
            &format!("/api/queues/default/groups/g/aggregating_tasks/{id5}"),
        )
        .await;
    assert_eq!(a.status, StatusCode::NO_CONTENT, "{}", a.body);
    assert!(!s.exists(&lock5).await);
    let (_, lock6) = go_group_task(&mut s, &db, "p6").await;
    let a = s
        .api(
            Method::DELETE,
            "/api/queues/default/groups/g/aggregating_tasks:delete_all",
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert!(!s.exists(&lock6).await);

    // A lock that another task holds now is not touched.
    let (id7, lock7) = go_group_task(&mut s, &db, "p7").await;
    let _: () = s.raw.set(&lock7, "someone-else").await.unwrap();
    s.insp.delete_task("default", &id7).await.unwrap();
    let holder: Option<String> = s.raw.get(&lock7).await.unwrap();
    assert_eq!(holder.as_deref(), Some("someone-else"));
}
