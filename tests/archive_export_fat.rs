//! Archive export of large tasks (S31, COMPATIBILITY.md N1): each Redis
//! read is bounded in bytes as well as in tasks, so tasks of several MB
//! are read one per call (and tasks of 300 KB three per call) while the
//! export stays whole, in order and byte-exact on every path: the
//! dashboard's `…/export`, `asynqdeck export`, the library stream and the
//! engine's archive exporter.

use std::sync::Arc;

use asynqdeck::broker::Broker;
use asynqdeck::clock::SimulatedClock;
use asynqdeck::inspector::{EXPORT_CHUNK_BYTES, ExportRequest};
use asynqdeck::web::WebConfig;
use asynqdeck::{Inspector, TaskState};
use axum::http::StatusCode;
use futures_util::StreamExt;

use crate::support::clock::now;
use crate::support::export::temp_dir;
use crate::support::http::{self, Dashboard};
use crate::support::seed;
use crate::support::{self, TestDb};

/// 3 MiB: three times the byte budget of one read.
const FAT: usize = 3 << 20;

async fn inspector(db: &TestDb) -> Inspector {
    let broker = Broker::connect(&db.url())
        .await
        .unwrap()
        .with_clock(Arc::new(SimulatedClock::new(now())));
    Inspector::from_broker(broker)
}

/// The payload of task `i`: `size` bytes of one letter (`a` for 0, …).
fn payload(i: usize, size: usize) -> Vec<u8> {
    vec![b'a' + i as u8; size]
}

/// Stores `n` tasks `<prefix>0`… of type `fat` with payloads of `size`
/// bytes in `state` of queue `q`, scored in id order.
async fn seed_fat(db: &TestDb, q: &str, prefix: &str, state: &str, n: usize, size: usize) {
    let mut raw = db.raw().await;
    for i in 0..n {
        let m = seed::msg(q, &format!("{prefix}{i}"), "fat", &payload(i, size));
        seed::message(&mut raw, &m, state, now().timestamp() - 100 + i as i64).await;
    }
}

/// The exact NDJSON line of task `<prefix><i>` seeded by [`seed_fat`]
/// (a pending task is due now).
fn line(q: &str, prefix: &str, state: &str, i: usize, size: usize) -> String {
    let next = if state == "pending" {
        "\"2026-03-10T12:00:00Z\""
    } else {
        "null"
    };
    format!(
        concat!(
            r#"{{"id":"{prefix}{i}","queue":"{q}","type":"fat","state":"{state}","payload":"{p}","#,
            r#""payload_encoding":"text","headers":{{}},"max_retry":25,"retried":0,"last_err":"","#,
            r#""last_failed_at":null,"timeout":1800,"deadline":null,"group":"","next_process_at":{next},"#,
            r#""retention":0,"completed_at":null,"kept_until":null,"result":null,"#,
            r#""result_encoding":null,"is_orphaned":false}}"#,
            "\n"
        ),
        prefix = prefix,
        i = i,
        q = q,
        state = state,
        next = next,
        p = String::from_utf8(payload(i, size)).unwrap(),
    )
}

/// The rows per chunk of the library export of `state` of `q`.
async fn chunk_sizes(insp: &Inspector, q: &str, state: TaskState) -> Vec<usize> {
    insp.export_tasks(ExportRequest {
        queue: q.into(),
        state,
        group: None,
        filter: Default::default(),
        since: None,
    })
    .await
    .unwrap()
    .map(|c| c.unwrap().len())
    .collect()
    .await
}

/// 8 archived tasks of 3 MiB and 3 pending ones: one task per read (the
/// first read of a chunk always takes one task, the next does not fit the
/// 1 MiB budget), the dashboard and the CLI write every task once, in tab
/// order, byte for byte.
#[tokio::test]
async fn tasks_of_several_mb_are_read_one_per_call() {
    assert_eq!(EXPORT_CHUNK_BYTES, 1 << 20);
    let db = support::redis();
    let insp = inspector(&db).await;
    seed_fat(&db, "fat", "f", "archived", 8, FAT).await;
    seed_fat(&db, "fat", "p", "pending", 3, FAT).await;
    assert_eq!(
        chunk_sizes(&insp, "fat", TaskState::Archived).await,
        [1, 1, 1, 1, 1, 1, 1, 1, 0]
    );
    assert_eq!(
        chunk_sizes(&insp, "fat", TaskState::Pending).await,
        [1, 1, 1, 0]
    );

    let want: String = (0..8)
        .map(|i| line("fat", "f", "archived", i, FAT))
        .collect();
    let dash = Dashboard::new(insp.clone(), WebConfig::default());
    let r = http::get(&dash.app, "/queues/fat/archived/export").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body.len(), want.len());
    assert!(r.body == want, "the dashboard's export differs");
    // Pending from the next-to-run end: p0 was pushed first.
    let r = http::get(&dash.app, "/queues/fat/pending/export").await;
    let pending: String = (0..3)
        .map(|i| line("fat", "p", "pending", i, FAT))
        .collect();
    assert!(r.body == pending, "the pending export differs");

    let dir = temp_dir("export-fat-cli");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("fat.ndjson");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_asynqdeck"))
        .args(["export", "--redis-url", &db.url(), "--queue", "fat"])
        .arg("--output")
        .arg(&file)
        .output()
        .await
        .unwrap();
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).as_ref()
        ),
        (Some(0), "")
    );
    assert!(std::fs::read(&file).unwrap() == want.as_bytes());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Tasks of 300 KB go three per read (a fourth would pass 1 MiB); small
/// tasks still go 500 per read (`archive_export::whole_tabs_of_many_chunks`).
#[tokio::test]
async fn the_byte_budget_fills_each_read() {
    let db = support::redis();
    let insp = inspector(&db).await;
    let size = 300_000;
    seed_fat(&db, "mid", "m", "archived", 10, size).await;
    assert_eq!(
        chunk_sizes(&insp, "mid", TaskState::Archived).await,
        [3, 3, 3, 1, 0]
    );
    let dash = Dashboard::new(insp, WebConfig::default());
    let r = http::get(&dash.app, "/queues/mid/archived/export").await;
    let want: String = (0..10)
        .map(|i| line("mid", "m", "archived", i, size))
        .collect();
    assert!(r.body == want, "the export differs");
}

/// Gzip members in `bytes` (the exporter appends one per chunk).
fn gzip_members(mut bytes: &[u8]) -> Vec<Vec<u8>> {
    use std::io::Read;
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let mut member = flate2::bufread::GzDecoder::new(bytes);
        let mut text = Vec::new();
        member.read_to_end(&mut text).unwrap();
        bytes = member.into_inner();
        out.push(text);
    }
    out
}

/// The engine's archive exporter reads 3 MiB tasks one per call too: one
/// gzip member (one chunk) per task, each the task's exact line, and the
/// next pass writes nothing.
#[tokio::test]
async fn the_engine_exporter_reads_one_fat_task_per_call() {
    use asynqdeck::server::{ArchiveExportConfig, ArchiveExporter};
    let db = support::redis();
    seed_fat(&db, "fat", "f", "archived", 4, FAT).await;
    let broker = Broker::connect(&db.url())
        .await
        .unwrap()
        .with_clock(Arc::new(SimulatedClock::new(now())));
    let dir = temp_dir("exporter-fat");
    let exporter = ArchiveExporter::new(broker, ArchiveExportConfig::new(&dir));
    assert_eq!(exporter.export_queue("fat").await.unwrap(), 4);
    assert_eq!(exporter.export_queue("fat").await.unwrap(), 0);
    let file = dir.join("archive-fat-20260310T12Z.ndjson.gz");
    let members = gzip_members(&std::fs::read(&file).unwrap());
    assert_eq!(members.len(), 4);
    for (i, m) in members.iter().enumerate() {
        assert!(
            *m == line("fat", "f", "archived", i, FAT).into_bytes(),
            "member {i} differs"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
