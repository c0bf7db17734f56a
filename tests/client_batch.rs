//! `Client::enqueue_batch` on a real Redis (Go master
//! `Client.BatchEnqueueContext`, wire spec §6.20): each stored task is what
//! `Client::enqueue` stores, a result per task in input order, refusals
//! and id conflicts per task. Also runs in the cluster pass.

use std::collections::BTreeMap;
use std::time::Duration;

use asynqdeck::broker::keys;
use asynqdeck::broker::proto::TaskMessage;
use asynqdeck::{EnqueueOptions, Error, Task, TaskState};
use prost::Message;
use redis::AsyncCommands;

use crate::support::clock::{Clocked, clocked, now, secs};
use crate::support::redis::RawConn;

/// Every field of a task hash, `msg` decoded, the id in it cleared (so a
/// batch task and its single-enqueue twin compare equal).
async fn stored(conn: &mut RawConn, q: &str, id: &str) -> (BTreeMap<String, Vec<u8>>, TaskMessage) {
    let mut fields: BTreeMap<String, Vec<u8>> = conn.hgetall(keys::task_key(q, id)).await.unwrap();
    let mut msg = TaskMessage::decode(&fields.remove("msg").expect("msg field")[..]).unwrap();
    assert_eq!(msg.id, id);
    msg.id.clear();
    (fields, msg)
}

/// The cases: one per option single enqueue takes, bar unique and group.
fn cases() -> Vec<(Task, EnqueueOptions)> {
    let deadline = chrono::DateTime::from_timestamp(4_000_000_000, 0).unwrap();
    let task = Task::new("email:send", br#"{"to":"a@b.c"}"#.to_vec()).with_header("trace", "t1");
    vec![
        (task.clone(), EnqueueOptions::new()),
        (
            task.clone(),
            EnqueueOptions::new()
                .queue("low")
                .max_retry(3)
                .timeout(Duration::from_secs(42))
                .retention(Duration::from_secs(7200))
                .header("k", "v"),
        ),
        (task.clone(), EnqueueOptions::new().deadline(deadline)),
        (
            Task::new("report", Vec::new()).with_options(EnqueueOptions::new().queue("critical")),
            EnqueueOptions::new().process_in(Duration::from_secs(90)),
        ),
        (
            task.clone(),
            EnqueueOptions::new().process_at(now() + secs(3600)),
        ),
        // A process-at in the past: pending, as single enqueue.
        (task, EnqueueOptions::new().process_at(now() - secs(5))),
    ]
}

/// Each batch task's hash (every field, msg included), its container and
/// its score equal what single enqueue stores for the same task and
/// options at the same instant; one result per task, in input order,
/// with the TaskInfo single enqueue returns.
#[tokio::test]
async fn batch_stores_what_single_enqueue_stores() {
    let Clocked {
        client, mut conn, ..
    } = clocked(now()).await;
    let cases = cases();
    let batch: Vec<(Task, EnqueueOptions)> = cases
        .iter()
        .enumerate()
        .map(|(i, (t, o))| (t.clone(), o.clone().task_id(format!("b{i}"))))
        .collect();
    let results = client.enqueue_batch(&batch).await.unwrap();
    assert_eq!(results.len(), cases.len());
    for (i, ((task, opts), result)) in cases.iter().zip(results).enumerate() {
        let ours = result.unwrap_or_else(|e| panic!("case {i}: {e}"));
        let single = client
            .enqueue(task, opts.clone().task_id(format!("s{i}")))
            .await
            .unwrap();
        assert_eq!(ours.id, format!("b{i}"), "case {i}: in input order");
        let mut same = single.clone();
        same.id = ours.id.clone();
        assert_eq!(ours, same, "case {i}: TaskInfo");
        let q = ours.queue.as_str();
        assert_eq!(
            stored(&mut conn, q, &ours.id).await,
            stored(&mut conn, q, &single.id).await,
            "case {i}: task hash"
        );
        match ours.state {
            TaskState::Pending => {
                let pending: Vec<String> = conn.lrange(keys::pending_key(q), 0, -1).await.unwrap();
                assert!(pending.contains(&ours.id), "case {i}: {pending:?}");
            }
            TaskState::Scheduled => {
                let score: Option<i64> =
                    conn.zscore(keys::scheduled_key(q), &ours.id).await.unwrap();
                let at = ours.next_process_at.unwrap().timestamp();
                assert_eq!(score, Some(at), "case {i}: scheduled score");
                let twin: Option<i64> = conn
                    .zscore(keys::scheduled_key(q), &single.id)
                    .await
                    .unwrap();
                assert_eq!(twin, Some(at));
            }
            other => panic!("case {i}: state {other}"),
        }
    }
    // Exact states and scores of the batch's own tasks.
    let states: Vec<TaskState> = cases
        .iter()
        .enumerate()
        .map(|(i, _)| match i {
            3 | 4 => TaskState::Scheduled,
            _ => TaskState::Pending,
        })
        .collect();
    for (i, state) in states.iter().enumerate() {
        let q = match i {
            1 => "low",
            3 => "critical",
            _ => "default",
        };
        let s: String = conn
            .hget(keys::task_key(q, &format!("b{i}")), "state")
            .await
            .unwrap();
        assert_eq!(s, state.as_str(), "case {i}");
    }
    let score: i64 = conn
        .zscore(keys::scheduled_key("critical"), "b3")
        .await
        .unwrap();
    assert_eq!(score, (now() + secs(90)).timestamp());
    let mut queues: Vec<String> = conn.smembers(keys::ALL_QUEUES).await.unwrap();
    queues.sort();
    assert_eq!(queues, ["critical", "default", "low"]);
}

/// A task whose id exists is reported as a conflict and the existing task
/// is untouched; unique and group tasks and invalid ones get their error
/// and nothing is written for them; the others are written.
#[tokio::test]
async fn refusals_and_conflicts_are_per_task() {
    let Clocked {
        client, mut conn, ..
    } = clocked(now()).await;
    let original = client
        .enqueue(
            &Task::new("orig", b"keep".to_vec()),
            EnqueueOptions::new().task_id("taken").max_retry(1),
        )
        .await
        .unwrap();
    let before = stored(&mut conn, "default", "taken").await;
    let t = Task::new("t", b"p".to_vec());
    let batch = vec![
        (t.clone(), EnqueueOptions::new().task_id("ok1")),
        (t.clone(), EnqueueOptions::new().task_id("taken")),
        (
            t.clone(),
            EnqueueOptions::new()
                .task_id("u1")
                .unique(Duration::from_secs(60)),
        ),
        (t.clone(), EnqueueOptions::new().task_id("g1").group("grp")),
        (
            t.clone(),
            EnqueueOptions::new()
                .task_id("g2")
                .group("grp")
                .process_in(Duration::from_secs(60)),
        ),
        (Task::new(" ", b"p".to_vec()), EnqueueOptions::new()),
        (t.clone(), EnqueueOptions::new().queue(" ")),
        (t.clone(), EnqueueOptions::new().task_id("")),
        (
            t.clone(),
            EnqueueOptions::new()
                .task_id("ok2")
                .process_in(Duration::from_secs(30)),
        ),
    ];
    let results = client.enqueue_batch(&batch).await.unwrap();
    assert_eq!(results.len(), 9);
    let shape: Vec<String> = results
        .iter()
        .map(|r| match r {
            Ok(info) => format!("ok {} {}", info.id, info.state),
            Err(Error::InvalidArgument(m)) if m.contains("no unique task") => "unique".into(),
            Err(Error::InvalidArgument(m)) if m.contains("no group task") => "group".into(),
            Err(e) => format!("{e:?}"),
        })
        .collect();
    assert_eq!(
        shape,
        [
            "ok ok1 pending",
            "TaskIdConflict",
            "unique",
            "group",
            "group",
            "EmptyTaskType",
            "InvalidQueueName",
            "EmptyTaskId",
            "ok ok2 scheduled",
        ]
    );
    // The original is untouched.
    assert_eq!(stored(&mut conn, "default", "taken").await, before);
    assert_eq!(original.task_type, "orig");
    // Nothing of the refused ones: no hash, no lock, no group.
    for id in ["u1", "g1", "g2"] {
        let exists: bool = conn.exists(keys::task_key("default", id)).await.unwrap();
        assert!(!exists, "{id}");
    }
    let groups: Vec<String> = conn
        .smembers(keys::all_groups_key("default"))
        .await
        .unwrap();
    assert!(groups.is_empty(), "{groups:?}");
    let locks: Vec<String> = conn.keys("asynq:{default}:unique:*").await.unwrap();
    assert!(locks.is_empty(), "{locks:?}");
    let pending: Vec<String> = conn
        .lrange(keys::pending_key("default"), 0, -1)
        .await
        .unwrap();
    assert_eq!(pending, ["ok1", "taken"]);
    let scheduled: Vec<(String, i64)> = conn
        .zrange_withscores(keys::scheduled_key("default"), 0, -1)
        .await
        .unwrap();
    assert_eq!(
        scheduled,
        [("ok2".to_string(), (now() + secs(30)).timestamp())]
    );
}

/// More tasks than one pipeline holds, over two queues (on a cluster two
/// slots): every task written, each queue's list in the order single
/// enqueues one after the other leave (LPUSH: newest first); scripts
/// flushed first, so the batch loads them itself.
#[tokio::test]
async fn many_chunks_keep_order_and_load_missing_scripts() {
    let Clocked {
        client, mut conn, ..
    } = clocked(now()).await;
    let () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut conn)
        .await
        .unwrap();
    let n = asynqdeck::broker::BATCH_CHUNK * 2 + 500;
    let batch: Vec<(Task, EnqueueOptions)> = (0..n)
        .map(|i| {
            let q = if i % 2 == 0 { "even" } else { "odd" };
            (
                Task::new("n", i.to_string().into_bytes()),
                EnqueueOptions::new().queue(q).task_id(format!("t{i}")),
            )
        })
        .collect();
    let results = client.enqueue_batch(&batch).await.unwrap();
    assert_eq!(results.len(), n);
    for (i, r) in results.iter().enumerate() {
        assert_eq!(r.as_ref().unwrap().id, format!("t{i}"));
    }
    for (q, first) in [("even", 0), ("odd", 1)] {
        let list: Vec<String> = conn.lrange(keys::pending_key(q), 0, -1).await.unwrap();
        let expected: Vec<String> = (first..n)
            .step_by(2)
            .rev()
            .map(|i| format!("t{i}"))
            .collect();
        assert_eq!(list, expected, "{q}");
    }
    let empty = client.enqueue_batch(&[]).await.unwrap();
    assert!(empty.is_empty());
}

/// An error reply to one task's script (its queue's pending key holds a
/// string) is that task's `Error::Redis`; the tasks of another queue in
/// the same batch are written.
#[tokio::test]
async fn an_error_reply_fails_only_its_task() {
    let Clocked {
        client, mut conn, ..
    } = clocked(now()).await;
    let () = conn
        .set(keys::pending_key("broken"), "not a list")
        .await
        .unwrap();
    let t = Task::new("t", b"p".to_vec());
    let batch = vec![
        (t.clone(), EnqueueOptions::new().task_id("a")),
        (
            t.clone(),
            EnqueueOptions::new().queue("broken").task_id("b"),
        ),
        (t, EnqueueOptions::new().task_id("c")),
    ];
    let results = client.enqueue_batch(&batch).await.unwrap();
    assert_eq!(results[0].as_ref().unwrap().id, "a");
    match &results[1] {
        Err(Error::Redis(e)) => assert_eq!(e.code(), Some("WRONGTYPE"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(results[2].as_ref().unwrap().id, "c");
    let pending: Vec<String> = conn
        .lrange(keys::pending_key("default"), 0, -1)
        .await
        .unwrap();
    assert_eq!(pending, ["c", "a"]);
}
