//! `asynqdeck serve --schedule FILE` (issue 16 item 2): the YAML file's
//! periodic tasks are enqueued by the process; an edit to the file, and
//! SIGHUP, make it read the file again; a bad entry is left out while the
//! others run.

use std::time::Duration;

use asynqdeck::broker::Page;
use asynqdeck::inspector::TaskRow;
use asynqdeck::{Inspector, TaskInfo, TaskState};

use crate::support::{self, http::ServeBin};

const WAIT: Duration = Duration::from_secs(30);

/// The decoded pending tasks of `queue` (first 1,000).
async fn pending(inspector: &Inspector, queue: &str) -> Vec<TaskInfo> {
    match inspector
        .list_tasks(queue, TaskState::Pending, Page::new(1, 1000).unwrap())
        .await
    {
        Ok(rows) => rows
            .into_iter()
            .filter_map(|r| match r {
                TaskRow::Task(t) => Some(t),
                _ => None,
            })
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Counts the pending tasks of `task_type` in `queue`.
async fn pending_of(inspector: &Inspector, queue: &str, task_type: &str) -> usize {
    pending(inspector, queue)
        .await
        .iter()
        .filter(|t| t.task_type == task_type)
        .count()
}

#[tokio::test]
async fn schedule_file_runs_reloads_on_change_and_sighup_and_skips_bad_entries() {
    let db = support::redis();
    let dir = std::env::temp_dir().join(format!("asynqdeck-schedule-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("schedule.yaml");
    std::fs::write(
        &file,
        r#"configs:
  - cronspec: "@every 1s"
    task_type: report:daily
    payload: '{"x":1}'
    options: {queue: low, max_retry: 3, timeout: 30s, retention: 24h}
  - cronspec: "not a spec"
    task_type: broken
"#,
    )
    .unwrap();
    let serve = ServeBin::spawn(
        &[
            "--redis-url",
            &db.url(),
            "--listen",
            "127.0.0.1:0",
            "--schedule",
            file.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    let inspector = Inspector::connect(&db.url()).await.unwrap();
    support::eventually(WAIT, || async {
        (pending_of(&inspector, "low", "report:daily").await >= 2).then_some(())
    })
    .await
    .expect("the good entry fires every second");
    let tasks = pending(&inspector, "low").await;
    assert_eq!(tasks[0].payload, br#"{"x":1}"#);
    assert_eq!(tasks[0].max_retry, 3);
    assert_eq!(tasks[0].timeout, Duration::from_secs(30));
    assert_eq!(tasks[0].retention, Duration::from_secs(86_400));
    assert_eq!(pending_of(&inspector, "default", "broken").await, 0);

    // Edit: the report entry goes, a digest entry comes.
    std::fs::write(
        &file,
        "configs:\n  - cronspec: \"@every 1s\"\n    task_type: digest:send\n    options: {queue: low}\n",
    )
    .unwrap();
    support::eventually(WAIT, || async {
        (pending_of(&inspector, "low", "digest:send").await >= 1).then_some(())
    })
    .await
    .expect("the edited file is read again");
    // Once a digest fired, no report fires any more: wait for two more
    // digests and check the report count did not move meanwhile.
    let reports = pending_of(&inspector, "low", "report:daily").await;
    let digests = pending_of(&inspector, "low", "digest:send").await;
    support::eventually(WAIT, || async {
        (pending_of(&inspector, "low", "digest:send").await >= digests + 2).then_some(())
    })
    .await
    .expect("digest keeps firing");
    assert_eq!(pending_of(&inspector, "low", "report:daily").await, reports);

    // SIGHUP with a file whose mtime/length did not change still re-reads:
    // change the file to a same-length text with another type, reset its
    // mtime, then send SIGHUP.
    let meta = std::fs::metadata(&file).unwrap();
    let mtime = meta.modified().unwrap();
    std::fs::write(
        &file,
        "configs:\n  - cronspec: \"@every 1s\"\n    task_type: digest:sent\n    options: {queue: low}\n",
    )
    .unwrap();
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    // The file check may or may not have seen the write before the mtime
    // reset; SIGHUP makes the read certain either way.
    unsafe { libc::kill(serve.pid(), libc::SIGHUP) };
    support::eventually(WAIT, || async {
        (pending_of(&inspector, "low", "digest:sent").await >= 1).then_some(())
    })
    .await
    .expect("SIGHUP reads the file again");
    assert_eq!(serve.terminate().await, Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}
