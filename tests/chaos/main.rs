//! The chaos suite of issue 12 (figures and method: RELIABILITY.md).
//!
//! A test binary of its own with its own `main` (`harness = false`): the
//! SIGKILL scenario needs a worker *process*, so this binary re-executes
//! itself with `ASYNQDECK_CHAOS_ROLE=worker` (`worker.rs`); with no role it
//! runs the scenarios one after another (each measures time or throughput,
//! so they must not share the two CPUs with each other), prints each one's
//! figures and `ok` or `FAILED`, then a closing `N passed, N failed` line,
//! and exits non-zero when one failed.
//!
//! ```sh
//! cargo test --test chaos                      # every asynqdeck scenario (< 5 min)
//! cargo test --test chaos -- sigkill           # scenarios whose name contains "sigkill"
//! cargo test --test chaos -- --go              # also the Go asynq v0.26.0 runs (RELIABILITY.md)
//! cargo test --test chaos -- --list
//! ```
//!
//! Every Redis is a private redis-server on a free loopback port and a
//! private directory, killed with the suite (`procs.rs`).

#[path = "../support/mod.rs"]
mod support;

mod aof_restart;
mod client_kill;
mod corrupt;
mod dashboard_down;
mod go_dashboard;
mod go_worker;
mod http;
mod procs;
mod record;
mod sigkill;
mod worker;

use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::time::Instant;

/// A scenario's body: panics (an assertion) when it fails.
type Body = fn() -> Pin<Box<dyn Future<Output = ()>>>;

struct Scenario {
    name: &'static str,
    /// Runs Go asynq (the peer), only with `--go`.
    go: bool,
    body: Body,
}

macro_rules! scenario {
    ($name:ident, $go:expr, $f:path) => {
        Scenario {
            name: stringify!($name),
            go: $go,
            body: || Box::pin($f()),
        }
    };
}

fn scenarios() -> Vec<Scenario> {
    vec![
        scenario!(sigkill_worker_mid_flight, false, sigkill::asynqdeck),
        scenario!(redis_aof_restart_under_load, false, aof_restart::run),
        scenario!(client_kill_storm_throughput, false, client_kill::asynqdeck),
        scenario!(dashboard_with_redis_down_20s, false, dashboard_down::run),
        scenario!(corrupt_data_every_state, false, corrupt::run),
        scenario!(go_sigkill_worker_mid_flight, true, sigkill::go_peer),
        scenario!(go_client_kill_storm_throughput, true, client_kill::go_peer),
        scenario!(go_aof_restart_under_load, true, aof_restart::go_peer),
        scenario!(go_corrupt_data_every_state, true, corrupt::go_peer),
        scenario!(go_dashboard_with_redis_down_20s, true, go_dashboard::run),
    ]
}

fn main() -> ExitCode {
    if std::env::var_os(worker::ROLE_VAR).is_some() {
        worker::run_role();
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let with_go = args.iter().any(|a| a == "--go");
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    // A failed assertion prints its message and place, not a backtrace
    // (scenarios print their own figures).
    std::panic::set_hook(Box::new(|info| {
        let at = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("(no message)");
        eprintln!("panicked at {at}: {msg}");
    }));
    let all = scenarios();
    if args.iter().any(|a| a == "--list") {
        for s in &all {
            println!("{}: test", s.name);
        }
        return ExitCode::SUCCESS;
    }
    let chosen: Vec<&Scenario> = all
        .iter()
        .filter(|s| filters.is_empty() || filters.iter().any(|f| s.name.contains(f.as_str())))
        .filter(|s| with_go || !s.go)
        .collect();
    println!("\nrunning {} chaos scenarios", chosen.len());
    let (mut passed, mut failed) = (0, 0);
    let started = Instant::now();
    for s in chosen {
        println!("\n--- {}", s.name);
        let t = Instant::now();
        let result = std::panic::catch_unwind(|| {
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on((s.body)())
        });
        let secs = t.elapsed().as_secs_f64();
        match result {
            Ok(()) => {
                passed += 1;
                println!("test {} ... ok ({secs:.1} s)", s.name);
            }
            Err(_) => {
                failed += 1;
                println!("test {} ... FAILED ({secs:.1} s)", s.name);
            }
        }
    }
    println!(
        "\nchaos: {passed} passed, {failed} failed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
