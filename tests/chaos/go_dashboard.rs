//! Redis down for 20 s while asynqmon v0.7.2 (the Go dashboard asynqdeck
//! re-implements) is polled: the `dashboard_down` scenario's data and
//! outage, with asynqmon's JSON routes (`/api/...`) and its UI root in
//! place of ours, for RELIABILITY.md.
//!
//! asynqmon is built on first use from the Go module proxy
//! (`go install github.com/hibiken/asynqmon/cmd/asynqmon@v0.7.2` into a
//! temporary directory outside the repository, then copied to
//! `target/asynqmon`); it is never committed. When it cannot be built the
//! scenario fails with the reason (it is not counted as passed). Reports
//! Go's figures; asserts only that the run measured them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::http::request;
use super::procs::{Guard, RedisProc, free_port, spawn};
use super::record::{figure, wait_until};

const DOWN_FOR: Duration = Duration::from_secs(20);
const TIMEOUT: Duration = Duration::from_secs(10);
const MODULE: &str = "github.com/hibiken/asynqmon/cmd/asynqmon@v0.7.2";

/// `target/asynqmon`, built from the module proxy when absent.
fn asynqmon() -> PathBuf {
    let out = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join("asynqmon");
    if out.exists() {
        return out;
    }
    let tmp = std::env::temp_dir().join(format!("asynqdeck-asynqmon-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let status = Command::new("go")
        .current_dir(&tmp)
        .env("GOBIN", &tmp)
        .args(["install", MODULE])
        .status()
        .unwrap_or_else(|e| panic!("cannot run `go install {MODULE}`: {e}"));
    assert!(status.success(), "`go install {MODULE}` failed: {status}");
    std::fs::copy(tmp.join("asynqmon"), &out).unwrap();
    let _ = std::fs::remove_dir_all(&tmp);
    out
}

/// asynqmon's GET routes over the seeded queue `web` (handler.go of
/// v0.7.2), and its UI root.
fn routes(subject: &super::support::routes::Subject) -> Vec<String> {
    let q = &subject.queue;
    let mut r: Vec<String> = [
        "/",
        "/api/queues",
        "/api/queue_stats",
        "/api/servers",
        "/api/scheduler_entries",
        "/api/redis_info",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    r.push(format!("/api/queues/{q}"));
    r.push(format!("/api/queues/{q}/groups"));
    for tab in [
        "active",
        "pending",
        "scheduled",
        "retry",
        "archived",
        "completed",
    ] {
        r.push(format!("/api/queues/{q}/{tab}_tasks"));
    }
    r.push(format!(
        "/api/queues/{q}/groups/{}/aggregating_tasks",
        subject.group
    ));
    for (_, id) in &subject.tasks {
        r.push(format!("/api/queues/{q}/tasks/{id}"));
    }
    r
}

pub async fn run() {
    let name = "go_dashboard_down";
    let bin = asynqmon();
    let mut redis = RedisProc::start(true);
    let subject = super::dashboard_down::outage_subject(&redis.url()).await;
    let routes = routes(&subject);

    let port = free_port();
    let mut cmd = Command::new(bin);
    cmd.args(["--port", &port.to_string(), "--redis-addr", &redis.addr()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let _mon = Guard(spawn(cmd));
    let listening = wait_until(Duration::from_secs(30), || async {
        request(port, "GET", "/api/queues", &[], None, TIMEOUT)
            .await
            .0
            == 200
    })
    .await;
    assert!(listening, "asynqmon did not answer on port {port}");

    let mut baseline = BTreeMap::new();
    for r in &routes {
        let (status, _) = request(port, "GET", r, &[], None, TIMEOUT).await;
        baseline.insert(r.clone(), status);
    }

    redis.kill();
    let down_at = Instant::now();
    let mut polls = 0usize;
    let mut statuses: BTreeMap<u16, usize> = BTreeMap::new();
    let mut by_route: BTreeMap<String, BTreeMap<u16, usize>> = BTreeMap::new();
    let mut sample_500 = None;
    let mut slowest = Duration::ZERO;
    while down_at.elapsed() < DOWN_FOR {
        for r in &routes {
            let t = Instant::now();
            let (status, body) = request(port, "GET", r, &[], None, TIMEOUT).await;
            slowest = slowest.max(t.elapsed());
            polls += 1;
            *statuses.entry(status).or_default() += 1;
            *by_route
                .entry(r.clone())
                .or_default()
                .entry(status)
                .or_default() += 1;
            if status == 500 && sample_500.is_none() {
                let text: String = String::from_utf8_lossy(&body).chars().take(160).collect();
                sample_500 = Some(format!("GET {r}: {}", text.trim()));
            }
        }
    }
    let (redis, back_at) = tokio::task::spawn_blocking(move || {
        let at = redis.up();
        (redis, at)
    })
    .await
    .unwrap();

    let recovered = super::dashboard_down::recovery_times(port, &routes, &baseline, back_at).await;
    drop(redis);
    let worst = recovered.iter().max_by_key(|(_, d)| *d).unwrap().clone();

    figure(name, "routes", routes.len());
    figure(name, "baseline_statuses", format!("{baseline:?}"));
    figure(name, "polls_while_down", polls);
    figure(name, "statuses_while_down", format!("{statuses:?}"));
    for (r, s) in &by_route {
        println!("  while down: {r} {s:?}");
    }
    if let Some(s) = &sample_500 {
        println!("  a 500 body: {s}");
    }
    figure(
        name,
        "slowest_response_while_down_s",
        format!("{:.2}", slowest.as_secs_f64()),
    );
    figure(
        name,
        "worst_recovery_s",
        format!("{:.3} ({})", worst.1.as_secs_f64(), worst.0),
    );
    assert!(polls > 0, "no poll while Redis was down");
}
