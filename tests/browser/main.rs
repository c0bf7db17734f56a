//! Browser end-to-end tests (issue 5 item 3): the real `asynqdeck` binary
//! (`serve` on data seeded here, or `demo` with its workers and producer)
//! driven in a real headless Chromium through chromedriver (Debian's
//! `chromium` and `chromium-driver`, which `scripts/test.sh` installs when
//! they are missing).
//!
//! A test binary of its own (`[[test]] name = "browser"`), not a module of
//! `tests/integration.rs`: it needs one chromedriver for all its tests
//! besides the private redis-server, its tests take seconds of wall time
//! each, and `cargo test --test integration` should start no browser.
//!
//! Each test takes its own database (`support::redis()`), its own app
//! process and its own browser session with a fresh profile; it waits on
//! DOM or Redis conditions with timeouts, never on fixed sleeps.
//!
//! With `UPDATE_SCREENSHOTS=1` the tests also write the README's
//! screenshots into `docs/screenshots/` (see [`harness::Page::screenshot`]).

#[path = "../support/mod.rs"]
mod support;

mod harness;

mod actions;
mod alerts;
mod attention;
mod audit;
mod console;
mod enqueue;
mod export;
mod jobs;
mod links;
mod live_hold;
mod outage;
mod run_now;
mod search;
mod triage;
