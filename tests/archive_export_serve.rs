//! `asynqdeck serve --archive-export-dir` (issue 17 item 7, S31): the flag
//! and its variable reach the engine's settings (ignored, with a warning,
//! under `--no-engine`), and the real binary writes the tasks archived
//! while it runs into its directory; plus the aggregating tab's export of
//! a named group, and a read failing mid-download.

use std::time::Duration;

use asynqdeck::cli::Cli;
use clap::Parser;

use crate::support::export::{exported_lines, temp_dir};
use crate::support::http::{self, ServeBin};
use crate::support::{self, seed};

fn resolve(args: &[&str]) -> asynqdeck::cli::ServeConfig {
    Cli::try_parse_from(args)
        .unwrap()
        .into_serve_args()
        .unwrap()
        .resolve()
        .unwrap()
}

/// The flag sets the exporter's directory with the defaults (5 s, 60 s
/// look-back, 5 min snapshot, 64 MiB files); without it there is none;
/// with `--no-engine` it is ignored with a warning.
#[test]
fn flag_reaches_the_engine() {
    let c = resolve(&["asynqdeck", "serve", "--archive-export-dir", "/tmp/x"]);
    let e = c.engine.unwrap().archive_export.expect("exporter on");
    assert_eq!(e.dir, std::path::PathBuf::from("/tmp/x"));
    assert_eq!(
        (
            e.interval,
            e.lookback,
            e.snapshot_interval,
            e.max_file_bytes,
            e.max_per_pass
        ),
        (
            Duration::from_secs(5),
            Duration::from_secs(60),
            Duration::from_secs(300),
            64 * 1024 * 1024,
            10_000
        )
    );
    let c = resolve(&["asynqdeck", "serve"]);
    assert!(c.engine.unwrap().archive_export.is_none());
    let c = resolve(&[
        "asynqdeck",
        "serve",
        "--no-engine",
        "--archive-export-dir",
        "/tmp/x",
    ]);
    assert!(c.engine.is_none());
    assert_eq!(
        c.warnings,
        [
            "--archive-export-dir ignored: the archive exporter runs in the engine, and --no-engine is set"
        ]
    );
}

/// The binary, configured through `ASYNQDECK_ARCHIVE_EXPORT_DIR`, writes
/// the archived tasks of a queue (seeded before and after its start) into
/// the file of the current hour, each once.
#[tokio::test]
async fn serve_writes_archived_tasks() {
    let db = support::redis();
    let mut raw = db.raw().await;
    for i in 0..3 {
        let m = seed::msg("mail", &format!("a{i}"), "email:send", b"{}");
        seed::message(
            &mut raw,
            &m,
            "archived",
            chrono::Utc::now().timestamp() - 10 + i,
        )
        .await;
    }
    let dir = temp_dir("serve-export");
    let app = ServeBin::start(
        &db.url(),
        &["--listen", "127.0.0.1:0"],
        &[("ASYNQDECK_ARCHIVE_EXPORT_DIR", dir.to_str().unwrap())],
    )
    .await;
    let count = |n: usize| {
        let dir = dir.clone();
        async move { (exported_lines(&dir).len() >= n).then_some(()) }
    };
    support::eventually(Duration::from_secs(60), || count(3))
        .await
        .expect("the archive exported");
    let m = seed::msg("mail", "a3", "email:send", b"{}");
    seed::message(&mut raw, &m, "archived", chrono::Utc::now().timestamp()).await;
    support::eventually(Duration::from_secs(60), || count(4))
        .await
        .expect("the new task exported");
    assert_eq!(app.terminate().await, Some(0));
    let ids: Vec<String> = exported_lines(&dir)
        .iter()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(ids, ["a0", "a1", "a2", "a3"]);
    let files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    // One file of the hour (two when the hour turned during the test).
    assert!((1..=2).contains(&files.len()), "{files:?}");
    assert!(
        files
            .iter()
            .all(|f| f.starts_with("archive-mail-") && f.ends_with("Z.ndjson.gz")),
        "{files:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The aggregating tab exports the named group's tasks, else the first
/// group's; `since` compares with the time added.
#[tokio::test]
async fn aggregating_tab_exports_a_group() {
    let db = support::redis();
    let mut raw = db.raw().await;
    let now = crate::support::clock::now().timestamp();
    for (id, group, at) in [
        ("g1", "alpha", now - 50),
        ("g2", "alpha", now - 10),
        ("g3", "beta", now),
    ] {
        seed::put(
            &mut raw,
            "q",
            id,
            seed::msg_bytes("q", id),
            "aggregating",
            at,
            group,
        )
        .await;
    }
    let insp = asynqdeck::Inspector::connect(&db.url()).await.unwrap();
    let dash = http::Dashboard::new(insp, Default::default());
    let ids = |body: String| -> Vec<String> {
        body.lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    let r = http::get(&dash.app, "/queues/q/aggregating/export?group=beta").await;
    assert_eq!(ids(r.body), ["g3"]);
    let r = http::get(&dash.app, "/queues/q/aggregating/export?group=alpha").await;
    assert_eq!(ids(r.body), ["g1", "g2"]);
    let since = chrono::DateTime::from_timestamp(now - 20, 0)
        .unwrap()
        .to_rfc3339();
    let r = http::get(
        &dash.app,
        &format!(
            "/queues/q/aggregating/export?group=alpha&since={}",
            since.replace('+', "%2B")
        ),
    )
    .await;
    assert_eq!(ids(r.body), ["g2"]);
}

/// A read that fails after the download started (the archived key is not
/// a sorted set) ends the body with one error line or row, status 200
/// already sent, never a 5xx or a panic.
#[tokio::test]
async fn a_failed_read_ends_with_an_error_line() {
    let db = support::redis();
    let mut raw = db.raw().await;
    let _: () = redis::cmd("SADD")
        .arg(asynqdeck::broker::keys::ALL_QUEUES)
        .arg("w")
        .query_async(&mut raw)
        .await
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg(asynqdeck::broker::keys::archived_key("w"))
        .arg("not a zset")
        .query_async(&mut raw)
        .await
        .unwrap();
    let insp = asynqdeck::Inspector::connect(&db.url()).await.unwrap();
    let dash = http::Dashboard::new(insp, Default::default());
    let r = http::get(&dash.app, "/queues/w/archived/export").await;
    assert_eq!(r.status, axum::http::StatusCode::OK);
    let line: serde_json::Value = serde_json::from_str(r.body.trim_end()).unwrap();
    let error = line["error"].as_str().unwrap();
    assert!(
        error.starts_with("export stopped: ") && error.contains("WRONGTYPE"),
        "{error}"
    );
    assert_eq!(r.body.lines().count(), 1);
    let r = http::get(&dash.app, "/queues/w/archived/export?format=csv").await;
    let rows: Vec<&str> = r.body.split("\r\n").collect();
    assert_eq!(rows.len(), 3, "{:?}", r.body);
    assert!(
        rows[1].starts_with(",,,,,,,,,,,,,,,,,,,,,\"export stopped: "),
        "{}",
        rows[1]
    );
}
