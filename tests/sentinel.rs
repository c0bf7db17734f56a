//! Behind Sentinel (issue 14 item 4): connecting by URL and by the serve
//! flags with passwords and an ACL user, following a failover on a
//! connection opened before it, a failover under load (0 lost, 0 finished
//! twice, processing resumed within 5 s of the election), and the Redis
//! page's Sentinel section. Every set is the test's own
//! (`support::cluster::SentinelSet`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use asynqdeck::broker::{Broker, ConnectOptions, SentinelOptions, Topology};
use asynqdeck::server::{Config, ServeMux, TaskContext};
use asynqdeck::{Client, EnqueueOptions, Error, Inspector, Task};

use crate::support::cluster::{SentinelConfig, SentinelSet};
use crate::support::http::ServeBin;
use crate::support::{self, server};

async fn start_set(config: SentinelConfig) -> SentinelSet {
    tokio::task::spawn_blocking(move || SentinelSet::start_with(config))
        .await
        .unwrap()
}

fn free_listen() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    drop(l);
    addr
}

fn master_addr(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

/// Serve flags: the sentinels' password and the master's, and an ACL user
/// `deck` on the master; `/api/redis_info` and `/redis` name the master.
/// A wrong sentinel password or master password is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_flags_with_sentinel_and_master_passwords_and_an_acl_user() {
    let set = start_set(SentinelConfig {
        sentinel_password: Some("s3ntinel".into()),
        master_password: Some("m4ster".into()),
        acl_user: Some(("deck".into(), "deckpw".into())),
        ..SentinelConfig::default()
    })
    .await;
    let addrs = set.addrs();
    let master = master_addr(set.master_port);
    for (user, password) in [(None, "m4ster"), (Some("deck"), "deckpw")] {
        let listen = free_listen();
        let mut args = vec![
            "--redis-sentinel-addrs",
            addrs.as_str(),
            "--redis-sentinel-master",
            SentinelSet::MASTER,
            "--redis-sentinel-password",
            "s3ntinel",
            "--redis-password",
            password,
            "--listen",
            listen.as_str(),
        ];
        if let Some(u) = user {
            args.extend(["--redis-username", u]);
        }
        let serve = ServeBin::spawn(&args, &[]).await;
        let info = serve.get("/api/redis_info").await.json();
        assert_eq!(info["sentinel"]["master"], master.as_str(), "{user:?}");
        assert_eq!(info["sentinel"]["master_name"], SentinelSet::MASTER);
        assert_eq!(info["sentinel"]["failovers"], 0);
        assert!(info["sentinel"]["last_failover"].is_null());
        assert_eq!(info["info"]["role"], "master");
        let page = serve.get("/redis").await.text();
        assert!(page.contains("<h2>Sentinel</h2>"), "{page}");
        assert!(page.contains(&master), "{page}");
        assert!(page.contains("none seen since start"), "{page}");
        assert_eq!(serve.terminate().await, Some(0));
    }

    let opts = |sentinel_pw: &str, user: Option<&str>, pw: &str| ConnectOptions {
        username: user.map(str::to_string),
        password: Some(pw.to_string()),
        sentinel: Some(SentinelOptions {
            addrs: addrs.split(',').map(str::to_string).collect(),
            master: SentinelSet::MASTER.into(),
            password: Some(sentinel_pw.to_string()),
            username: None,
        }),
        ..ConnectOptions::default()
    };
    // The ACL user writes and reads through the library too.
    let b = Broker::connect_with(&opts("s3ntinel", Some("deck"), "deckpw"))
        .await
        .unwrap();
    let client = Client::from_broker(b.clone());
    let t = client
        .enqueue(
            &Task::new("t", b"x".to_vec()),
            EnqueueOptions::new().task_id("acl-1"),
        )
        .await
        .unwrap();
    assert_eq!(t.id, "acl-1");
    assert_eq!(
        set.mcli(set.master_port, &["EXISTS", "asynq:{default}:t:acl-1"])
            .trim(),
        "1"
    );
    for bad in [
        opts("wrong", Some("deck"), "deckpw"),
        opts("s3ntinel", Some("deck"), "wrong"),
        opts("s3ntinel", None, "wrong"),
    ] {
        assert!(
            matches!(Broker::connect_with(&bad).await, Err(Error::Redis(_))),
            "{bad:?}"
        );
    }
}

/// `--redis-url 'redis-sentinel://:pw@.../3?master=NAME'`: the sentinels'
/// password and database 3 of the master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_url_with_password_and_db_path() {
    let set = start_set(SentinelConfig {
        sentinel_password: Some("s3ntinel".into()),
        ..SentinelConfig::default()
    })
    .await;
    let url = format!(
        "redis-sentinel://:s3ntinel@{}/3?master={}",
        set.addrs(),
        SentinelSet::MASTER
    );
    let client = Client::connect(&url).await.unwrap();
    assert_eq!(client.broker().topology(), Topology::Sentinel);
    client
        .enqueue(
            &Task::new("t", b"x".to_vec()),
            EnqueueOptions::new().task_id("db3"),
        )
        .await
        .unwrap();
    let key = "asynq:{default}:t:db3";
    assert_eq!(
        set.mcli(set.master_port, &["-n", "3", "EXISTS", key])
            .trim(),
        "1"
    );
    assert_eq!(
        set.mcli(set.master_port, &["-n", "0", "EXISTS", key])
            .trim(),
        "0"
    );
    let listen = free_listen();
    let serve = ServeBin::start(&url, &["--listen", &listen], &[]).await;
    let info = serve.get("/api/redis_info").await.json();
    assert_eq!(info["sentinel"]["master"], master_addr(set.master_port));
    assert!(info["info"]["db3"].as_str().unwrap().starts_with("keys="));
    assert!(info["info"]["db0"].is_null(), "nothing in database 0");
    assert_eq!(serve.terminate().await, Some(0));
}

/// After `SENTINEL FAILOVER`, the first write on a connection opened before
/// it lands on the new master; the broker records the failover (from, to)
/// and the Redis page shows it. The old master refuses writes once its
/// replica is promoted (`min-replicas-to-write 1`), so the write either
/// finds the connection moved already (`+switch-master`) or meets
/// `NOREPLICAS`/`READONLY` and is sent again on the new master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_write_after_a_failover_lands_on_the_new_master() {
    let set = start_set(SentinelConfig {
        min_replicas: true,
        ..SentinelConfig::default()
    })
    .await;
    let (old, url) = (set.master_port, set.url());
    let broker = Broker::connect(&url).await.unwrap();
    let client = Client::from_broker(broker.clone());
    client
        .enqueue(
            &Task::new("t", b"x".to_vec()),
            EnqueueOptions::new().task_id("before"),
        )
        .await
        .unwrap();
    let set = Arc::new(set);
    let s = set.clone();
    let new = tokio::task::spawn_blocking(move || s.failover())
        .await
        .unwrap();
    assert_ne!(new, old);
    client
        .enqueue(
            &Task::new("t", b"x".to_vec()),
            EnqueueOptions::new().task_id("after"),
        )
        .await
        .unwrap_or_else(|e| {
            panic!(
                "the first write after the failover succeeds: {e}; {:?}; roles old {} new {}",
                broker.sentinel_status(),
                set.mcli(old, &["ROLE"]).replace('\n', " "),
                set.mcli(new, &["ROLE"]).replace('\n', " ")
            )
        });
    assert_eq!(
        set.mcli(new, &["EXISTS", "asynq:{default}:t:after"]).trim(),
        "1"
    );
    assert_eq!(broker.sentinel_master(), Some(master_addr(new)));
    let status = broker.sentinel_status().unwrap();
    assert_eq!(status.master, Some(master_addr(new)));
    assert_eq!(status.failovers, 1);
    let f = status.last_failover.unwrap();
    assert_eq!((f.from, f.to), (master_addr(old), master_addr(new)));
    // The old master holds it only as the new one's replica.
    let on_old = set.mcli(old, &["EXISTS", "asynq:{default}:t:after"]);
    if on_old.trim() == "1" {
        assert!(set.mcli(old, &["ROLE"]).starts_with("slave"));
    }
    let inspector = Inspector::from_broker(broker);
    let info = inspector.redis_info().await.unwrap();
    assert_eq!(info.info["role"], "master");
    assert_eq!(info.sentinel.unwrap().master, Some(master_addr(new)));
}

/// The `+switch-master` watcher is a subscription on one sentinel; it ends
/// when the broker's last clone is dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watcher_ends_with_the_broker() {
    let set = start_set(SentinelConfig::default()).await;
    // Sentinels have no PUBSUB command: count the clients subscribed to
    // one channel (`sub=1`) in CLIENT LIST.
    let subscribers = |set: &SentinelSet| -> usize {
        set.sentinel_ports
            .iter()
            .map(|&p| {
                set.scli(p, &["CLIENT", "LIST"])
                    .lines()
                    .filter(|l| l.contains(" sub=1 ") && l.contains("cmd=subscribe"))
                    .count()
            })
            .sum()
    };
    let baseline = subscribers(&set);
    let broker = Broker::connect(&set.url()).await.unwrap();
    let clone = broker.clone();
    support::eventually(server::WAIT, || {
        let n = subscribers(&set);
        async move { (n == baseline + 1).then_some(()) }
    })
    .await
    .expect("the watcher subscribes");
    drop(broker);
    assert_eq!(subscribers(&set), baseline + 1, "a clone keeps it");
    drop(clone);
    support::eventually(server::WAIT, || {
        let n = subscribers(&set);
        async move { (n == baseline).then_some(()) }
    })
    .await
    .expect("the watcher's subscription ends with the broker");
}

/// What the failover-under-load run measured.
#[derive(Debug)]
pub struct FailoverRun {
    /// `SENTINEL FAILOVER` sent → the sentinels name the new master.
    pub to_election: Duration,
    /// Election → the new master's `processed` counter first grows.
    pub to_first_done: Duration,
    /// Tasks handled in the second before `SENTINEL FAILOVER`.
    pub before_per_s: usize,
    /// Tasks handled in the second after the first one done on the new
    /// master.
    pub after_per_s: usize,
    /// Handler runs per task id, and when each run ended.
    pub runs: HashMap<String, Vec<Instant>>,
}

/// Runs `total` tasks through a Server (concurrency 20) with `SENTINEL
/// FAILOVER` mid-run; half are enqueued before, half during. Shared with
/// `bench/sentinel_failover.rs` through copy: tests cannot export.
async fn failover_under_load(total: usize) -> FailoverRun {
    let set = Arc::new(
        start_set(SentinelConfig {
            min_replicas: true,
            ..SentinelConfig::default()
        })
        .await,
    );
    let url = set.url();
    let client = Client::connect(&url).await.unwrap();
    let enqueue = |client: Client, from: usize, to: usize, pace: bool| async move {
        for i in from..to {
            let id = format!("t{i}");
            loop {
                match client
                    .enqueue(
                        &Task::new("rec", id.clone().into_bytes()),
                        EnqueueOptions::new().task_id(id.clone()),
                    )
                    .await
                {
                    Ok(_) | Err(Error::TaskIdConflict) => break,
                    // Redis unreachable for a moment (the failover): again;
                    // a conflict then means the first try went through.
                    Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
                }
            }
            if pace && i % 25 == 0 {
                // Keep enqueueing through the failover.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    enqueue(client.clone(), 0, total / 2, false).await;

    let runs: Arc<Mutex<HashMap<String, Vec<Instant>>>> = Arc::default();
    let done_at: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let mut mux = ServeMux::new();
    let (r, d) = (runs.clone(), done_at.clone());
    mux.handle_fn("rec", move |_ctx: TaskContext, t: Task| {
        let (r, d) = (r.clone(), d.clone());
        async move {
            let id = String::from_utf8(t.payload().to_vec()).unwrap();
            r.lock()
                .unwrap()
                .entry(id)
                .or_default()
                .push(Instant::now());
            d.lock().unwrap().push(Instant::now());
            Ok(())
        }
    });
    let config = Config {
        concurrency: 20,
        queues: [("default".to_string(), 1)].into_iter().collect(),
        ..Config::default()
    };
    let started = Instant::now();
    let running = server::start_on(Broker::connect(&url).await.unwrap(), config, mux);
    let during = tokio::spawn(enqueue(client.clone(), total / 2, total, true));
    let count = |runs: &Arc<Mutex<HashMap<String, Vec<Instant>>>>| runs.lock().unwrap().len();
    support::eventually(Duration::from_secs(60), || {
        let n = count(&runs);
        async move { (n >= total / 4).then_some(()) }
    })
    .await
    .expect("a quarter processed before the failover");

    let s = set.clone();
    let (sent, elected, new) = tokio::task::spawn_blocking(move || {
        let old = s.current_master();
        let sent = Instant::now();
        let r = s.scli(
            s.sentinel_ports[0],
            &["SENTINEL", "FAILOVER", SentinelSet::MASTER],
        );
        assert!(r.contains("OK"), "SENTINEL FAILOVER: {r}");
        loop {
            let now = s.current_master();
            if now != old {
                return (sent, Instant::now(), now);
            }
            assert!(sent.elapsed() < Duration::from_secs(60), "no election");
        }
    })
    .await
    .unwrap();
    let processed = |set: &SentinelSet, port: u16| -> i64 {
        set.mcli(port, &["GET", "asynq:{default}:processed"])
            .trim()
            .parse()
            .unwrap_or(0)
    };
    let at_election = processed(&set, new);
    let s = set.clone();
    let first_done = tokio::task::spawn_blocking(move || {
        loop {
            if processed(&s, new) > at_election {
                return Instant::now();
            }
            assert!(
                elected.elapsed() < Duration::from_secs(60),
                "nothing processed on the new master"
            );
        }
    })
    .await
    .unwrap();

    during.await.unwrap();
    let inspector = Inspector::connect(&url).await.unwrap();
    support::eventually(Duration::from_secs(120), || {
        let (inspector, n) = (inspector.clone(), count(&runs));
        async move {
            let q = inspector.queue_info("default").await.ok()?;
            (n == total && q.pending == 0 && q.active == 0 && q.retry == 0).then_some(())
        }
    })
    .await
    .unwrap_or_else(|| panic!("every task processed: {} of {total}", count(&runs)));
    running.shutdown().await;
    let second = Duration::from_secs(1);
    let done_at = done_at.lock().unwrap().clone();
    let within =
        |from: Instant, to: Instant| done_at.iter().filter(|t| **t >= from && **t < to).count();
    let runs = runs.lock().unwrap().clone();
    let _ = started;
    FailoverRun {
        to_election: elected - sent,
        to_first_done: first_done.saturating_duration_since(elected),
        before_per_s: within(sent - second, sent),
        after_per_s: within(first_done, first_done + second),
        runs,
    }
}

/// 5,000 tasks, `SENTINEL FAILOVER` mid-run: 0 lost, 0 run twice, and
/// processing resumes within 5 s of the election.
///
/// Redis replicates asynchronously: a `done` the old master acknowledged
/// in the last instant before its replica was promoted may never reach the
/// new master (a whole ack batch at once), and the recoverer would run
/// those tasks again after their lease. The fetch loop finishes its recent
/// successes again on the new master (`server/ack_replay.rs`,
/// COMPATIBILITY.md K15), so none runs twice; the test waits until no task
/// is active, so a lost `done` not replayed would show as a second run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_under_load_loses_nothing_and_resumes_within_5s() {
    let total = 5_000;
    let run = failover_under_load(total).await;
    let twice: Vec<_> = run.runs.iter().filter(|(_, r)| r.len() != 1).collect();
    eprintln!(
        "sentinel failover: election {:?} after SENTINEL FAILOVER, first done on the new \
         master {:?} after it; {} tasks/s before, {} after; {} ran twice",
        run.to_election,
        run.to_first_done,
        run.before_per_s,
        run.after_per_s,
        twice.len()
    );
    assert_eq!(run.runs.len(), total, "lost tasks");
    assert!(
        twice.is_empty(),
        "ran twice: {:?}",
        twice
            .iter()
            .map(|(id, r)| (id, r.len()))
            .collect::<Vec<_>>()
    );
    assert!(
        run.to_first_done < Duration::from_secs(5),
        "processing resumed {:?} after the election",
        run.to_first_done
    );
}
