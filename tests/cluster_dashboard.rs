//! The dashboard on a local 3-master Redis Cluster (issue 14 item 3):
//! queue statistics of queues on different masters, memory per queue, the
//! Redis page with every node, queue discovery over every master, the
//! cluster routes, and the Redis commands a statistics refresh costs.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use asynqdeck::inspector::StatsHints;
use asynqdeck::server::{Config, ServeMux, TaskContext};
use asynqdeck::web::WebConfig;
use asynqdeck::{Client, EnqueueOptions, Error, Inspector, Task, TaskState};

use crate::support::cluster::LocalCluster;
use crate::support::http::Dashboard;
use crate::support::{self, server};

async fn start_cluster() -> LocalCluster {
    tokio::task::spawn_blocking(|| LocalCluster::start(3))
        .await
        .unwrap()
}

fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One queue name per master, in the order of `cluster.ports`.
fn queue_per_master(cluster: &LocalCluster, prefix: &str) -> Vec<String> {
    cluster
        .ports
        .iter()
        .map(|&port| {
            (0..1000)
                .map(|i| format!("{prefix}{i}"))
                .find(|q| cluster.port_of(&format!("asynq:{{{q}}}:pending")) == port)
                .expect("a name on every master")
        })
        .collect()
}

/// `INFO commandstats` of one master: command → calls.
fn command_calls(port: u16) -> BTreeMap<String, u64> {
    cli(port, &["INFO", "commandstats"])
        .lines()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix("cmdstat_")?;
            let (name, stats) = rest.split_once(":calls=")?;
            let calls = stats.split(',').next()?.parse().ok()?;
            Some((name.to_string(), calls))
        })
        .collect()
}

fn calls_all(cluster: &LocalCluster) -> BTreeMap<String, u64> {
    let mut total = BTreeMap::new();
    for &p in &cluster.ports {
        for (k, v) in command_calls(p) {
            *total.entry(k).or_insert(0) += v;
        }
    }
    total
}

/// (pending, active, scheduled, retry, archived, completed, processed
/// today, failed today, paused).
type Numbers = (i64, i64, i64, i64, i64, i64, i64, i64, bool);

fn ok_or_fail_mux() -> ServeMux {
    let mut mux = ServeMux::new();
    mux.handle_fn("ok", |_ctx: TaskContext, _t: Task| async { Ok(()) });
    mux.handle_fn("fail", |_ctx: TaskContext, _t: Task| async {
        Err(anyhow::anyhow!("failed on purpose"))
    });
    mux
}

/// Queue statistics of three queues, one per master, are exact (counts
/// per state, processed/failed, paused) through the inspector's many-queue
/// read, its one-queue read, `/api/queues` and the overview page; memory
/// per queue is non-zero; a statistics refresh's Redis commands are
/// bounded, and no command failed with CROSSSLOT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_queue_statistics_are_exact_per_master() {
    let cluster = start_cluster().await;
    let url = cluster.url();
    let qs = queue_per_master(&cluster, "q");
    let (a, b, c) = (qs[0].clone(), qs[1].clone(), qs[2].clone());
    let client = Client::connect(&url).await.unwrap();
    let inspector = Inspector::connect(&url).await.unwrap();
    let enqueue = |q: &str, kind: &str, o: EnqueueOptions| {
        let client = client.clone();
        let (q, kind) = (q.to_string(), kind.to_string());
        async move {
            client
                .enqueue(&Task::new(&kind, b"payload".to_vec()), o.queue(q))
                .await
                .unwrap()
        }
    };
    // c: processed by our server: 2 ok, 1 ok kept as completed, 1 failing
    // without retries (archived), 1 failing with retries (retry).
    for _ in 0..2 {
        enqueue(&c, "ok", EnqueueOptions::new()).await;
    }
    enqueue(
        &c,
        "ok",
        EnqueueOptions::new().retention(Duration::from_secs(3600)),
    )
    .await;
    enqueue(&c, "fail", EnqueueOptions::new().max_retry(0)).await;
    enqueue(&c, "fail", EnqueueOptions::new().max_retry(5)).await;
    let broker = asynqdeck::broker::Broker::connect(&url).await.unwrap();
    let running = server::start_on(
        broker,
        Config {
            queues: [(c.clone(), 1)].into_iter().collect(),
            ..Config::default()
        },
        ok_or_fail_mux(),
    );
    support::eventually(server::WAIT, || {
        let inspector = inspector.clone();
        let c = c.clone();
        async move {
            let i = inspector.queue_info(&c).await.ok()?;
            (i.pending == 0 && i.active == 0 && i.retry == 1 && i.archived == 1 && i.completed == 1)
                .then_some(())
        }
    })
    .await
    .expect("queue c's tasks processed");
    // Servers are read one key each on a cluster (their keys' hash tags
    // differ): ours is listed, with the queue it serves.
    let servers = support::eventually(server::WAIT, || {
        let inspector = inspector.clone();
        async move {
            let s = inspector.servers().await.ok()?;
            (s.len() == 1).then_some(s)
        }
    })
    .await
    .expect("the server is listed");
    assert!(
        servers[0].queues.contains_key(&c),
        "{:?}",
        servers[0].queues
    );
    let page = support::http::get(
        &Dashboard::new(inspector.clone(), WebConfig::default()).app,
        "/servers",
    )
    .await;
    assert_eq!(page.status.as_u16(), 200);
    running.shutdown().await;
    // a: 3 pending. b: 2 scheduled, 1 archived, paused.
    for _ in 0..3 {
        enqueue(&a, "ok", EnqueueOptions::new()).await;
    }
    for _ in 0..2 {
        enqueue(
            &b,
            "ok",
            EnqueueOptions::new().process_in(Duration::from_secs(3600)),
        )
        .await;
    }
    let t = enqueue(&b, "ok", EnqueueOptions::new()).await;
    inspector.archive_task(&b, &t.id).await.unwrap();
    inspector.pause_queue(&b).await.unwrap();

    let want: BTreeMap<&str, Numbers> = [
        (a.as_str(), (3, 0, 0, 0, 0, 0, 0, 0, false)),
        (b.as_str(), (0, 0, 2, 0, 1, 0, 0, 0, true)),
        (c.as_str(), (0, 0, 0, 1, 1, 1, 5, 2, false)),
    ]
    .into_iter()
    .collect();
    let names = inspector.queues().await.unwrap();
    assert_eq!(names, {
        let mut n = qs.clone();
        n.sort();
        n
    });
    let rows = inspector.queues_stats(&names, true).await.unwrap();
    assert_eq!(rows.len(), 3);
    for row in &rows {
        let i = row.info.as_ref().unwrap();
        let got = (
            i.pending,
            i.active,
            i.scheduled,
            i.retry,
            i.archived,
            i.completed,
            i.processed,
            i.failed,
            i.paused,
        );
        assert_eq!(got, want[row.queue.as_str()], "queue {}", row.queue);
        assert_eq!((i.processed_total, i.failed_total), (i.processed, i.failed));
        assert!(row.samples.as_ref().unwrap().is_ok());
        // The one-queue read (queue_stats.lua, every key declared) agrees.
        let one = inspector.queue_info(&row.queue).await.unwrap();
        assert_eq!(
            (
                one.size,
                one.pending,
                one.scheduled,
                one.retry,
                one.archived,
                one.completed
            ),
            (
                i.size,
                i.pending,
                i.scheduled,
                i.retry,
                i.archived,
                i.completed
            )
        );
        assert_eq!(
            (one.processed, one.failed, one.paused),
            (i.processed, i.failed, i.paused)
        );
    }
    let missing = inspector
        .queues_stats(&["nosuchqueue".to_string()], false)
        .await
        .unwrap();
    assert!(matches!(missing[0].info, Err(Error::QueueNotFound { .. })));

    // Memory per queue: each estimate non-zero.
    let memory = inspector.queues_memory_usage(&names).await.unwrap();
    for (q, bytes) in &memory {
        let bytes = *bytes.as_ref().unwrap();
        assert!(bytes > 0, "memory of {q}: {bytes}");
    }

    // The dashboard: /api/queues numbers, the overview page, memory shown.
    let dash = Dashboard::new(inspector.clone(), WebConfig::default());
    let reply = support::eventually(server::WAIT, || {
        let app = dash.app.clone();
        async move {
            let r = support::http::get(&app, "/api/queues").await;
            let body = r.json();
            let all_memory = body["queues"]
                .as_array()?
                .iter()
                .all(|q| q["memory_usage_bytes"].as_i64().unwrap_or(0) > 0);
            all_memory.then_some(body)
        }
    })
    .await
    .expect("/api/queues shows every queue's memory");
    let listed = reply["queues"].as_array().unwrap();
    assert_eq!(listed.len(), 3);
    for q in listed {
        let name = q["queue"].as_str().unwrap();
        let w = want[name];
        let got = (
            q["pending"].as_i64().unwrap(),
            q["active"].as_i64().unwrap(),
            q["scheduled"].as_i64().unwrap(),
            q["retry"].as_i64().unwrap(),
            q["archived"].as_i64().unwrap(),
            q["completed"].as_i64().unwrap(),
            q["processed"].as_i64().unwrap(),
            q["failed"].as_i64().unwrap(),
            q["paused"].as_bool().unwrap(),
        );
        assert_eq!(got, w, "/api/queues {name}");
    }
    let page = support::http::get(&dash.app, "/").await;
    assert_eq!(page.status.as_u16(), 200);
    let html = page.text();
    for q in &qs {
        assert!(html.contains(q.as_str()), "overview lists {q}");
    }

    // Redis commands per statistics refresh (what each dashboard poll
    // costs when someone is viewing), summed over the masters.
    const N: u64 = 10;
    let before = calls_all(&cluster);
    let mut hints = StatsHints::tracked();
    for _ in 0..N {
        let (snap, _) = inspector.stats_snapshot(true, &mut hints).await;
        assert!(snap.error.is_none());
        assert_eq!(snap.queues.len(), 3);
    }
    let after = calls_all(&cluster);
    let mut delta: BTreeMap<String, u64> = BTreeMap::new();
    for (k, v) in &after {
        let d = v - before.get(k).copied().unwrap_or(0);
        if d > 0 {
            delta.insert(k.clone(), d);
        }
    }
    // The first reading's own INFO, one per master.
    if let Some(info) = delta.get_mut("info") {
        *info -= cluster.ports.len() as u64;
    }
    delta.retain(|_, v| *v > 0);
    let total: u64 = delta.values().sum();
    // Sent by asynqdeck: MULTI, MGET, EVALSHA, EXEC per queue and the
    // queue list's SMEMBERS; each script run makes one SMEMBERS of its own
    // (the queue's groups), counted by Redis under the same name.
    let get = |k: &str| delta.get(k).copied().unwrap_or(0);
    let sent = get("multi") + get("mget") + get("evalsha") + get("exec") + get("smembers")
        - get("evalsha");
    println!(
        "cluster stats refresh, 3 queues on 3 masters: {} commands executed per refresh (Lua's included), {} sent per refresh; {delta:?}",
        total as f64 / N as f64,
        sent as f64 / N as f64
    );
    // Per refresh: SMEMBERS twice at most (list + numbers), and per queue
    // MULTI, MGET, EVALSHA, EXEC and the script's own reads (≤ 20 here).
    assert!(total <= N * (2 + 3 * 24), "per refresh: {delta:?}");
    assert!(!delta.contains_key("keys") && !delta.contains_key("scan"));

    let errors = cluster.error_stats();
    assert!(
        !errors.iter().any(|(k, _)| k == "CROSSSLOT"),
        "no CROSSSLOT: {errors:?}"
    );
}

/// The Redis page and `/api/redis_info` show the 3 masters with their
/// exact slot ranges (as `CLUSTER NODES` says), memory and ops/s, and each
/// queue under the master that owns its slot; the cluster routes give
/// `CLUSTER KEYSLOT`'s slot and the owning node; on a standalone Redis they
/// answer 400 with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_redis_page_shows_every_node_and_its_queues() {
    let cluster = start_cluster().await;
    let url = cluster.url();
    let qs = queue_per_master(&cluster, "r");
    let client = Client::connect(&url).await.unwrap();
    for q in &qs {
        client
            .enqueue(
                &Task::new("t", b"x".to_vec()),
                EnqueueOptions::new().queue(q),
            )
            .await
            .unwrap();
    }
    let inspector = Inspector::connect(&url).await.unwrap();
    let dash = Dashboard::new(inspector.clone(), WebConfig::default());

    // Each master's own slot ranges, from its CLUSTER NODES "myself" line.
    let mut ranges: BTreeMap<u16, String> = BTreeMap::new();
    for &p in &cluster.ports {
        let line = cli(p, &["CLUSTER", "NODES"])
            .lines()
            .find(|l| l.contains("myself"))
            .unwrap()
            .to_string();
        let f: Vec<&str> = line.split_whitespace().collect();
        ranges.insert(p, f[8..].join(" "));
    }

    let body = support::http::get(&dash.app, "/api/redis_info")
        .await
        .json();
    assert_eq!(body["cluster"], true);
    assert_eq!(body["info"]["cluster_state"], "ok");
    let nodes = body["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 3);
    for n in nodes {
        let addr = n["addr"].as_str().unwrap();
        let port: u16 = addr.rsplit_once(':').unwrap().1.parse().unwrap();
        assert_eq!(n["role"], "master");
        let slots: Vec<String> = n["slots"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let (a, b) = (r[0].as_u64().unwrap(), r[1].as_u64().unwrap());
                if a == b {
                    a.to_string()
                } else {
                    format!("{a}-{b}")
                }
            })
            .collect();
        assert_eq!(slots.join(" "), ranges[&port], "slots of {addr}");
        assert!(
            n["used_memory_human"]
                .as_str()
                .unwrap()
                .ends_with(['B', 'K', 'M'])
        );
        assert!(
            n["instantaneous_ops_per_sec"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .is_ok()
        );
        let held: Vec<&str> = n["queues"]
            .as_array()
            .unwrap()
            .iter()
            .map(|q| q.as_str().unwrap())
            .collect();
        let want: Vec<&str> = qs
            .iter()
            .filter(|q| cluster.port_of(&format!("asynq:{{{q}}}:pending")) == port)
            .map(String::as_str)
            .collect();
        assert_eq!(held, want, "queues of {addr}");
    }
    let locations = body["queue_locations"].as_array().unwrap();
    assert_eq!(locations.len(), 3);
    for l in locations {
        let q = l["queue"].as_str().unwrap();
        let key = format!("asynq:{{{q}}}:pending");
        let slot: i64 = cli(cluster.ports[0], &["CLUSTER", "KEYSLOT", &key])
            .trim()
            .parse()
            .unwrap();
        assert_eq!(l["keyslot"], slot);
        assert_eq!(
            l["nodes"],
            serde_json::json!([format!("127.0.0.1:{}", cluster.port_of(&key))])
        );
    }

    // The page: 3 node rows, each with its ranges and its queue.
    let page = support::http::get(&dash.app, "/redis").await;
    assert_eq!(page.status.as_u16(), 200);
    let html = page.text();
    assert_eq!(html.matches("<tr class=\"node\"").count(), 3);
    for (port, slots) in &ranges {
        let row_at = html
            .find(&format!("data-addr=\"127.0.0.1:{port}\""))
            .unwrap_or_else(|| panic!("row of {port}"));
        let row = &html[row_at..row_at + html[row_at..].find("</tr>").unwrap()];
        assert!(
            row.contains(&format!("<td class=\"mono slots\">{slots}</td>")),
            "{row}"
        );
        assert!(row.contains("<td class=\"role\">master</td>"), "{row}");
        for q in &qs {
            let here = cluster.port_of(&format!("asynq:{{{q}}}:pending")) == *port;
            assert_eq!(
                row.contains(&format!(">{q}</a>")),
                here,
                "{q} on {port}: {row}"
            );
        }
    }

    // The cluster routes and inspector calls.
    for q in &qs {
        let key = format!("asynq:{{{q}}}:pending");
        let slot: i64 = cli(cluster.ports[0], &["CLUSTER", "KEYSLOT", &key])
            .trim()
            .parse()
            .unwrap();
        assert_eq!(inspector.cluster_key_slot(q).await.unwrap(), slot);
        let r = support::http::get(&dash.app, &format!("/api/queues/{q}/cluster_key_slot")).await;
        assert_eq!(r.json(), serde_json::json!({"queue": q, "keyslot": slot}));
        let r = support::http::get(&dash.app, &format!("/api/queues/{q}/cluster_nodes")).await;
        let body = r.json();
        let nodes = body["nodes"].as_array().unwrap();
        assert_eq!(nodes.len(), 1);
        let port = cluster.port_of(&key);
        assert_eq!(nodes[0]["addr"], format!("127.0.0.1:{port}"));
        let myself_id = cli(port, &["CLUSTER", "MYID"]).trim().to_string();
        assert_eq!(nodes[0]["id"], myself_id);
    }
    assert!(matches!(
        inspector.cluster_key_slot(" ").await,
        Err(Error::InvalidQueueName)
    ));

    // Standalone: a clear refusal.
    let db = support::redis();
    let plain = Inspector::connect(&db.url()).await.unwrap();
    let e = plain.cluster_key_slot("default").await.unwrap_err();
    assert!(
        matches!(&e, Error::FailedPrecondition(m) if m.contains("not a cluster")),
        "{e:?}"
    );
    assert!(matches!(
        plain.cluster_nodes("default").await,
        Err(Error::FailedPrecondition(_))
    ));
    let plain_dash = Dashboard::new(plain, WebConfig::default());
    let r = support::http::get(&plain_dash.app, "/api/queues/default/cluster_key_slot").await;
    assert_eq!(r.status.as_u16(), 400);
    assert!(r.text().contains("not a cluster"), "{}", r.text());
}

/// Queue discovery's keyspace walk covers every master: a queue whose keys
/// exist on a master that is not the seed, but that is missing from
/// `asynq:queues`, is found and restored; the left-behind sweep of a queue
/// runs on its own master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_discovery_walks_every_master() {
    let cluster = start_cluster().await;
    let seed = cluster.ports[0];
    let seed_url = format!("redis-cluster://127.0.0.1:{seed}");
    let qs = queue_per_master(&cluster, "d");
    let lost = qs[2].clone();
    assert_ne!(cluster.port_of(&format!("asynq:{{{lost}}}:pending")), seed);
    let client = Client::connect(&seed_url).await.unwrap();
    for q in &qs {
        let info = client
            .enqueue(
                &Task::new("t", b"x".to_vec()),
                EnqueueOptions::new().queue(q),
            )
            .await
            .unwrap();
        assert_eq!(info.state, TaskState::Pending);
    }
    // Many more keys than one SCAN step returns, spread over the masters.
    let filler = (0..300).map(|i| format!("filler:{i}")).collect::<Vec<_>>();
    let broker = asynqdeck::broker::Broker::connect(&seed_url).await.unwrap();
    for k in &filler {
        let port = cluster.port_of(k);
        assert_eq!(cli(port, &["SET", k, "1"]).trim(), "OK");
    }
    assert_eq!(cli(seed, &["SREM", "asynq:queues", &lost]).trim(), "1");

    let total_keys = broker.key_count().await.unwrap();
    let mut per_master = 0;
    for &p in &cluster.ports {
        per_master += cli(p, &["DBSIZE"]).trim().parse::<u64>().unwrap();
    }
    assert_eq!(total_keys, per_master);

    let masters = broker.scan_masters().await.unwrap();
    assert_eq!(masters.len(), 3, "every master is walked: {masters:?}");
    let mut at = Some(asynqdeck::broker::ScanCursor::START);
    let mut found = std::collections::BTreeSet::new();
    let mut steps = 0;
    while let Some(cursor) = at {
        let (next, queues) = broker.scan_queue_keys(&masters, cursor).await.unwrap();
        found.extend(queues);
        steps += 1;
        at = next;
        assert!(steps < 1000, "the walk ends");
    }
    let mut want: Vec<String> = qs.clone();
    want.sort();
    assert_eq!(found.into_iter().collect::<Vec<_>>(), want);
    let unlisted = broker
        .unlisted_queues(&want.iter().cloned().collect())
        .await
        .unwrap();
    assert_eq!(unlisted, vec![lost.clone()]);
    assert!(broker.restore_queue(&lost).await.unwrap());
    let inspector = Inspector::connect(&seed_url).await.unwrap();
    assert_eq!(inspector.queues().await.unwrap(), want);

    // The left-behind sweep on a queue of another master: no left-behind
    // hash among its keys, its one task hash scanned.
    let (mut cursor, mut scanned, mut found) = (0, 0, 0);
    loop {
        let (next, count) = inspector
            .left_behind_step(&lost, cursor, false)
            .await
            .unwrap();
        scanned += count.scanned;
        found += count.found;
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    assert_eq!((scanned, found), (1, 0));
}

/// One master down (no replica): the statistics of the queues on the other
/// masters are still read; the dead master's queue is its own error row,
/// and that error says Redis is unavailable (a 503 on the pages and `/api`),
/// not unreadable data (422).
/// Found by the fresh-clone review: one failing queue used to fail the
/// whole snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_master_fails_only_its_queues() {
    let mut cluster = start_cluster().await;
    let queues = queue_per_master(&cluster, "dm");
    let client = Client::connect(&cluster.url()).await.unwrap();
    for q in &queues {
        client
            .enqueue(
                &Task::new("t", b"x".to_vec()),
                EnqueueOptions::new().queue(q),
            )
            .await
            .unwrap();
    }
    let inspector = Inspector::connect(&cluster.url()).await.unwrap();
    let list_port = cluster.port_of("asynq:queues");
    let dead = queues
        .iter()
        .find(|q| cluster.port_of(&format!("asynq:{{{q}}}:pending")) != list_port)
        .unwrap()
        .clone();
    let dead_port = cluster.port_of(&format!("asynq:{{{dead}}}:pending"));
    cluster.kill_node(dead_port);
    let rows = inspector.queues_stats(&queues, false).await.unwrap();
    assert_eq!(rows.len(), 3);
    for row in &rows {
        if row.queue == dead {
            let err = row.info.as_ref().unwrap_err();
            // is_redis_unavailable is what the web layer's one error
            // mapping answers 503 for.
            assert!(err.is_redis_unavailable(), "{err}");
        } else {
            let info = row
                .info
                .as_ref()
                .unwrap_or_else(|e| panic!("{}: {e}", row.queue));
            assert_eq!((info.pending, info.size), (1, 1), "{}", row.queue);
        }
    }
}
