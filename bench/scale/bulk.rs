//! The bulk-action run that scenarios 2 (`delete_all.rs`) and 3
//! (`run_all.rs`) share, on a set the scenario seeded:
//! 1. the dashboard starts and gets 5 s to start up; the slow log is armed
//!    (every command of ≥ 10 ms);
//! 2. the Go producer (`asynq-peer latency`, 200 enqueues/s into queue
//!    `other`) starts, 2 s before the action;
//! 3. the action: ours `POST /api/jobs` (a background job) when it answers
//!    202, then `GET /api/jobs/{id}` every 250 ms until the job's `phase` is
//!    finished; otherwise (today's main has no `/api/jobs`) the asynqmon
//!    route on ours; asynqmon its own route. The answer's status and time
//!    are recorded; while it is in flight the set's size is polled every
//!    100 ms (LLEN/ZCARD), giving the time until it is empty;
//! 4. 1 s after the set is empty (and any job finished) the producer stops
//!    and prints its latency; the slow log is read; the dashboard stops.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::Env;
use crate::http::{self, Reply};
use crate::procs::{Dashboard, Latency, Producer, Side};
use crate::redis_stats::{Slow, slowlog_arm, slowlog_read};
use crate::seed;

/// The queue the bulk scenarios act on.
pub const QUEUE: &str = "q";

/// One bulk action, in both dashboards' terms.
#[derive(Clone, Copy)]
pub struct Action {
    /// The tab: `pending` or `retry`.
    pub state: &'static str,
    /// The job action: `delete` or `run`.
    pub action: &'static str,
    /// asynqmon's route: method and path.
    pub method: &'static str,
    pub path: &'static str,
}

/// What one dashboard's action did.
pub struct Run {
    pub side: Side,
    /// The route(s) used, e.g. "`POST /api/jobs` → job".
    pub route: String,
    /// The answer that started the work (the job's 202, or the
    /// synchronous route's answer).
    pub status: u16,
    pub answer_ms: f64,
    pub answer: String,
    /// Seconds from the request to an empty set (None: not empty by the
    /// deadline).
    pub empty_s: Option<f64>,
    /// The job's end: phase, done/total, skipped and failed.
    pub job: Option<String>,
    /// Tasks left in the set at the end (None: Redis did not say).
    pub left: Option<u64>,
    /// The bench's size polls (every 100 ms) Redis refused, e.g. with BUSY
    /// while a script ran past `lua-time-limit`.
    pub refused: u64,
    pub slow: Slow,
    pub producer: Latency,
}

/// The first `id`, `job_id` or `job.id` in a JSON answer.
fn job_id(v: &Value) -> Option<String> {
    v.get("id")
        .or_else(|| v.get("job_id"))
        .or_else(|| v.get("job").and_then(|j| j.get("id")))
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// The progress of a job answer (top level or under `job`).
#[derive(Clone, Debug)]
struct Progress {
    phase: String,
    done: u64,
    total: u64,
    skipped: u64,
    failed: u64,
}

fn job_progress(v: &Value) -> Option<Progress> {
    let j = if v.get("phase").is_some() {
        v
    } else {
        v.get("job")?
    };
    let n = |k: &str| j.get(k).and_then(Value::as_u64).unwrap_or(0);
    Some(Progress {
        phase: j.get("phase")?.as_str()?.to_string(),
        done: n("done"),
        total: n("total"),
        skipped: n("skipped"),
        failed: n("failed"),
    })
}

fn finished(phase: &str) -> bool {
    matches!(phase, "done" | "failed" | "cancelled")
}

/// Starts the action on the dashboard `side` at `addr`: `(route, reply,
/// job id)`.
async fn start(
    side: Side,
    addr: &str,
    a: Action,
) -> anyhow::Result<(String, Reply, Option<String>)> {
    let asynqmon_route = format!("`{} {}`", a.method, a.path);
    if side == Side::Ours {
        let body = format!(
            r#"{{"queue":"{QUEUE}","state":"{}","action":"{}"}}"#,
            a.state, a.action
        );
        let r = http::request(addr, "POST", "/api/jobs", Some(&body)).await?;
        if r.status == 202 {
            let id = job_id(&r.json());
            return Ok(("`POST /api/jobs` (job)".into(), r, id));
        }
        eprintln!(
            "bench_scale:   POST /api/jobs answered {} ({}); using {asynqmon_route}",
            r.status,
            r.excerpt(80)
        );
        let jobs_status = r.status;
        let r = http::request(addr, a.method, a.path, None).await?;
        let id = job_id(&r.json());
        return Ok((
            format!("{asynqmon_route} (`POST /api/jobs` answered {jobs_status})"),
            r,
            id,
        ));
    }
    let r = http::request(addr, a.method, a.path, None).await?;
    Ok((asynqmon_route, r, None))
}

pub async fn run(env: &mut Env, side: Side, a: &Action) -> anyhow::Result<Run> {
    let d = Dashboard::start(&env.tools, side, env.port).await?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    slowlog_arm(&mut env.admin).await?;
    let producer = Producer::start(&env.tools, env.port, env.opts.rate)?;
    tokio::time::sleep(Duration::from_secs(2)).await;

    let t0 = Instant::now();
    let mut request = {
        let (addr, side, a) = (d.addr.clone(), d.side, *a);
        tokio::spawn(async move {
            let t = Instant::now();
            // A failed exchange (reset, timeout) is a row, not the end of
            // the bench: status 0 and the error as the answer.
            start(side, &addr, a).await.or_else(|e| {
                let failed = Reply {
                    status: 0,
                    body: format!("{e:#}").into_bytes(),
                    took: t.elapsed(),
                };
                anyhow::Ok((format!("`{} {}` (failed)", a.method, a.path), failed, None))
            })
        })
    };
    let deadline = t0 + env.opts.bulk_timeout;
    let mut empty_s = None;
    let mut started: Option<(String, Reply, Option<String>)> = None;
    let mut job_end: Option<Progress> = None;
    let mut refused = 0;
    loop {
        if started.is_none() && request.is_finished() {
            started = Some((&mut request).await??);
        }
        if empty_s.is_none() {
            // A script running past lua-time-limit (5 s) makes Redis answer
            // BUSY to everyone, this poll included: counted, not fatal.
            match seed::size(&mut env.admin, QUEUE, a.state).await {
                Ok(0) => empty_s = Some(t0.elapsed().as_secs_f64()),
                Ok(_) => {}
                Err(e) => {
                    if refused == 0 {
                        eprintln!("bench_scale:   Redis refused the size poll: {e}");
                    }
                    refused += 1;
                }
            }
        }
        if let Some((_, _, Some(id))) = &started
            && job_end.as_ref().is_none_or(|p| !finished(&p.phase))
            && let Ok(r) = http::get(&d.addr, &format!("/api/jobs/{id}")).await
        {
            job_end = job_progress(&r.json()).or(job_end);
        }
        let job_done = match &started {
            None => false,
            Some((_, _, None)) => true,
            Some((_, _, Some(_))) => job_end.as_ref().is_some_and(|p| finished(&p.phase)),
        };
        if (empty_s.is_some() && job_done) || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if started.is_none() {
        // The synchronous answer is still out at the deadline.
        request.abort();
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let lat = producer.finish().await?;
    let slow = slowlog_read(&mut env.admin).await?;
    let left = seed::size(&mut env.admin, QUEUE, a.state).await.ok();
    d.stop().await;
    let (route, status, answer_ms, answer) = match started {
        Some((route, r, _)) => (route, r.status, r.ms(), r.excerpt(100)),
        None => (
            "(no answer by the deadline)".into(),
            0,
            f64::NAN,
            String::new(),
        ),
    };
    Ok(Run {
        side,
        route,
        status,
        answer_ms,
        answer,
        empty_s,
        job: job_end.map(|p| {
            format!(
                "{} {}/{} (skipped {}, failed {})",
                p.phase, p.done, p.total, p.skipped, p.failed
            )
        }),
        left,
        refused,
        slow,
        producer: lat,
    })
}

pub fn print(title: &str, n: usize, runs: &[Run], rate: u32) {
    println!(
        "### {title}\n\n\
         {n} tasks in queue `{QUEUE}`. The Go producer enqueues {rate}/s into queue `other` \
         from 2 s before the action to 1 s after the set is empty (latency from the scheduled \
         send to Enqueue's return, over every enqueue: a failed one counts with its time to \
         fail). SLOWLOG: commands of ≥ 10 ms from the action's start.\n"
    );
    println!(
        "| dashboard | route | answer status | answer ms | set empty after s | job | left | size polls refused | SLOWLOG ≥ 10 ms | longest ms (command) | producer p50 / p99 / max ms | producer > 20 ms | producer errors (sent); p99 of the successful |"
    );
    println!("|---|---|---:|---:|---:|---|---:|---:|---:|---|---|---:|---|");
    for r in runs {
        let empty = r
            .empty_s
            .map_or_else(|| "not empty".to_string(), |s| format!("{s:.1}"));
        let errors = if r.producer.errors == 0 {
            format!("0 ({})", r.producer.sent)
        } else {
            format!(
                "{} ({}): {}; ok p99 {:.1} ms",
                r.producer.errors,
                r.producer.sent,
                r.producer.error_samples.join("; "),
                r.producer.ok_p99_ms
            )
        };
        println!(
            "| {} | {} | {} | {:.0} | {empty} | {} | {} | {} | {} | {:.1} ({}) | {:.1} / {:.1} / {:.1} | {} | {errors} |",
            r.side.name(),
            r.route,
            r.status,
            r.answer_ms,
            r.job.as_deref().unwrap_or("—"),
            r.left.map_or("?".to_string(), |n| n.to_string()),
            r.refused,
            r.slow.count,
            r.slow.longest_ms,
            if r.slow.longest.is_empty() {
                "—"
            } else {
                &r.slow.longest
            },
            r.producer.p50_ms,
            r.producer.p99_ms,
            r.producer.max_ms,
            r.producer.over_20ms,
        );
    }
    println!();
    for r in runs.iter().filter(|r| !r.answer.is_empty()) {
        println!(
            "- {} answered: `{}`",
            r.side.name(),
            r.answer.replace('`', "'")
        );
    }
    println!();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The job id is found in `POST /api/jobs`'s answer (the job itself) and
    /// in an asynqmon route's answer for a big set (`{"deleted":0,"job":…}`);
    /// asynqmon's own answers have none.
    #[test]
    fn job_ids_and_progress() {
        let job = serde_json::json!({"id": "j1", "phase": "running", "done": 5, "total": 9, "skipped": 1, "failed": 2});
        assert_eq!(job_id(&job).as_deref(), Some("j1"));
        let wrapped = serde_json::json!({"deleted": 0, "job": job});
        assert_eq!(job_id(&wrapped).as_deref(), Some("j1"));
        assert_eq!(job_id(&serde_json::json!({"deleted": 20000})), None);
        for v in [&job, &wrapped] {
            let p = job_progress(v).unwrap();
            assert_eq!(
                (p.phase.as_str(), p.done, p.total, p.skipped, p.failed),
                ("running", 5, 9, 1, 2)
            );
        }
        assert!(job_progress(&serde_json::json!({"deleted": 1})).is_none());
        assert!(finished("done") && finished("failed") && finished("cancelled"));
        assert!(!finished("running") && !finished("queued") && !finished("cancelling"));
    }
}
