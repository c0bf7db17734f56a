//! The `asynqdeck` binary: parses the command line, sets up logging and
//! hands over to [`asynqdeck::cli::main`].

use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    // As asynqmon, a variable set to "" (`PORT=` in a compose file) counts
    // as unset.
    for name in asynqdeck::cli::Cli::env_names() {
        if std::env::var_os(&name).is_some_and(|v| v.is_empty()) {
            // SAFETY: main has not started any other thread yet.
            unsafe { std::env::remove_var(&name) };
        }
    }
    // Bad flags exit here with clap's usage message and code 2.
    let cli = asynqdeck::cli::Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    asynqdeck::cli::main(cli)
}
