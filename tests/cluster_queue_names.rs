//! Queue names with braces (issue 14 item 7), on a local Redis Cluster and
//! on one server, against Go asynq v0.26.0.
//!
//! Every per-queue key is `asynq:{<queue>}:<suffix>`, and Redis Cluster
//! hashes the text between the key's first `{` and the first `}` after it
//! (when not empty), so the tag ends at the name's own first `}`
//! (`keys::cluster_hash_tag`): `x}:y`, `{weird}`, `{}`, `{`, `{x` keep
//! all their keys in one slot and work on a cluster, for Go and for us; a
//! name starting with `}` (`}x`, `}`) leaves its keys untagged, Go fails
//! with `CROSSSLOT` and we refuse it with `Error::InvalidArgument`. The
//! empty name is refused by both everywhere. On one server every non-blank
//! name works, for both (COMPATIBILITY.md#k2).

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use asynqdeck::broker::{Broker, keys};
use asynqdeck::inspector::Page;
use asynqdeck::server::Server;
use asynqdeck::{Client, EnqueueOptions, Error, Inspector, Task, TaskState};
use axum::http::{Method, StatusCode};

use crate::cluster_interop::{
    assert_same_queue, cluster, counting_mux, fast, until, wait_processed,
};
use crate::support::cluster::LocalCluster;
use crate::support::http::Dashboard;
use crate::support::{self, server};

/// Names whose keys share one slot: the tag and its slot (CRC16 mod 16384,
/// as `CLUSTER KEYSLOT` computes it).
const SAFE: [(&str, &str, u16); 5] = [
    ("x}:y", "x", 16287),
    ("{weird}", "{weird", 7704),
    ("{}", "{", 4092),
    ("{", "{", 4092),
    ("{x", "{x", 11068),
];

/// Names starting with `}`: every key hashes as a whole.
const UNSAFE: [&str; 2] = ["}x", "}"];

/// Go asynq v0.26.0's error for a script on such a queue's keys (go-redis
/// `EVALSHA` answered by the cluster), as `Client.Enqueue` wraps it.
const GO_ENQUEUE_CROSSSLOT: &str =
    "UNKNOWN: redis eval error: CROSSSLOT Keys in request don't hash to the same slot";
/// ... and as `Inspector.GetQueueInfo` wraps it.
const GO_INSPECT_CROSSSLOT: &str = "UNKNOWN: CROSSSLOT Keys in request don't hash to the same slot";

/// Our refusal for `queue` on a cluster.
fn refusal(queue: &str) -> String {
    format!(
        "queue {queue:?} cannot be used on a Redis Cluster: a name starting with '}}' leaves \
         its keys (asynq:{{{queue}}}:...) without a hash tag, so they hash to different slots \
         and every script on them fails with CROSSSLOT"
    )
}

fn assert_refused<T: std::fmt::Debug>(queue: &str, what: &str, r: Result<T, Error>) {
    match r {
        Err(Error::InvalidArgument(m)) => assert_eq!(m, refusal(queue), "{what}"),
        other => panic!("{what} on {queue:?}: {other:?}"),
    }
}

/// Every key builder of `keys.rs` that takes a queue, for `queue`.
fn every_key(queue: &str) -> Vec<String> {
    let day = chrono::NaiveDate::from_ymd_opt(2026, 1, 5).unwrap();
    vec![
        keys::pending_key(queue),
        keys::active_key(queue),
        keys::lease_key(queue),
        keys::scheduled_key(queue),
        keys::retry_key(queue),
        keys::archived_key(queue),
        keys::completed_key(queue),
        keys::paused_key(queue),
        keys::processed_total_key(queue),
        keys::failed_total_key(queue),
        keys::all_groups_key(queue),
        keys::all_aggregation_sets_key(queue),
        keys::task_key(queue, "a1"),
        keys::task_key(queue, "b2"),
        keys::group_key(queue, "g"),
        keys::aggregation_set_key(queue, "g", "s1"),
        keys::unique_key(queue, "t", Some(b"p")),
        keys::processed_key(queue, day),
        keys::failed_key(queue, day),
        asynqdeck::broker::samples_key(queue),
    ]
}

async fn key_slot(cluster: &LocalCluster, key: &str) -> u16 {
    let client = redis::Client::open(format!("redis://127.0.0.1:{}", cluster.ports[0])).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query_async(&mut c)
        .await
        .unwrap()
}

fn crossslot(cluster: &LocalCluster) -> u64 {
    cluster
        .error_stats()
        .into_iter()
        .find(|(k, _)| k == "CROSSSLOT")
        .map(|(_, n)| n)
        .unwrap_or(0)
}

/// The cluster computes the slots `keys::cluster_hash_tag` predicts: one
/// slot, the tag's, for every key of a safe name; for a name starting with
/// `}`, keys spread over many slots.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_key_of_a_queue_hashes_as_the_tag_rule_says() {
    let cluster = cluster().await;
    for (name, tag, slot) in SAFE
        .iter()
        .copied()
        .chain([("default", "default", 5718), ("a{b}c", "a{b", 13340)])
    {
        assert_eq!(keys::cluster_hash_tag(name), Some(tag));
        assert_eq!(key_slot(&cluster, tag).await, slot, "{tag}");
        for key in every_key(name) {
            assert_eq!(key_slot(&cluster, &key).await, slot, "{key}");
        }
    }
    for name in UNSAFE.iter().copied().chain([""]) {
        assert_eq!(keys::cluster_hash_tag(name), None);
        let mut slots = BTreeSet::new();
        for key in every_key(name) {
            slots.insert(key_slot(&cluster, &key).await);
        }
        assert!(slots.len() >= 15, "{name:?}: {slots:?}");
    }
}

/// On the cluster, the safe names work as in Go: Go enqueues and we process,
/// we enqueue and Go processes, both inspectors agree. The names starting
/// with `}` fail in Go with CROSSSLOT and are refused by us before any
/// Redis call: Client, Server start, Inspector and dashboard; a name Go
/// added to `asynq:queues` before failing is one error row of the
/// dashboard's statistics, not a failed page. The empty name is refused by
/// both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brace_names_on_cluster_work_as_in_go_or_are_refused() {
    let cluster = cluster().await;
    let url = cluster.url();
    let client = Client::connect(&url).await.unwrap();
    let inspector = Inspector::connect(&url).await.unwrap();
    let safe: Vec<&str> = SAFE.iter().map(|s| s.0).collect();

    // Safe names: Go enqueues two, we enqueue one and one unique.
    let mut ids: HashMap<String, u32> = HashMap::new();
    for q in &safe {
        for p in ["g1", "g2"] {
            let go = cluster.peer_ok(&["enqueue", "--type", "work", "--queue", q, "--payload", p]);
            assert_eq!(
                (&go["queue"], &go["state"]),
                (&(*q).into(), &"pending".into())
            );
            ids.insert(go["id"].as_str().unwrap().into(), 1);
        }
        for o in [
            EnqueueOptions::new(),
            EnqueueOptions::new().unique(Duration::from_secs(60)),
        ] {
            let info = client
                .enqueue(&Task::new("work", b"rs".to_vec()), o.queue(*q))
                .await
                .unwrap();
            ids.insert(info.id, 1);
        }
    }
    let mut want: Vec<&str> = safe.clone();
    want.sort();
    assert_eq!(
        cluster.peer_ok(&["inspect", "queues"]),
        serde_json::json!(want)
    );
    for q in &safe {
        let ours = inspector.queue_info(q).await.unwrap();
        assert_eq!((ours.size, ours.pending), (4, 4), "{q}");
        assert_same_queue(
            &cluster.peer_ok(&["inspect", "queue-info", "--queue", q]),
            &ours,
        );
    }
    let (mux, seen) = counting_mux();
    let running = server::start_on(Broker::connect(&url).await.unwrap(), fast(&safe), mux);
    wait_processed(&inspector, &safe, 4).await;
    running.shutdown().await;
    assert_eq!(*seen.lock().unwrap(), ids, "each task handled once");
    let mut ours_next = Vec::new();
    for q in &safe {
        let info = client
            .enqueue(
                &Task::new("work", b"to-go".to_vec()),
                EnqueueOptions::new().queue(*q),
            )
            .await
            .unwrap();
        ours_next.push(info.id);
    }
    let lines = cluster.peer_lines(&[
        "work",
        "--queues",
        &safe.join(","),
        "--count",
        "5",
        "--max-duration",
        "30s",
    ]);
    let mut handled: Vec<String> = lines
        .iter()
        .map(|l| l["id"].as_str().unwrap().to_string())
        .collect();
    handled.sort();
    ours_next.sort();
    assert_eq!(handled, ours_next, "Go handled each of our tasks once");
    for q in &safe {
        let ours = inspector.queue_info(q).await.unwrap();
        assert_eq!((ours.size, ours.processed_total), (0, 5), "{q}");
        assert_same_queue(
            &cluster.peer_ok(&["inspect", "queue-info", "--queue", q]),
            &ours,
        );
    }
    assert_eq!(crossslot(&cluster), 0, "the safe names never cross slots");

    // Names starting with '}': Go fails with CROSSSLOT, after adding the
    // name to asynq:queues (its SADD is a command of its own).
    for q in UNSAFE {
        let go = cluster
            .peer(&["enqueue", "--type", "work", "--queue", q])
            .unwrap_err();
        assert_eq!(go["error"], GO_ENQUEUE_CROSSSLOT, "{q}");
        let go = cluster
            .peer(&["inspect", "queue-info", "--queue", q])
            .unwrap_err();
        assert_eq!(go["error"], GO_INSPECT_CROSSSLOT, "{q}");
    }
    assert_eq!(crossslot(&cluster), 4, "one CROSSSLOT per Go call");
    let mut listed = want.clone();
    listed.extend(UNSAFE);
    listed.sort();
    assert_eq!(inspector.queues().await.unwrap(), listed);

    // We refuse them before any Redis call.
    for q in UNSAFE {
        let task = Task::new("work", b"x".to_vec());
        assert_refused(
            q,
            "enqueue",
            client.enqueue(&task, EnqueueOptions::new().queue(q)).await,
        );
        assert_refused(
            q,
            "enqueue scheduled",
            client
                .enqueue(
                    &task,
                    EnqueueOptions::new()
                        .queue(q)
                        .process_in(Duration::from_secs(60)),
                )
                .await,
        );
        assert_refused(q, "queue_info", inspector.queue_info(q).await);
        assert_refused(q, "history", inspector.history(q, 7).await);
        assert_refused(q, "groups", inspector.groups(q).await);
        assert_refused(
            q,
            "list_tasks",
            inspector
                .list_tasks(q, TaskState::Pending, Page::default())
                .await,
        );
        assert_refused(q, "get_task_info", inspector.get_task_info(q, "id").await);
        assert_refused(
            q,
            "run_all",
            inspector.run_all(q, TaskState::Archived).await,
        );
        assert_refused(q, "delete_task", inspector.delete_task(q, "id").await);
        assert_refused(q, "pause_queue", inspector.pause_queue(q).await);
        assert_refused(q, "delete_queue", inspector.delete_queue(q, true).await);
        let config = fast(&["alpha", q]);
        let (mux, _) = counting_mux();
        let server = Server::new(Broker::connect(&url).await.unwrap(), config);
        assert_refused(
            q,
            "server start",
            server.run_until(mux, std::future::pending()).await,
        );
    }
    // The dashboard's statistics: the refused names are error rows, read
    // by no script.
    let unsafe_names: Vec<String> = UNSAFE.iter().map(|s| s.to_string()).collect();
    let rows = inspector.queues_stats(&unsafe_names, false).await.unwrap();
    assert_eq!(rows.len(), 2);
    for row in rows {
        assert_refused(&row.queue.clone(), "queues_stats row", row.info);
    }
    let memory = inspector.queues_memory_usage(&unsafe_names).await.unwrap();
    for (q, m) in memory {
        assert_refused(&q, "queues_memory_usage", m);
    }
    assert_eq!(crossslot(&cluster), 4, "none of ours");
    // The dashboard's actions answer 400 with the reason. (Its GET also
    // reads the statistics of every queue, not checked here for slots.)
    let dash = Dashboard::new(inspector.clone(), asynqdeck::web::WebConfig::default());
    let r = dash.api(Method::GET, "/api/queues/%7Dx").await;
    assert_eq!(
        (r.status, r.body.contains(&refusal("}x"))),
        (StatusCode::BAD_REQUEST, true),
        "{}",
        r.body
    );
    let r = dash.api(Method::POST, "/api/queues/%7Dx:pause").await;
    assert_eq!(
        (r.status, r.body.contains(&refusal("}x"))),
        (StatusCode::BAD_REQUEST, true),
        "{}",
        r.body
    );

    // The empty name: refused by both, with Go's text.
    let go = cluster
        .peer(&["enqueue", "--type", "work", "--queue", ""])
        .unwrap_err();
    assert_eq!(
        go["error"],
        "queue name must contain one or more characters"
    );
    let ours = client
        .enqueue(
            &Task::new("work", b"x".to_vec()),
            EnqueueOptions::new().queue(""),
        )
        .await;
    assert!(matches!(ours, Err(Error::InvalidQueueName)), "{ours:?}");
    assert!(matches!(
        inspector.queue_info("").await,
        Err(Error::InvalidQueueName)
    ));
}

/// On one server every non-blank name works, the `}`-names included, for
/// Go and for us alike: Go enqueues and we process, we enqueue and Go
/// processes, both inspectors agree. The empty name is refused by both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brace_names_on_one_server_all_work_as_in_go() {
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    let inspector = Inspector::connect(&db.url()).await.unwrap();
    let names: Vec<&str> = SAFE.iter().map(|s| s.0).chain(UNSAFE).collect();
    let mut ids: HashMap<String, u32> = HashMap::new();
    for q in &names {
        let go = db.peer_ok(&["enqueue", "--type", "work", "--queue", q]);
        ids.insert(go["id"].as_str().unwrap().into(), 1);
        let info = client
            .enqueue(
                &Task::new("work", b"rs".to_vec()),
                EnqueueOptions::new()
                    .queue(*q)
                    .unique(Duration::from_secs(60)),
            )
            .await
            .unwrap();
        ids.insert(info.id, 1);
        let ours = inspector.queue_info(q).await.unwrap();
        assert_eq!((ours.size, ours.pending), (2, 2), "{q}");
        assert_same_queue(&db.peer_ok(&["inspect", "queue-info", "--queue", q]), &ours);
    }
    let (mux, seen) = counting_mux();
    let running = server::start(&db, fast(&names), mux).await;
    wait_processed(&inspector, &names, 2).await;
    running.shutdown().await;
    assert_eq!(*seen.lock().unwrap(), ids);
    let mut ours_next = Vec::new();
    for q in &names {
        let info = client
            .enqueue(
                &Task::new("work", b"to-go".to_vec()),
                EnqueueOptions::new().queue(*q),
            )
            .await
            .unwrap();
        ours_next.push(info.id);
    }
    let lines = db.peer_lines(&[
        "work",
        "--queues",
        &names.join(","),
        "--count",
        &names.len().to_string(),
        "--max-duration",
        "30s",
    ]);
    let mut handled: Vec<String> = lines
        .iter()
        .map(|l| l["id"].as_str().unwrap().to_string())
        .collect();
    handled.sort();
    ours_next.sort();
    assert_eq!(handled, ours_next);
    for q in &names {
        let ours = until("Go's counts", || {
            let go = db.peer_ok(&["inspect", "queue-info", "--queue", q]);
            (go["processed_total"] == 3).then_some(go)
        })
        .await;
        let info = inspector.queue_info(q).await.unwrap();
        assert_eq!((info.size, info.processed_total), (0, 3), "{q}");
        assert_same_queue(&ours, &info);
    }
    let go = db
        .peer(&["enqueue", "--type", "work", "--queue", ""])
        .unwrap_err();
    assert_eq!(
        go["error"],
        "queue name must contain one or more characters"
    );
    let ours = client
        .enqueue(
            &Task::new("work", b"x".to_vec()),
            EnqueueOptions::new().queue(""),
        )
        .await;
    assert!(matches!(ours, Err(Error::InvalidQueueName)), "{ours:?}");
}

/// The maintenance loops leave a name the cluster cannot hold alone: a `}x`
/// that Go's failed enqueue left in `asynq:queues`, with a pending key of
/// its own, costs the sampler and queue discovery no script (0 CROSSSLOT
/// on the cluster), and `workable_queues` lists only the other queue.
/// Found by the fresh-clone review: the engine retried CROSSSLOT scripts
/// for such a queue every tick.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintenance_skips_a_name_the_cluster_cannot_hold() {
    let cluster = tokio::task::spawn_blocking(|| LocalCluster::start(3))
        .await
        .unwrap();
    let broker = Broker::connect(&cluster.url()).await.unwrap();
    Client::connect(&cluster.url())
        .await
        .unwrap()
        .enqueue(
            &Task::new("t", b"x".to_vec()),
            EnqueueOptions::new().queue("ok"),
        )
        .await
        .unwrap();
    let c = redis::Client::open(format!("redis://127.0.0.1:{}", cluster.ports[0])).unwrap();
    let mut raw = redis::cluster::ClusterClient::new(vec![c.get_connection_info().clone()])
        .unwrap()
        .get_async_connection()
        .await
        .unwrap();
    let _: i64 = redis::cmd("SADD")
        .arg(keys::ALL_QUEUES)
        .arg("}x")
        .query_async(&mut raw)
        .await
        .unwrap();
    let _: i64 = redis::cmd("LPUSH")
        .arg("asynq:{}x}:pending")
        .arg("id1")
        .query_async(&mut raw)
        .await
        .unwrap();
    let before = crossslot(&cluster);
    assert_eq!(broker.workable_queues().await.unwrap(), ["ok"]);
    let sampler = asynqdeck::server::sampler::Sampler::new(broker.clone(), Duration::from_secs(5));
    assert_eq!(sampler.tick().await.unwrap(), 1, "only `ok` is sampled");
    let mut discovery = asynqdeck::server::discovery::QueueDiscovery::new(broker.clone());
    loop {
        let out = discovery.tick().await.unwrap();
        assert!(out.restored.is_empty(), "{:?}", out.restored);
        if out.cycle_done {
            break;
        }
    }
    assert_eq!(crossslot(&cluster), before, "no script crossed slots");
}
