//! `asynqdeck serve`: flag parsing (own flags, environment variables,
//! asynqmon's flags and variables, precedence, errors), and the real binary
//! end to end against the private Redis: the dashboard answers, the embedded
//! engine forwards due retry tasks (S12, S30) and registers a concurrency-0
//! server, `/metrics` carries Go asynq's exporter metrics, SIGTERM stops it
//! cleanly; `--no-engine` forwards nothing; TLS with a CA file; Redis that
//! does not answer and bad flags give clear errors and exit codes 1 and 2.
//! Also the library API `Maintenance` on its own: queues created while it
//! runs are maintained and published from the next tick on.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use asynqdeck::broker::{Broker, keys};
use asynqdeck::cli::{Cli, Command, parse_duration};
use asynqdeck::server::{Maintenance, MaintenanceConfig};
use asynqdeck::{Inspector, TaskState};
use clap::Parser;
use redis::AsyncCommands;

use crate::support::cluster::LocalCluster;
use crate::support::http::ServeBin;
use crate::support::seed;
use crate::support::{self};

const BIN: &str = env!("CARGO_BIN_EXE_asynqdeck");

fn parse(args: &[&str]) -> asynqdeck::cli::ServeArgs {
    Cli::try_parse_from(args)
        .unwrap_or_else(|e| panic!("{args:?} must parse: {e}"))
        .into_serve_args()
        .expect("serve arguments")
}

// ------------------------------------------------------------ flag parsing

/// Defaults: Redis at redis://127.0.0.1:6379/0, listen 127.0.0.1:8080, poll
/// 5 s, previews 200, engine on with Go's intervals, not read-only, root "".
#[test]
fn serve_defaults() {
    let c = parse(&["asynqdeck", "serve"]).resolve().unwrap();
    assert_eq!(c.listen, "127.0.0.1:8080".parse::<SocketAddr>().unwrap());
    assert_eq!(c.redis.display_address(), "127.0.0.1:6379/0");
    assert!(!c.redis.uses_tls());
    assert_eq!(c.web.poll_interval, Duration::from_secs(5));
    assert_eq!(c.web.root_path, "");
    assert!(!c.web.read_only);
    assert_eq!(c.web.basic_auth, None);
    assert_eq!(
        (c.web.max_payload_length, c.web.max_result_length),
        (200, 200)
    );
    let e = c.engine.expect("engine on by default");
    assert_eq!(e.forwarder_interval, Duration::from_secs(5));
    assert_eq!(e.janitor_interval, Duration::from_secs(8));
    assert_eq!(e.recoverer_interval, Duration::from_secs(60));
    assert_eq!(e.heartbeat_interval, Duration::from_secs(5));
    assert!(e.register_server);
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
}

/// Every own flag lands where it should; durations accept 500ms/2m/plain
/// seconds; the root path is normalised.
#[test]
fn serve_own_flags() {
    let c = parse(&[
        "asynqdeck",
        "serve",
        "--redis-url",
        "redis://alice:s3cret@redis.internal:6380/4",
        "--listen",
        "0.0.0.0:9000",
        "--root-path",
        "asynq/",
        "--read-only",
        "--poll-interval",
        "500ms",
        "--basic-auth",
        "admin:pa:ss",
        "--max-payload-length",
        "50",
        "--max-result-length",
        "70",
        "--no-engine",
    ])
    .resolve()
    .unwrap();
    assert_eq!(c.listen, "0.0.0.0:9000".parse::<SocketAddr>().unwrap());
    assert_eq!(c.redis.display_address(), "redis.internal:6380/4");
    assert_eq!(c.web.root_path, "/asynq");
    assert!(c.web.read_only);
    assert_eq!(c.web.poll_interval, Duration::from_millis(500));
    assert_eq!(
        c.web.basic_auth,
        Some(("admin".to_string(), "pa:ss".to_string()))
    );
    assert_eq!(
        (c.web.max_payload_length, c.web.max_result_length),
        (50, 70)
    );
    assert!(c.engine.is_none());
    assert!(!format!("{:?}", c.redis).contains("s3cret"));

    let d = |s: &str| {
        parse(&["asynqdeck", "serve", "--poll-interval", s])
            .resolve()
            .unwrap()
            .web
            .poll_interval
    };
    assert_eq!(d("2m"), Duration::from_secs(120));
    assert_eq!(d("7"), Duration::from_secs(7));
    assert_eq!(d("1m30s"), Duration::from_secs(90));
    assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
}

/// asynqmon's flags: `--port 9090` listens on 0.0.0.0:9090 (asynqmon binds
/// every interface); addr/db/password build the connection; the flags work
/// without the word `serve`, as asynqmon's command line has none.
#[test]
fn asynqmon_flags() {
    let c = parse(&[
        "asynqdeck",
        "--port",
        "9090",
        "--redis-addr",
        "10.1.2.3:6390",
        "--redis-db",
        "7",
        "--redis-password",
        "pw",
        "--read-only",
        "--max-payload-length",
        "10",
        "--enable-metrics-exporter",
    ])
    .resolve()
    .unwrap();
    assert_eq!(c.listen, "0.0.0.0:9090".parse::<SocketAddr>().unwrap());
    assert_eq!(c.redis.display_address(), "10.1.2.3:6390/7");
    assert_eq!(c.redis.password.as_deref(), Some("pw"));
    assert!(c.web.read_only);
    assert_eq!(c.web.max_payload_length, 10);
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);

    let c = parse(&["asynqdeck", "serve", "--port", "9090"])
        .resolve()
        .unwrap();
    assert_eq!(c.listen, "0.0.0.0:9090".parse::<SocketAddr>().unwrap());
    // --listen beats --port, with a warning.
    let c = parse(&[
        "asynqdeck",
        "serve",
        "--port",
        "9090",
        "--listen",
        "127.0.0.1:7000",
    ])
    .resolve()
    .unwrap();
    assert_eq!(c.listen, "127.0.0.1:7000".parse::<SocketAddr>().unwrap());
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);

    // TLS: --redis-tls names the server and turns TLS on; insecure too.
    let c = parse(&[
        "asynqdeck",
        "--redis-addr",
        "cache.example:6379",
        "--redis-tls",
        "cache.example",
    ])
    .resolve()
    .unwrap();
    assert!(c.redis.uses_tls() && !c.redis.insecure);
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let c = parse(&["asynqdeck", "--redis-insecure-tls"])
        .resolve()
        .unwrap();
    assert!(c.redis.uses_tls() && c.redis.insecure);
    let c = parse(&["asynqdeck", "--redis-ca-cert", "/tmp/ca.pem"])
        .resolve()
        .unwrap();
    assert_eq!(c.redis_tls_ca.as_deref(), Some("/tmp/ca.pem".as_ref()));

    // --prometheus-addr is accepted and reported as ignored.
    let c = parse(&["asynqdeck", "--prometheus-addr", "http://prom:9090"])
        .resolve()
        .unwrap();
    assert_eq!(c.warnings.len(), 1);
    assert!(
        c.warnings[0].contains("--prometheus-addr"),
        "{:?}",
        c.warnings
    );
}

/// As asynqmon: a URL beats --redis-addr, --redis-db and --redis-password
/// (which are then reported as ignored).
#[test]
fn redis_url_beats_addr_db_password() {
    let c = parse(&[
        "asynqdeck",
        "serve",
        "--redis-url",
        "redis://u:p@url-host:6000/2",
        "--redis-addr",
        "addr-host:7000",
        "--redis-db",
        "9",
        "--redis-password",
        "other",
    ])
    .resolve()
    .unwrap();
    assert_eq!(c.redis.display_address(), "url-host:6000/2");
    assert_eq!(c.redis.password, None);
    assert_eq!(c.warnings.len(), 1);
    assert!(
        c.warnings[0].contains("--redis-addr, --redis-db, --redis-password"),
        "{:?}",
        c.warnings
    );
    assert!(
        parse(&["asynqdeck", "serve", "--redis-url", "rediss://h:1/0"])
            .resolve()
            .unwrap()
            .redis
            .uses_tls()
    );
}

/// Bad values are refused with a clear reason: a duration without a known
/// unit, basic auth without a colon, a malformed address, a zero interval,
/// a client certificate without its key, an unknown flag.
#[test]
fn bad_flags_are_refused() {
    let err = Cli::try_parse_from(["asynqdeck", "serve", "--poll-interval", "5x"]).unwrap_err();
    assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation);
    assert!(err.to_string().contains("invalid duration \"5x\""), "{err}");
    assert_eq!(err.exit_code(), 2);
    let err = Cli::try_parse_from(["asynqdeck", "serve", "--basic-auth", "admin"]).unwrap_err();
    assert!(err.to_string().contains("user:password"), "{err}");
    assert!(Cli::try_parse_from(["asynqdeck", "serve", "--listen", "nowhere"]).is_err());
    assert!(Cli::try_parse_from(["asynqdeck", "serve", "--port", "70000"]).is_err());
    assert!(Cli::try_parse_from(["asynqdeck", "serve", "--bogus"]).is_err());

    let resolve_err = |args: &[&str]| parse(args).resolve().unwrap_err();
    assert!(resolve_err(&["asynqdeck", "--poll-interval", "0s"]).contains("more than zero"));
    assert!(resolve_err(&["asynqdeck", "--redis-addr", "redis://h:1"]).contains("--redis-addr"));
    assert!(
        resolve_err(&["asynqdeck", "--redis-client-cert", "c.pem"]).contains("--redis-client-key")
    );
    assert!(resolve_err(&["asynqdeck", "--root-path", "/a b"]).contains("--root-path"));
    assert!(
        resolve_err(&["asynqdeck", "--redis-url", "redis-sentinel://h:26379"])
            .contains("redis-sentinel:// URL needs ?master=<name>")
    );
}

/// `--redis-cluster-nodes` (asynqmon) names a Redis Cluster: it beats
/// `--redis-url` (with a warning saying so) and keeps the credentials;
/// `--redis-sentinel-addrs` with `--redis-sentinel-master` names a
/// Sentinel-elected master. Combinations that cannot mean one deployment
/// are refused with a reason naming the flags: cluster nodes and sentinels
/// both, sentinels without a master name.
#[test]
fn cluster_and_sentinel_flags_resolve_or_are_refused() {
    let c = parse(&["asynqdeck", "--redis-cluster-nodes", "a:7000, b:7001"])
        .resolve()
        .unwrap();
    assert_eq!(c.redis.display_address(), "cluster a:7000,b:7001");
    assert_eq!(c.redis.cluster_nodes, ["a:7000", "b:7001"]);
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let c = parse(&[
        "asynqdeck",
        "--redis-cluster-nodes",
        "a:7000",
        "--redis-url",
        "redis://h:1/0",
        "--redis-password",
        "pw",
    ])
    .resolve()
    .unwrap();
    assert_eq!(c.redis.display_address(), "cluster a:7000");
    assert_eq!(c.redis.password.as_deref(), Some("pw"));
    assert_eq!(
        c.warnings,
        ["--redis-url/--redis-addr ignored: --redis-cluster-nodes is set and takes precedence"]
    );
    let c = parse(&[
        "asynqdeck",
        "--redis-sentinel-addrs",
        "s1:26379,s2:26379",
        "--redis-sentinel-master",
        "mymaster",
        "--redis-sentinel-password",
        "spw",
        "--redis-username",
        "deck",
        "--redis-db",
        "2",
    ])
    .resolve()
    .unwrap();
    let s = c.redis.sentinel.clone().unwrap();
    assert_eq!(s.password.as_deref(), Some("spw"));
    assert_eq!(c.redis.username.as_deref(), Some("deck"));
    assert_eq!(
        c.redis.display_address(),
        "sentinel s1:26379,s2:26379 master mymaster"
    );
    assert_eq!(c.redis.db, Some(2));

    let err = parse(&[
        "asynqdeck",
        "--redis-cluster-nodes",
        "a:7000",
        "--redis-sentinel-addrs",
        "s1:26379",
        "--redis-sentinel-master",
        "m",
    ])
    .resolve()
    .unwrap_err();
    assert_eq!(
        err,
        "give --redis-cluster-nodes or --redis-sentinel-addrs, not both"
    );
    let err = parse(&["asynqdeck", "--redis-sentinel-addrs", "s1:26379"])
        .resolve()
        .unwrap_err();
    assert_eq!(err, "--redis-sentinel-addrs needs --redis-sentinel-master");
    assert!(matches!(
        Cli::try_parse_from(["asynqdeck", "serve"]).unwrap().command,
        Some(Command::Serve(_))
    ));
}

/// Runs the binary with only `env` as its environment and `args`.
fn run_bin(env: &[(&str, &str)], args: &[&str]) -> std::process::Output {
    std::process::Command::new(BIN)
        .env_clear()
        .envs(env.iter().copied())
        .args(args)
        .output()
        .expect("run asynqdeck")
}

fn print_config(env: &[(&str, &str)], args: &[&str]) -> String {
    let mut all = vec!["serve", "--print-config"];
    all.extend_from_slice(args);
    let out = run_bin(env, &all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Every flag is also an environment variable: asynqmon's (`PORT`,
/// `REDIS_ADDR`, `REDIS_DB`, `REDIS_PASSWORD`, `READ_ONLY`,
/// `MAX_PAYLOAD_LENGTH`, `MAX_RESULT_LENGTH`) and asynqdeck's own
/// (`ASYNQDECK_*`); `REDIS_URL` beats `REDIS_ADDR`; a flag beats its
/// variable; an empty variable counts as unset; passwords are not printed.
/// Checked through the real binary with a cleared environment (no
/// process-wide `set_var` in tests).
#[test]
fn environment_variables() {
    let out = print_config(
        &[
            ("PORT", "9090"),
            ("REDIS_ADDR", "10.0.0.9:6390"),
            ("REDIS_DB", "3"),
            ("REDIS_PASSWORD", "hunter2"),
            ("READ_ONLY", "true"),
            ("MAX_PAYLOAD_LENGTH", "42"),
            ("MAX_RESULT_LENGTH", "43"),
            ("ASYNQDECK_POLL_INTERVAL", "2m"),
            ("ASYNQDECK_ROOT_PATH", "/ops/asynq"),
            ("ASYNQDECK_BASIC_AUTH", "admin:topsecret"),
            ("ASYNQDECK_NO_ENGINE", "1"),
        ],
        &[],
    );
    for want in [
        "listen: 0.0.0.0:9090,",
        "address: \"10.0.0.9:6390/3\",",
        "read_only: true,",
        "max_payload_length: 42,",
        "max_result_length: 43,",
        "poll_interval: 120s,",
        "root_path: \"/ops/asynq\",",
        "engine: None,",
    ] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }
    assert!(
        !out.contains("hunter2") && !out.contains("topsecret"),
        "{out}"
    );

    let out = print_config(
        &[
            ("REDIS_URL", "redis://url-host:6000/2"),
            ("REDIS_ADDR", "addr-host:7000"),
            ("ASYNQDECK_LISTEN", "127.0.0.1:7001"),
            ("PORT", "9090"),
        ],
        &[],
    );
    assert!(out.contains("address: \"url-host:6000/2\","), "{out}");
    assert!(out.contains("listen: 127.0.0.1:7001,"), "{out}");

    // As asynqmon, a variable set to "" counts as unset.
    let out = print_config(
        &[
            ("PORT", ""),
            ("READ_ONLY", ""),
            ("REDIS_TLS", ""),
            ("MAX_PAYLOAD_LENGTH", ""),
        ],
        &[],
    );
    for want in [
        "listen: 127.0.0.1:8080,",
        "read_only: false,",
        "tls: false,",
        "max_payload_length: 200,",
    ] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }

    // A flag beats its variable.
    let out = print_config(
        &[("MAX_PAYLOAD_LENGTH", "42")],
        &["--max-payload-length", "9"],
    );
    assert!(out.contains("max_payload_length: 9,"), "{out}");
}

/// Exit code 2 with clap's message for bad flags and bad variables; also
/// for cluster nodes and sentinels given together (here by variables).
#[test]
fn bad_flags_exit_2() {
    let out = run_bin(&[], &["serve", "--poll-interval", "soon"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid duration \"soon\""));
    let out = run_bin(&[("REDIS_DB", "x")], &["serve"]);
    assert_eq!(out.status.code(), Some(2));
    let out = run_bin(
        &[
            ("REDIS_CLUSTER_NODES", "a:1,b:2"),
            ("REDIS_SENTINEL_ADDRS", "s:26379"),
            ("REDIS_SENTINEL_MASTER", "m"),
        ],
        &["serve"],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("give --redis-cluster-nodes or --redis-sentinel-addrs, not both"),
        "{err}"
    );
}

// -------------------------------------------------------------- end to end

async fn state_of(inspector: &Inspector, queue: &str, id: &str) -> TaskState {
    inspector.get_task_info(queue, id).await.unwrap().state
}

fn metric_line(metrics: &str, line: &str) -> bool {
    metrics.lines().any(|l| l == line)
}

/// S30, S12: `asynqdeck serve` against the private Redis. `/` answers 200
/// and lists the seeded queue; `/metrics` has Go's exporter lines with the
/// exact counts (size 4: 3 pending + 1 retry); the embedded engine registers
/// a server with concurrency 0, status active and the queue at priority 1;
/// its forwarder moves the due retry task to pending within Go's 5 s
/// interval (+2 s slack) and `/metrics` then says pending 4, retry 0;
/// SIGTERM exits 0 and deletes the server's key.
#[tokio::test]
async fn serve_end_to_end_with_engine() {
    let db = support::redis();
    let queue = "cli-e2e";
    seed::due_and_pending(&db, queue, 3).await;
    let inspector = Inspector::connect(&db.url()).await.unwrap();
    assert_eq!(state_of(&inspector, queue, "due").await, TaskState::Retry);

    let serve = ServeBin::spawn(
        &[
            "--redis-url",
            &db.url(),
            "--poll-interval",
            "1s",
            "--listen",
            "127.0.0.1:0",
        ],
        &[],
    )
    .await;
    let started = std::time::Instant::now();

    let (status, body) = serve.get("/").await.parts();
    assert_eq!(status, 200);
    assert!(body.contains(queue), "queue name missing from /");

    let (status, metrics) = serve.get("/metrics").await.parts();
    assert_eq!(status, 200);
    for line in [
        "asynq_queue_size{queue=\"cli-e2e\"} 4",
        "asynq_tasks_enqueued_total{queue=\"cli-e2e\",state=\"pending\"} 3",
        "asynq_tasks_enqueued_total{queue=\"cli-e2e\",state=\"retry\"} 1",
        "asynq_tasks_failed_total{queue=\"cli-e2e\"} 1",
        "asynq_tasks_processed_total{queue=\"cli-e2e\"} 1",
        "asynq_queue_paused_total{queue=\"cli-e2e\"} 0",
    ] {
        assert!(
            metric_line(&metrics, line),
            "missing {line:?} in\n{metrics}"
        );
    }

    // The heartbeat: this process, concurrency 0, every queue.
    let pid = serve.pid();
    let server = support::eventually(Duration::from_secs(5), || async {
        inspector
            .servers()
            .await
            .unwrap()
            .into_iter()
            .find(|s| s.pid == pid)
    })
    .await
    .expect("the dashboard registers as a server");
    assert_eq!(server.concurrency, 0);
    assert_eq!(server.status, "active");
    assert_eq!(
        server.queues,
        [(queue.to_string(), 1)].into_iter().collect()
    );
    assert!(server.active_workers.is_empty());
    let server_key = format!(
        "asynq:servers:{{{}:{}:{}}}",
        server.host, server.pid, server.server_id
    );
    let mut raw = db.raw().await;
    assert!(raw.exists::<_, bool>(&server_key).await.unwrap());

    // The outage sampler's first sample, taken at start: retry 1, archived 0.
    let first: Vec<String> = support::eventually(Duration::from_secs(5), || {
        let mut raw = raw.clone();
        async move {
            let m: Vec<String> = raw
                .zrange("asynqdeck:{cli-e2e}:samples", 0, 0)
                .await
                .unwrap();
            (!m.is_empty()).then_some(m)
        }
    })
    .await
    .expect("the sampler records the queue");
    assert!(first[0].ends_with(":1:0"), "{first:?}");

    // The forwarder (Go's 5 s, first tick one interval after start).
    let moved = support::eventually(Duration::from_secs(7), || async {
        (state_of(&inspector, queue, "due").await == TaskState::Pending).then_some(())
    })
    .await;
    assert!(
        moved.is_some(),
        "due retry task still not pending {:?} after start",
        started.elapsed()
    );
    let after = support::eventually(Duration::from_secs(5), || async {
        let (_, m) = serve.get("/metrics").await.parts();
        metric_line(
            &m,
            "asynq_tasks_enqueued_total{queue=\"cli-e2e\",state=\"pending\"} 4",
        )
        .then_some(m)
    })
    .await
    .expect("metrics follow within the poll interval");
    assert!(metric_line(
        &after,
        "asynq_tasks_enqueued_total{queue=\"cli-e2e\",state=\"retry\"} 0"
    ));
    assert!(metric_line(&after, "asynq_queue_size{queue=\"cli-e2e\"} 4"));

    assert_eq!(serve.terminate().await, Some(0));
    assert!(!raw.exists::<_, bool>(&server_key).await.unwrap());
    assert!(
        inspector
            .servers()
            .await
            .unwrap()
            .iter()
            .all(|s| s.pid != pid)
    );
}

/// `serve --redis-cluster-nodes` against a local 3-master cluster (issue
/// 14): it connects, `/` answers 200 and names each queue, the embedded
/// engine (1 s forwarder) moves a due scheduled task of each of three
/// queues, whose keys live on at least two masters, to pending and
/// registers its server in `asynq:servers`; SIGTERM exits 0 and removes the
/// server's key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_on_a_redis_cluster() {
    let cluster = tokio::task::spawn_blocking(|| LocalCluster::start(3))
        .await
        .unwrap();
    let queues = ["default", "critical", "low"];
    let mut masters: Vec<u16> = queues
        .iter()
        .map(|q| cluster.port_of(&format!("asynq:{{{q}}}:scheduled")))
        .collect();
    masters.sort();
    masters.dedup();
    assert!(masters.len() >= 2, "queues on one master: {masters:?}");
    let client = asynqdeck::Client::connect(&cluster.url()).await.unwrap();
    let inspector = Inspector::connect(&cluster.url()).await.unwrap();
    let mut ids = Vec::new();
    for q in queues {
        let info = client
            .enqueue(
                &asynqdeck::Task::new("t", b"x".to_vec()),
                asynqdeck::EnqueueOptions::new()
                    .queue(q)
                    .process_in(Duration::from_secs(1)),
            )
            .await
            .unwrap();
        assert_eq!(info.state, TaskState::Scheduled);
        ids.push((q, info.id));
    }
    let serve = ServeBin::spawn(
        &[
            "--redis-cluster-nodes",
            &cluster.nodes(),
            "--forwarder-interval",
            "1s",
            "--listen",
            "127.0.0.1:0",
        ],
        &[],
    )
    .await;
    let (status, body) = serve.get("/").await.parts();
    assert_eq!(status, 200, "{body}");
    for q in queues {
        assert!(
            body.contains(&format!(">{q}</a>")),
            "{q} missing from /: {body}"
        );
    }
    for (q, id) in &ids {
        support::eventually(Duration::from_secs(10), || async {
            (state_of(&inspector, q, id).await == TaskState::Pending).then_some(())
        })
        .await
        .unwrap_or_else(|| panic!("the task of {q} was not forwarded"));
    }
    let pid = serve.pid();
    let mut raw =
        redis::cluster::ClusterClient::new(vec![format!("redis://127.0.0.1:{}", cluster.ports[0])])
            .unwrap()
            .get_async_connection()
            .await
            .unwrap();
    let server_key = support::eventually(Duration::from_secs(10), || {
        let mut raw = raw.clone();
        async move {
            let members: Vec<String> = raw.zrange(keys::ALL_SERVERS, 0, -1).await.unwrap();
            members
                .into_iter()
                .find(|m| m.contains(&format!(":{pid}:")))
        }
    })
    .await
    .expect("the engine registers its server");
    assert!(raw.exists::<_, bool>(&server_key).await.unwrap());
    assert_eq!(serve.terminate().await, Some(0));
    assert!(!raw.exists::<_, bool>(&server_key).await.unwrap());
}

/// `--no-engine`: the dashboard serves but moves nothing and registers no
/// server — the due retry task is still in retry after several forwarder
/// intervals (1 s, set by the hidden test flag).
#[tokio::test]
async fn no_engine_moves_nothing() {
    let db = support::redis();
    let queue = "cli-no-engine";
    seed::due_and_pending(&db, queue, 0).await;
    let inspector = Inspector::connect(&db.url()).await.unwrap();
    let serve = ServeBin::spawn(
        &[
            "--redis-url",
            &db.url(),
            "--no-engine",
            "--forwarder-interval",
            "1s",
            "--listen",
            "127.0.0.1:0",
        ],
        &[],
    )
    .await;
    let (status, body) = serve.get("/").await.parts();
    assert_eq!(status, 200);
    assert!(body.contains(queue));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(state_of(&inspector, queue, "due").await, TaskState::Retry);
    assert!(inspector.servers().await.unwrap().is_empty());
    assert_eq!(serve.terminate().await, Some(0));
}

/// The same seed with the engine and a 1 s forwarder interval: moved within
/// 3 s (the control for `no_engine_moves_nothing`).
#[tokio::test]
async fn engine_forwards_with_short_interval() {
    let db = support::redis();
    let queue = "cli-fast";
    seed::due_and_pending(&db, queue, 0).await;
    let inspector = Inspector::connect(&db.url()).await.unwrap();
    let serve = ServeBin::spawn(
        &[
            "--redis-url",
            &db.url(),
            "--forwarder-interval",
            "1s",
            "--listen",
            "127.0.0.1:0",
        ],
        &[],
    )
    .await;
    let moved = support::eventually(Duration::from_secs(3), || async {
        (state_of(&inspector, queue, "due").await == TaskState::Pending).then_some(())
    })
    .await;
    assert!(moved.is_some());
    assert_eq!(serve.terminate().await, Some(0));
}

/// A Redis that does not answer: exit code 1 and one line on stderr naming
/// the address (no credentials, no panic).
#[test]
fn redis_down_is_one_clear_line() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = run_bin(
        &[],
        &[
            "serve",
            "--redis-url",
            &format!("redis://user:pw@127.0.0.1:{port}/3"),
            "--listen",
            "127.0.0.1:0",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!(
            "error: cannot connect to Redis at 127.0.0.1:{port}/3: "
        )),
        "{err}"
    );
    assert!(!err.contains("pw@") && !err.contains("panicked"), "{err}");
    assert!(out.stdout.is_empty());
}

/// A TLS Redis (redis-server with `--tls-port`, certificates made here):
/// `--redis-tls-ca` with the CA file connects and serves; without it the
/// certificate is refused (exit 1, "UnknownIssuer").
#[tokio::test]
async fn tls_with_ca_file() {
    let dir = std::env::temp_dir().join(format!("asynqdeck-cli-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "asynqdeck test CA");
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let server_key = rcgen::KeyPair::generate().unwrap();
    let server_cert =
        rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .unwrap()
            .signed_by(&server_key, &issuer)
            .unwrap();
    let (ca, cert, key) = (
        dir.join("ca.pem"),
        dir.join("server.pem"),
        dir.join("server.key"),
    );
    std::fs::write(&ca, ca_cert.pem()).unwrap();
    std::fs::write(&cert, server_cert.pem()).unwrap();
    std::fs::write(&key, server_key.serialize_pem()).unwrap();

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let redis = std::process::Command::new("redis-server")
        .args(["--port", "0", "--tls-port", &port.to_string()])
        .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .arg("--tls-cert-file")
        .arg(&cert)
        .arg("--tls-key-file")
        .arg(&key)
        .arg("--tls-ca-cert-file")
        .arg(&ca)
        .args(["--tls-auth-clients", "no"])
        .arg("--dir")
        .arg(&dir)
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server");
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _redis = Kill(redis);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "TLS redis-server did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    let addr = format!("127.0.0.1:{port}");
    let out = run_bin(
        &[],
        &[
            "serve",
            "--redis-url",
            &format!("rediss://{addr}/0"),
            "--listen",
            "127.0.0.1:0",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("UnknownIssuer"), "{err}");

    // asynqmon's spelling: --redis-addr + --redis-tls + --redis-ca-cert.
    let serve = ServeBin::spawn(
        &[
            "--redis-addr",
            &addr,
            "--redis-tls",
            "127.0.0.1",
            "--redis-ca-cert",
            ca.to_str().unwrap(),
            "--no-engine",
            "--listen",
            "127.0.0.1:0",
        ],
        &[],
    )
    .await;
    let (status, _) = serve.get("/").await.parts();
    assert_eq!(status, 200);
    let (status, _) = serve.get("/metrics").await.parts();
    assert_eq!(status, 200);
    assert_eq!(serve.terminate().await, Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}

/// S30, library API: `Maintenance::new(broker, config).run(shutdown)` lists
/// the queues before every tick, so a queue created after start gets its
/// due retry task forwarded and appears in the published server entry
/// (concurrency 0, priority 1, the engine's identity); cancelling the token
/// ends `run` and deletes the entry.
#[tokio::test]
async fn maintenance_picks_up_new_queues() {
    let db = support::redis();
    seed::due_and_pending(&db, "early", 0).await;
    let broker = Broker::connect(&db.url()).await.unwrap();
    let inspector = Inspector::connect(&db.url()).await.unwrap();
    let config = MaintenanceConfig {
        forwarder_interval: Duration::from_millis(200),
        heartbeat_interval: Duration::from_millis(200),
        sample_interval: None,
        ..MaintenanceConfig::default()
    };
    let engine = Maintenance::new(broker, config);
    let id = engine.identity().clone();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let run = tokio::spawn(engine.run(shutdown.clone()));

    let pending = |q: &'static str| {
        let inspector = inspector.clone();
        async move { (state_of(&inspector, q, "due").await == TaskState::Pending).then_some(()) }
    };
    assert!(
        support::eventually(Duration::from_secs(3), || pending("early"))
            .await
            .is_some()
    );
    seed::due_and_pending(&db, "late", 0).await;
    assert!(
        support::eventually(Duration::from_secs(3), || pending("late"))
            .await
            .is_some()
    );

    let server = support::eventually(Duration::from_secs(3), || async {
        inspector
            .servers()
            .await
            .unwrap()
            .into_iter()
            .find(|s| s.server_id == id.server_id && s.queues.len() == 2)
    })
    .await
    .expect("both queues published");
    assert_eq!(
        (server.host.as_str(), server.pid),
        (id.host.as_str(), id.pid)
    );
    assert_eq!(server.concurrency, 0);
    assert_eq!(
        server.queues,
        [("early".to_string(), 1), ("late".to_string(), 1)]
            .into_iter()
            .collect()
    );

    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("run ends after cancel")
        .unwrap();
    assert!(inspector.servers().await.unwrap().is_empty());
}
