//! The `asynqdeck` command line: `asynqdeck serve` runs the dashboard and
//! the embedded maintenance engine in one process.
//!
//! This module only parses and dispatches. [`Cli`] is the clap parser (the
//! binary only parses, sets up logging and calls [`main`]);
//! [`ServeArgs::resolve`] turns flags into a [`ServeConfig`] without
//! touching the network, and [`serve`] (in [`crate::app`], re-exported
//! here) runs it, so both are testable in-process. `demo` runs through
//! [`crate::demo::run`]; `export` writes a tab's tasks (`export.rs`).
//! Files: `serve_args.rs` (the `serve` flags and
//! their resolution), `demo_args.rs` (the `demo` flags), `values.rs` (value parsers: durations, root path,
//! host names, basic auth).
//!
//! Every flag is also an environment variable. asynqmon's flags and
//! variables (`--port`/`PORT`, `--redis-addr`/`REDIS_ADDR`,
//! `--redis-db`/`REDIS_DB`, `--redis-password`/`REDIS_PASSWORD`,
//! `--redis-tls`/`REDIS_TLS`, `--redis-insecure-tls`, `--redis-ca-cert`,
//! `--redis-client-cert`/`--redis-client-key`, `--redis-url`, `--read-only`,
//! `--max-payload-length`, `--max-result-length`,
//! `--enable-metrics-exporter`, `--prometheus-addr`,
//! `--redis-cluster-nodes`) are accepted with asynqmon's meaning, and the
//! flags work without the `serve` word too (`asynqdeck --port 8080`), so
//! asynqdeck replaces asynqmon in an existing deployment. As with asynqmon,
//! a variable set to the empty string counts as unset (the binary drops
//! such variables before parsing; see [`Cli::env_names`]). Differences:
//! `--listen` defaults to 127.0.0.1:8080 (asynqmon binds every interface;
//! `--port N` still does); an invalid value in a variable is an error, where
//! asynqmon silently falls back to the default. Redis Cluster
//! (`--redis-cluster-nodes`, `redis-cluster://`) and Sentinel
//! (`--redis-sentinel-*`, `redis-sentinel://`) work for `serve` and `demo`.
//!
//! Exit codes: 0 after SIGINT/SIGTERM, 2 for bad flags (clap's usage
//! errors and [`ServeArgs::resolve`] errors), 1 when Redis does not answer,
//! the listen address cannot be bound, or a TLS file cannot be read.

mod demo_args;
mod export;
mod serve_args;
mod values;

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

pub use crate::app::{ServeConfig, ServeError, serve, serve_with};
pub use crate::server::shutdown_signal;
pub use demo_args::DemoArgs;
pub use export::ExportArgs;
pub use serve_args::ServeArgs;
pub use values::parse_duration;

/// Default `--listen` address.
pub const DEFAULT_LISTEN: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8080);

/// `asynqdeck`: dashboard and worker engine for asynq queues.
#[derive(Debug, Parser)]
#[command(
    name = "asynqdeck",
    version,
    about = "Dashboard for asynq task queues (Go asynq v0.26.0 compatible), with the maintenance engine embedded",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// What to run; without one, `serve` with the flags given (as asynqmon).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// `serve` flags given without the `serve` word.
    #[command(
        flatten,
        next_help_heading = "Serve options (also accepted without the word `serve`, as asynqmon)"
    )]
    pub serve: ServeArgs,
}

impl Cli {
    /// Names of every environment variable the flags read.
    pub fn env_names() -> Vec<std::ffi::OsString> {
        let cmd = Cli::command();
        let mut names: Vec<std::ffi::OsString> = cmd
            .get_arguments()
            .chain(cmd.get_subcommands().flat_map(|s| s.get_arguments()))
            .filter_map(|a| a.get_env().map(|e| e.to_os_string()))
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// The `serve` arguments, whether or not the word `serve` was given
    /// (`None` for another subcommand).
    pub fn into_serve_args(self) -> Option<ServeArgs> {
        match self.command {
            Some(Command::Serve(args)) => Some(*args),
            None => Some(self.serve),
            Some(Command::Demo(_) | Command::Export(_)) => None,
        }
    }
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the dashboard (HTML, /api, /metrics) and run the maintenance
    /// engine (forwarder, recoverer, janitor, heartbeat) until SIGINT/SIGTERM.
    Serve(Box<ServeArgs>),
    /// Run the demo: dashboard, embedded engine, workers whose handlers act
    /// out the retry stories (network errors, partner outages, rate limits,
    /// invalid orders, duplicates, panics) and a producer. Uses --redis-url
    /// (or --redis-cluster-nodes, or --redis-sentinel-addrs with
    /// --redis-sentinel-master), else 127.0.0.1:6379 when it answers, else a
    /// private redis-server.
    Demo(DemoArgs),
    /// Write every task of one tab of a queue (default: archived) as NDJSON
    /// or CSV to stdout or --output, with the tab's filters and --since
    /// (S31). Takes the Redis flags of `serve`.
    Export(Box<ExportArgs>),
}

/// Runs a parsed command line to its end: resolves the flags (exiting 2 with
/// clap's usage message on an error), starts a Tokio runtime and [`serve`]s
/// until SIGINT/SIGTERM. Prints a one-line `error: ...` on stderr and
/// returns exit code 1 when serving fails.
pub fn main(cli: Cli) -> ExitCode {
    if let Some(Command::Export(args)) = &cli.command {
        return export::run(args);
    }
    if let Some(Command::Demo(d)) = &cli.command {
        let redis = match d.redis_options() {
            Ok(r) => r,
            Err(msg) => Cli::command()
                .error(clap::error::ErrorKind::ValueValidation, msg)
                .exit(),
        };
        let opts = crate::demo::DemoOptions {
            redis,
            listen: d.listen,
            poll_interval: d.poll_interval,
            workload: crate::demo::DemoConfig {
                outage_every: d.outage_every,
                outage_for: d.outage_for,
                rate_per_sec: d.rate,
            },
        };
        return run_blocking(crate::demo::run(opts, shutdown_signal()));
    }
    let Some(args) = cli.into_serve_args() else {
        unreachable!("only demo and export have no serve arguments")
    };
    let config = match args.resolve() {
        Ok(c) => c,
        Err(msg) => Cli::command()
            .error(clap::error::ErrorKind::ValueValidation, msg)
            .exit(),
    };
    if args.print_config {
        let mut shown = config.clone();
        if let Some((_, pw)) = &mut shown.web.basic_auth {
            *pw = "<redacted>".to_string();
        }
        // A webhook URL's path is its secret: show the host only.
        for url in &mut shown.web.alerts.webhooks {
            *url = format!("<{} redacted>", crate::web::alerts::host_of(url));
        }
        println!("{shown:#?}");
        return ExitCode::SUCCESS;
    }
    run_blocking(serve(config, shutdown_signal()))
}

/// Runs `fut` on a new multi-threaded runtime; prints `error: ...` and
/// returns its exit code on failure.
fn run_blocking(fut: impl Future<Output = Result<(), ServeError>>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the Tokio runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(fut) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
