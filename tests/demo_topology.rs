//! `asynqdeck demo` on a Redis Cluster (`--redis-cluster-nodes`) and behind
//! Sentinel (`--redis-url redis-sentinel://...`), the real binary end to end
//! (issue 14 item 5): the demo's queues land on different masters, its
//! workers process tasks of every queue (a success in each, an archived
//! invalid order, a retried e-mail), the pages answer 200, and SIGINT
//! stops it with exit code 0 and no server entry left. Also the demo's
//! Redis flags: which options each form gives, and the combinations refused.

use std::process::Stdio;
use std::time::Duration;

use asynqdeck::Inspector;
use asynqdeck::broker::Topology;
use asynqdeck::cli::{Cli, Command};
use clap::Parser;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::cluster::{LocalCluster, SentinelSet};
use crate::support::http::{BIN, request};
use crate::support::{self};

/// The demo's queues.
const QUEUES: [&str; 3] = ["critical", "default", "low"];

fn demo_args(args: &[&str]) -> asynqdeck::cli::DemoArgs {
    let mut all = vec!["asynqdeck", "demo"];
    all.extend_from_slice(args);
    match Cli::try_parse_from(&all).unwrap_or_else(|e| panic!("{all:?}: {e}")) {
        Cli {
            command: Some(Command::Demo(d)),
            ..
        } => d,
        other => panic!("{all:?} is not demo: {other:?}"),
    }
}

/// Each Redis flag of `demo` gives the options `serve` would; more than one
/// Redis, or sentinel flags without sentinels, are refused.
#[test]
fn demo_redis_flags() {
    assert!(demo_args(&[]).redis_options().unwrap().is_none());
    let o = demo_args(&["--redis-cluster-nodes", "a:1, b:2,"])
        .redis_options()
        .unwrap()
        .unwrap();
    assert_eq!(o.cluster_nodes, ["a:1", "b:2"]);
    assert_eq!(o.display_address(), "cluster a:1,b:2");
    let o = demo_args(&[
        "--redis-sentinel-addrs",
        "s1:26379,s2:26380",
        "--redis-sentinel-master",
        "mymaster",
        "--redis-sentinel-password",
        "spw",
    ])
    .redis_options()
    .unwrap()
    .unwrap();
    let s = o.sentinel.clone().unwrap();
    assert_eq!(s.addrs, ["s1:26379", "s2:26380"]);
    assert_eq!(s.master, "mymaster");
    assert_eq!(s.password.as_deref(), Some("spw"));
    assert_eq!(
        o.display_address(),
        "sentinel s1:26379,s2:26380 master mymaster"
    );
    let o = demo_args(&["--redis-url", "redis-sentinel://:pw@h:1,g:2/3?master=m"])
        .redis_options()
        .unwrap()
        .unwrap();
    assert_eq!(o.display_address(), "sentinel h:1,g:2 master m");

    for (args, want) in [
        (
            &["--redis-url", "redis://h:1", "--redis-cluster-nodes", "a:1"][..],
            "give one of --redis-url, --redis-cluster-nodes and --redis-sentinel-addrs",
        ),
        (
            &[
                "--redis-cluster-nodes",
                "a:1",
                "--redis-sentinel-addrs",
                "s:1",
            ][..],
            "give one of --redis-url, --redis-cluster-nodes and --redis-sentinel-addrs",
        ),
        (
            &["--redis-sentinel-addrs", "s:1"][..],
            "--redis-sentinel-addrs needs --redis-sentinel-master",
        ),
        (
            &["--redis-sentinel-master", "m"][..],
            "--redis-sentinel-master and --redis-sentinel-password need --redis-sentinel-addrs",
        ),
    ] {
        assert_eq!(
            demo_args(args).redis_options().unwrap_err(),
            want,
            "{args:?}"
        );
    }
}

/// A running `asynqdeck demo`, killed on drop; its stdout is drained.
struct DemoBin {
    child: tokio::process::Child,
    addr: String,
    /// The `demo: Redis ...` line it printed.
    redis_line: String,
}

impl DemoBin {
    async fn start(args: &[&str]) -> DemoBin {
        let mut child = tokio::process::Command::new(BIN)
            .arg("demo")
            .args(args)
            .args(["--listen", "127.0.0.1:0", "--poll-interval", "1s"])
            .args(["--rate", "20", "--outage-every", "1h"])
            .env_clear()
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn asynqdeck demo");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut redis_line = String::new();
        let addr = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if line.starts_with("demo: Redis ") {
                    redis_line = line.clone();
                }
                if let Some(url) = line.strip_prefix("asynqdeck serving http://") {
                    return url.split('/').next().unwrap().to_string();
                }
            }
            panic!("asynqdeck demo {args:?} exited before serving");
        })
        .await
        .expect("asynqdeck demo prints its URL in time");
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        DemoBin {
            child,
            addr,
            redis_line,
        }
    }

    /// SIGINT (Ctrl-C), then the exit code.
    async fn interrupt(mut self) -> Option<i32> {
        let pid = self.child.id().expect("running") as i32;
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(pid, libc::SIGINT);
        }
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("asynqdeck demo exits after SIGINT")
            .unwrap()
            .code()
    }
}

/// Runs the demo with `args` against the Redis `url` names, waits until
/// every queue processed tasks, an invalid order was archived and an
/// e-mail retried, checks the pages, then stops it with SIGINT.
async fn demo_runs(args: &[&str], url: &str, topology: Topology) {
    let demo = DemoBin::start(args).await;
    assert!(
        demo.redis_line.ends_with(&format!("({topology:?})")),
        "{}",
        demo.redis_line
    );
    let inspector = Inspector::connect(url).await.unwrap();
    let counts = support::eventually(Duration::from_secs(90), || {
        let inspector = inspector.clone();
        async move {
            let mut infos = Vec::new();
            for q in QUEUES {
                infos.push(inspector.queue_info(q).await.ok()?);
            }
            let ok = infos.iter().all(|i| i.processed_total >= 1)
                && infos[1].archived >= 1
                && infos[1].retry + infos[1].archived >= 2;
            ok.then(|| {
                infos
                    .iter()
                    .map(|i| (i.queue.clone(), i.processed_total))
                    .collect::<Vec<_>>()
            })
        }
    })
    .await
    .expect("the demo processes tasks of every queue, archives an invalid order, retries");
    // Issue 16: the workers' aggregator turns the grouped e-mails into
    // digests (kept as completed in `low`), and the demo's scheduler
    // publishes its periodic entry and enqueues it.
    let (digest, entry) = support::eventually(Duration::from_secs(90), || {
        let inspector = inspector.clone();
        async move {
            let page = asynqdeck::inspector::Page::new(1, 200).unwrap();
            let digest = inspector
                .list_tasks("low", asynqdeck::TaskState::Completed, page)
                .await
                .ok()?
                .into_iter()
                .find_map(|r| match r {
                    asynqdeck::inspector::TaskRow::Task(t)
                        if t.task_type == "email:digest:send" =>
                    {
                        Some(t)
                    }
                    _ => None,
                })?;
            let entry = inspector
                .scheduler_entries()
                .await
                .ok()?
                .into_iter()
                .find(|e| e.task_type == "report:daily" && e.prev_enqueue_at.is_some())?;
            Some((digest, entry))
        }
    })
    .await
    .expect("a digest completed in low and the report entry fired");
    let body: serde_json::Value = serde_json::from_slice(&digest.payload).unwrap();
    let count = body["count"].as_u64().unwrap();
    assert!((1..=10).contains(&count), "{body}");
    assert_eq!(body["items"].as_array().unwrap().len() as u64, count);
    assert!(
        body["group"].as_str().unwrap().starts_with("user:"),
        "{body}"
    );
    assert_eq!(digest.queue, "low");
    assert_eq!(entry.spec, "@every 30s");
    assert_eq!(entry.payload, br#"{"report":"daily"}"#);
    assert_eq!(
        entry.options,
        ["Queue(\"low\")", "MaxRetry(3)", "Retention(10m0s)"]
    );
    let events = inspector
        .scheduler_enqueue_events(&entry.id, asynqdeck::inspector::Page::default())
        .await
        .unwrap();
    let fired = inspector
        .get_task_info("low", &events[0].task_id)
        .await
        .unwrap();
    assert_eq!(fired.task_type, "report:daily");

    let mut names: Vec<String> = counts.iter().map(|(q, _)| q.clone()).collect();
    names.sort();
    assert_eq!(names, QUEUES);
    let mut listed = inspector.queues().await.unwrap();
    listed.sort();
    assert_eq!(listed, QUEUES);

    let mut failing = Vec::new();
    for path in [
        "/",
        "/api/queues",
        "/queues/critical",
        "/queues/default/archived",
        "/queues/low/completed",
        "/servers",
        "/api/servers",
        "/redis",
        "/api/redis_info",
        "/demo",
        "/schedulers",
        "/queues/low/aggregating",
    ] {
        let reply = request(&demo.addr, "GET", path, &[("Host", &demo.addr)], "").await;
        if reply.status != 200 {
            let body: String = reply.body.chars().take(300).collect();
            failing.push(format!("GET {path}: {} {body}", reply.status));
        }
    }
    assert!(failing.is_empty(), "pages not 200:\n{}", failing.join("\n"));
    let servers = inspector.servers().await.unwrap();
    assert_eq!(servers.len(), 2, "the demo's workers and its engine");
    let mut concurrency: Vec<i32> = servers.iter().map(|s| s.concurrency).collect();
    concurrency.sort();
    assert_eq!(concurrency, [0, 3]);

    assert_eq!(demo.interrupt().await, Some(0));
    assert_eq!(
        inspector.servers().await.unwrap().len(),
        0,
        "no server entry after a clean stop"
    );
}

/// `asynqdeck demo --redis-cluster-nodes ...` on a 3-master cluster: the
/// demo's queues sit on two masters (`critical` and `default` share one),
/// every queue processes, no CROSSSLOT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_on_cluster() {
    let cluster = tokio::task::spawn_blocking(|| LocalCluster::start(3))
        .await
        .unwrap();
    let mut masters: Vec<u16> = QUEUES
        .iter()
        .map(|q| cluster.port_of(&format!("asynq:{{{q}}}:pending")))
        .collect();
    masters.dedup();
    assert_eq!(masters.len(), 2, "critical, default | low: {masters:?}");
    demo_runs(
        &["--redis-cluster-nodes", &cluster.nodes()],
        &cluster.url(),
        Topology::Cluster,
    )
    .await;
    let errors = cluster.error_stats();
    assert!(
        !errors.iter().any(|(k, _)| k == "CROSSSLOT"),
        "no CROSSSLOT: {errors:?}"
    );
}

/// `asynqdeck demo --redis-url 'redis-sentinel://...'` behind a Sentinel
/// set: the demo's keys are on the master the sentinels name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_behind_sentinel() {
    let set = tokio::task::spawn_blocking(SentinelSet::start)
        .await
        .unwrap();
    demo_runs(&["--redis-url", &set.url()], &set.url(), Topology::Sentinel).await;
    let direct = Inspector::connect(&format!("redis://127.0.0.1:{}/0", set.master_port))
        .await
        .unwrap();
    let mut listed = direct.queues().await.unwrap();
    listed.sort();
    assert_eq!(listed, QUEUES);
}
