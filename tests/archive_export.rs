//! Archive export (issue 17 item 7, S31): `GET …/queues/{q}/{state}/export`
//! (exact NDJSON lines and CSV rows, binary payloads as base64, headers,
//! corrupt tasks as error lines, the tab's filters and `since`, whole tabs
//! of more than one chunk, errors before the first byte), `asynqdeck
//! export` printing the same bytes, and the engine's archive exporter
//! (`--archive-export-dir`): gzip files that decode to the archived
//! tasks, nothing exported twice across ticks.

use std::sync::Arc;

use asynqdeck::broker::proto::TaskMessage;
use asynqdeck::broker::{Broker, keys};
use asynqdeck::clock::SimulatedClock;
use asynqdeck::web::WebConfig;
use asynqdeck::{Inspector, TaskState};
use axum::http::StatusCode;
use prost::Message;

use crate::support::clock::now;
use crate::support::export::{exported_lines, temp_dir};
use crate::support::http::{self, Dashboard};
use crate::support::redis::RawConn;
use crate::support::seed;
use crate::support::{self, TestDb};

struct Setup {
    dash: Dashboard,
    insp: Inspector,
    raw: RawConn,
}

async fn setup(db: &TestDb) -> Setup {
    let broker = Broker::connect(&db.url())
        .await
        .unwrap()
        .with_clock(Arc::new(SimulatedClock::new(now())));
    let insp = Inspector::from_broker(broker);
    Setup {
        dash: Dashboard::new(insp.clone(), WebConfig::default()),
        insp,
        raw: db.raw().await,
    }
}

fn t(offset: i64) -> i64 {
    now().timestamp() + offset
}

/// Three archived tasks of queue `q` (binary payload; headers and a
/// failure; a msg that does not decode) and one retry task.
async fn seed_three(raw: &mut RawConn) {
    let mut bin = seed::msg("q", "bin", "img:resize", &[0xff, 0x00, 0x41]);
    bin.retried = 25;
    bin.error_msg = "too big".into();
    bin.last_failed_at = t(-300);
    seed::message(raw, &bin, "archived", t(-300)).await;
    let mut hdr = seed::msg("q", "hdr", "email:send", br#"{"to":"a@b.c"}"#);
    hdr.headers = [("trace".to_string(), "x-1".to_string())].into();
    hdr.retry = 3;
    hdr.retried = 3;
    hdr.error_msg = "dial tcp: refused".into();
    hdr.last_failed_at = t(-200);
    hdr.deadline = t(3600);
    seed::message(raw, &hdr, "archived", t(-200)).await;
    seed::put(
        raw,
        "q",
        "bad",
        b"\xff\xff\xff".to_vec(),
        "archived",
        t(-100),
        "",
    )
    .await;
    let retry = seed::msg("q", "r1", "email:send", b"later");
    seed::message(raw, &retry, "retry", t(60)).await;
}

const BIN_LINE: &str = concat!(
    r#"{"id":"bin","queue":"q","type":"img:resize","state":"archived","payload":"/wBB","payload_encoding":"base64","#,
    r#""headers":{},"max_retry":25,"retried":25,"last_err":"too big","last_failed_at":"2026-03-10T11:55:00Z","#,
    r#""timeout":1800,"deadline":null,"group":"","next_process_at":null,"retention":0,"completed_at":null,"#,
    r#""kept_until":null,"result":null,"result_encoding":null,"is_orphaned":false}"#
);

const HDR_LINE: &str = concat!(
    r#"{"id":"hdr","queue":"q","type":"email:send","state":"archived","payload":"{\"to\":\"a@b.c\"}","payload_encoding":"text","#,
    r#""headers":{"trace":"x-1"},"max_retry":3,"retried":3,"last_err":"dial tcp: refused","last_failed_at":"2026-03-10T11:56:40Z","#,
    r#""timeout":1800,"deadline":"2026-03-10T13:00:00Z","group":"","next_process_at":null,"retention":0,"completed_at":null,"#,
    r#""kept_until":null,"result":null,"result_encoding":null,"is_orphaned":false}"#
);

fn bad_line() -> String {
    format!(
        r#"{{"id":"bad","state":"archived","error":"{}"}}"#,
        BAD_REASON
    )
}

const BAD_REASON: &str = "corrupt data in Redis at asynq:{q}:t:bad msg: failed to decode Protobuf message: invalid varint";

/// NDJSON: one exact line per task in tab order (by archived score), the
/// binary payload in base64, the headers, the corrupt task an error line;
/// the download headers.
#[tokio::test]
async fn ndjson_lines_are_exact() {
    let db = support::redis();
    let mut s = setup(&db).await;
    seed_three(&mut s.raw).await;
    let r = http::get(&s.dash.app, "/queues/q/archived/export?format=ndjson").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.content_type(), "application/x-ndjson; charset=utf-8");
    assert_eq!(
        r.header("content-disposition"),
        Some("attachment; filename=\"q-archived.ndjson\"")
    );
    assert_eq!(r.body, format!("{BIN_LINE}\n{HDR_LINE}\n{}\n", bad_line()));
    // The default format is NDJSON; the retry tab holds only its task.
    let r = http::get(&s.dash.app, "/queues/q/archived/export").await;
    assert_eq!(r.body, format!("{BIN_LINE}\n{HDR_LINE}\n{}\n", bad_line()));
    let r = http::get(&s.dash.app, "/queues/q/retry/export").await;
    let lines: Vec<&str> = r.body.lines().collect();
    assert_eq!(lines.len(), 1);
    assert!(
        lines[0].starts_with(
            r#"{"id":"r1","queue":"q","type":"email:send","state":"retry","payload":"later","#
        ) && lines[0].contains(r#""next_process_at":"2026-03-10T12:01:00Z""#),
        "{}",
        lines[0]
    );
}

/// CSV: the header row, the same columns, headers as JSON text, the
/// corrupt task a row with only id, state and error.
#[tokio::test]
async fn csv_rows_are_exact() {
    let db = support::redis();
    let mut s = setup(&db).await;
    seed_three(&mut s.raw).await;
    let r = http::get(&s.dash.app, "/queues/q/archived/export?format=csv").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.content_type(), "text/csv; charset=utf-8");
    let expected = [
        "id,queue,type,state,payload,payload_encoding,headers,max_retry,retried,last_err,last_failed_at,timeout,deadline,group,next_process_at,retention,completed_at,kept_until,result,result_encoding,is_orphaned,error",
        "bin,q,img:resize,archived,/wBB,base64,{},25,25,too big,2026-03-10T11:55:00Z,1800,,,,0,,,,,false,",
        r#"hdr,q,email:send,archived,"{""to"":""a@b.c""}",text,"{""trace"":""x-1""}",3,3,dial tcp: refused,2026-03-10T11:56:40Z,1800,2026-03-10T13:00:00Z,,,0,,,,,false,"#,
        &format!("bad,,,archived,,,,,,,,,,,,,,,,,,{BAD_REASON}"),
    ];
    assert_eq!(r.body, format!("{}\r\n", expected.join("\r\n")));
}

/// The tab's filters (type, payload substring, id) and `since` select
/// exactly the tasks they name; errors come before any byte.
#[tokio::test]
async fn filters_since_and_errors() {
    let db = support::redis();
    let mut s = setup(&db).await;
    seed_three(&mut s.raw).await;
    let app = &s.dash.app;
    let ids = |body: &str| -> Vec<String> {
        body.lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    // A type filter keeps the matching task and the unreadable one.
    let r = http::get(app, "/queues/q/archived/export?type=email:send").await;
    assert_eq!(ids(&r.body), ["hdr", "bad"]);
    let r = http::get(app, "/queues/q/archived/export?q=a%40b.c").await;
    assert_eq!(ids(&r.body), ["hdr", "bad"]);
    let r = http::get(app, "/queues/q/archived/export?id=hdr&page=3&size=50").await;
    assert_eq!(r.body, format!("{HDR_LINE}\n"));
    let r = http::get(app, "/queues/q/archived/export?id=r1").await;
    assert_eq!(r.body, "");
    let r = http::get(app, "/queues/q/archived/export?id=bad").await;
    assert_eq!(r.body, format!("{}\n", bad_line()));
    // Since: archived at or after now - 200 s.
    let since = "2026-03-10T11:56:40Z";
    let r = http::get(app, &format!("/queues/q/archived/export?since={since}")).await;
    assert_eq!(ids(&r.body), ["hdr", "bad"]);
    let r = http::get(app, "/queues/q/archived/export?since=150s").await;
    assert_eq!(ids(&r.body), ["bad"]);

    let r = http::get(app, "/queues/q/archived/export?format=xml").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.body.contains("unknown export format"), "{}", r.body);
    let r = http::get(app, "/queues/q/pending/export?since=1h").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let r = http::get(app, "/queues/q/archived/export?since=yesterday").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let r = http::get(app, "/queues/nope/archived/export").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = http::get(app, "/queues/q/bogus/export").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}

/// Writes `n` archived tasks `a00000`… scored `t(-n) + i` (one pipeline per
/// 500) and `n` pending ones `p00000`… (p00000 next to run).
async fn seed_many(raw: &mut RawConn, q: &str, n: usize) {
    let _: () = redis::cmd("SADD")
        .arg(keys::ALL_QUEUES)
        .arg(q)
        .query_async(raw)
        .await
        .unwrap();
    for start in (0..n).step_by(500) {
        let mut pipe = redis::pipe();
        for i in start..(start + 500).min(n) {
            for (prefix, state) in [("a", "archived"), ("p", "pending")] {
                let id = format!("{prefix}{i:05}");
                let m: TaskMessage = seed::msg(q, &id, "bulk", id.as_bytes());
                pipe.cmd("HSET")
                    .arg(keys::task_key(q, &id))
                    .arg("msg")
                    .arg(m.encode_to_vec())
                    .arg("state")
                    .arg(state)
                    .ignore();
            }
            pipe.cmd("ZADD")
                .arg(keys::archived_key(q))
                .arg(t(-(n as i64)) + i as i64)
                .arg(format!("a{i:05}"))
                .ignore();
            pipe.cmd("LPUSH")
                .arg(keys::pending_key(q))
                .arg(format!("p{i:05}"))
                .ignore();
        }
        let () = pipe.query_async(raw).await.unwrap();
    }
}

/// A tab of 2,600 tasks (six chunks) comes out whole, in tab order, each
/// task once: the archived zset by score, the pending list from the
/// next-to-run end.
#[tokio::test]
async fn whole_tabs_of_many_chunks() {
    let db = support::redis();
    let mut s = setup(&db).await;
    let n = 2_600;
    seed_many(&mut s.raw, "big", n).await;
    for (state, prefix) in [("archived", "a"), ("pending", "p")] {
        let r = http::get(&s.dash.app, &format!("/queues/big/{state}/export")).await;
        assert_eq!(r.status, StatusCode::OK);
        let got: Vec<String> = r
            .body
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        let want: Vec<String> = (0..n).map(|i| format!("{prefix}{i:05}")).collect();
        assert_eq!(got, want, "{state}");
    }
    let r = http::get(
        &s.dash.app,
        "/queues/big/archived/export?format=csv&type=bulk",
    )
    .await;
    assert_eq!(r.body.matches("\r\n").count(), n + 1);
    // The library call gives the same rows, chunk by chunk.
    use futures_util::StreamExt;
    let chunks: Vec<usize> = s
        .insp
        .export_tasks(asynqdeck::inspector::ExportRequest {
            queue: "big".into(),
            state: TaskState::Archived,
            group: None,
            filter: Default::default(),
            since: None,
        })
        .await
        .unwrap()
        .map(|c| c.unwrap().len())
        .collect()
        .await;
    assert_eq!(chunks, [500, 500, 500, 500, 500, 100, 0]);
}

const BIN: &str = env!("CARGO_BIN_EXE_asynqdeck");

/// Runs `asynqdeck export` with `args` against `db`: exit code, stdout, stderr.
async fn cli(db: &TestDb, args: &[&str]) -> (i32, String, String) {
    let out = tokio::process::Command::new(BIN)
        .arg("export")
        .arg("--redis-url")
        .arg(db.url())
        .args(args)
        .output()
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `asynqdeck export` prints the dashboard's bytes (NDJSON and CSV, with
/// `--since` and `--type`), writes `--output`, and fails with exit codes 1
/// (unknown queue) and 2 (bad flags: a bad format, `--since` for pending
/// or active, a `--since` that does not parse).
#[tokio::test]
async fn cli_prints_the_same() {
    let db = support::redis();
    let mut s = setup(&db).await;
    seed_three(&mut s.raw).await;
    let (code, out, err) = cli(
        &db,
        &["--queue", "q", "--state", "archived", "--format", "ndjson"],
    )
    .await;
    assert_eq!((code, err.as_str()), (0, ""), "{err}");
    assert_eq!(out, format!("{BIN_LINE}\n{HDR_LINE}\n{}\n", bad_line()));
    let web = http::get(&s.dash.app, "/queues/q/archived/export?format=csv").await;
    let (code, out, _) = cli(&db, &["--queue", "q", "--format", "csv"]).await;
    assert_eq!((code, out), (0, web.body));
    let (_, out, _) = cli(
        &db,
        &[
            "--queue",
            "q",
            "--since",
            "2026-03-10T11:56:40Z",
            "--type",
            "email:send",
        ],
    )
    .await;
    assert_eq!(out, format!("{HDR_LINE}\n{}\n", bad_line()));
    let dir = std::env::temp_dir().join(format!("asynqdeck-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("retry.ndjson");
    let (code, out, _) = cli(
        &db,
        &[
            "--queue",
            "q",
            "--state",
            "retry",
            "--output",
            file.to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!((code, out.as_str()), (0, ""));
    let web = http::get(&s.dash.app, "/queues/q/retry/export").await;
    // The retry row's next_process_at is its score, not a clock reading.
    assert_eq!(std::fs::read_to_string(&file).unwrap(), web.body);
    std::fs::remove_dir_all(&dir).unwrap();

    let (code, _, err) = cli(&db, &["--queue", "nope"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("nope"), "{err}");
    let (code, _, err) = cli(&db, &["--queue", "q", "--format", "xml"]).await;
    assert_eq!(code, 2);
    assert_eq!(err, "error: --format \"xml\": use ndjson or csv\n");
    // --since with a list tab, or one that does not parse: bad flags.
    for state in ["pending", "active"] {
        let (code, out, err) = cli(&db, &["--queue", "q", "--state", state, "--since", "1h"]).await;
        assert_eq!((code, out.as_str()), (2, ""));
        assert_eq!(
            err,
            format!(
                "error: --since: {state} tasks have no time to compare with; use it with --state scheduled, retry, archived, completed or aggregating\n"
            )
        );
    }
    let (code, _, err) = cli(&db, &["--queue", "q", "--since", "yesterday"]).await;
    assert_eq!(code, 2);
    assert_eq!(
        err,
        "error: --since \"yesterday\": give an RFC 3339 time (2026-12-01T00:00:00Z), a date (2026-12-01), unix seconds, or an age such as 90m, 24h or 7d\n"
    );
}

/// One pass writes the archived tasks (exact lines, the corrupt one an
/// error line) into `archive-q-<hour>.ndjson.gz`; the next pass writes
/// nothing again; a task archived later, or scored a little below the
/// cursor (within the look-back), is written once more.
#[tokio::test]
async fn exporter_passes_write_each_task_once() {
    use asynqdeck::server::{ArchiveExportConfig, ArchiveExporter};
    let db = support::redis();
    let mut s = setup(&db).await;
    seed_three(&mut s.raw).await;
    let broker = Broker::connect(&db.url())
        .await
        .unwrap()
        .with_clock(Arc::new(SimulatedClock::new(now())));
    let dir = temp_dir("exporter-passes");
    let exporter = ArchiveExporter::new(broker, ArchiveExportConfig::new(&dir));
    assert_eq!(exporter.export_queue("q").await.unwrap(), 3);
    let file = dir.join("archive-q-20260310T12Z.ndjson.gz");
    assert!(file.exists(), "{file:?}");
    assert_eq!(
        exported_lines(&dir),
        [BIN_LINE.to_string(), HDR_LINE.to_string(), bad_line()]
    );
    assert_eq!(exporter.export_queue("q").await.unwrap(), 0);
    // Archived later, and archived "late" (score 30 s under the cursor).
    let later = seed::msg("q", "later", "t", b"x");
    seed::message(&mut s.raw, &later, "archived", t(-50)).await;
    let late = seed::msg("q", "late", "t", b"y");
    seed::message(&mut s.raw, &late, "archived", t(-80)).await;
    assert_eq!(exporter.export_queue("q").await.unwrap(), 2);
    assert_eq!(exporter.export_queue("q").await.unwrap(), 0);
    let ids: Vec<String> = exported_lines(&dir)
        .iter()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(ids, ["bin", "hdr", "bad", "late", "later"]);
    // The cursor keeps the ids scored within the look-back (60 s) of its
    // highest score (later, t-50), with a TTL.
    let mut raw = db.raw().await;
    let cursor: Vec<String> = redis::cmd("ZRANGE")
        .arg("asynqdeck:{q}:export_cursor")
        .arg(0)
        .arg(-1)
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(cursor, ["bad", "late", "later"]);
    let ttl: i64 = redis::cmd("TTL")
        .arg("asynqdeck:{q}:export_cursor")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert!(ttl > 99 * 86_400, "{ttl}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The engine with `archive_export` set exports what is archived while it
/// runs (2,600 tasks, more than one chunk, then 5 more), each task once.
#[tokio::test]
async fn engine_exports_newly_archived_tasks() {
    use asynqdeck::server::{ArchiveExportConfig, Maintenance, MaintenanceConfig};
    use std::time::Duration;
    let db = support::redis();
    let mut raw = db.raw().await;
    seed_many(&mut raw, "eng", 2_600).await;
    let dir = temp_dir("engine-export");
    let mut export = ArchiveExportConfig::new(&dir);
    export.interval = Duration::from_millis(100);
    let config = MaintenanceConfig {
        forwarder_interval: Duration::from_millis(200),
        register_server: false,
        sample_interval: None,
        discovery_interval: None,
        archive_export: Some(export),
        ..MaintenanceConfig::default()
    };
    let broker = Broker::connect(&db.url()).await.unwrap();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let run = tokio::spawn(Maintenance::new(broker, config).run(shutdown.clone()));
    let count = |n: usize| {
        let dir = dir.clone();
        async move { (exported_lines(&dir).len() >= n).then_some(()) }
    };
    support::eventually(Duration::from_secs(60), || count(2_600))
        .await
        .expect("the archive exported");
    for i in 0..5 {
        let m = seed::msg("eng", &format!("n{i}"), "t", b"new");
        seed::message(&mut raw, &m, "archived", t(i)).await;
    }
    support::eventually(Duration::from_secs(60), || count(2_605))
        .await
        .expect("the new tasks exported");
    shutdown.cancel();
    run.await.unwrap();
    let ids: Vec<String> = exported_lines(&dir)
        .iter()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let mut want: Vec<String> = (0..2_600).map(|i| format!("a{i:05}")).collect();
    want.extend((0..5).map(|i| format!("n{i}")));
    assert_eq!(ids, want);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Archives whose size does not change are still exported: at Go's cap
/// (9,999 tasks, where each archive trims the oldest) each interval, and
/// below it (one archived, another deleted, in one transaction) by the
/// periodic snapshot.
#[tokio::test]
async fn engine_exports_archives_whose_size_stays_put() {
    use asynqdeck::server::{ArchiveExportConfig, Maintenance, MaintenanceConfig};
    use std::time::Duration;
    let db = support::redis();
    let mut raw = db.raw().await;
    seed_many(&mut raw, "full", 9_999).await;
    let small = seed::msg("small", "s0", "t", b"x");
    seed::message(&mut raw, &small, "archived", t(-10)).await;
    let dir = temp_dir("engine-size-put");
    let mut export = ArchiveExportConfig::new(&dir);
    export.interval = Duration::from_millis(100);
    export.snapshot_interval = Duration::from_millis(500);
    let config = MaintenanceConfig {
        forwarder_interval: Duration::from_millis(200),
        register_server: false,
        sample_interval: None,
        discovery_interval: None,
        archive_export: Some(export),
        ..MaintenanceConfig::default()
    };
    let broker = Broker::connect(&db.url()).await.unwrap();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let run = tokio::spawn(Maintenance::new(broker, config).run(shutdown.clone()));
    let count = |n: usize| {
        let dir = dir.clone();
        async move { (exported_lines(&dir).len() >= n).then_some(()) }
    };
    support::eventually(Duration::from_secs(60), || count(10_000))
        .await
        .expect("both archives exported");
    // Go's archive at the cap: the new task in, the oldest trimmed, at once.
    for (q, new, old) in [("full", "f-new", "a00000"), ("small", "s1", "s0")] {
        let m = seed::msg(q, new, "t", b"new");
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("HSET")
            .arg(keys::task_key(q, new))
            .arg("msg")
            .arg(m.encode_to_vec())
            .arg("state")
            .arg("archived")
            .ignore()
            .cmd("ZADD")
            .arg(keys::archived_key(q))
            .arg(t(0))
            .arg(new)
            .ignore()
            .cmd("ZREM")
            .arg(keys::archived_key(q))
            .arg(old)
            .ignore();
        let () = pipe.query_async(&mut raw).await.unwrap();
    }
    support::eventually(Duration::from_secs(60), || count(10_002))
        .await
        .expect("the swapped-in tasks exported");
    shutdown.cancel();
    run.await.unwrap();
    let mut ids: Vec<String> = exported_lines(&dir)
        .iter()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    ids.sort();
    let mut want: Vec<String> = (0..9_999).map(|i| format!("a{i:05}")).collect();
    want.extend(["f-new".to_string(), "s0".to_string(), "s1".to_string()]);
    want.sort();
    assert_eq!(ids, want);
    std::fs::remove_dir_all(&dir).unwrap();
}
