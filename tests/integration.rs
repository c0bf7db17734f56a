//! One integration test binary (each file in `tests/` is another binary to
//! link and another redis-server to start). One module per area.

mod support;

mod cli;
mod client;
mod dashboard_stats;
mod engine_broker;
mod inspector_queues;
mod inspector_tasks;
mod interop;
mod maintenance;
mod props_routes;
mod reliability_chaosfix;
mod reliability_data;
mod reliability_engine;
mod reliability_recovery;
mod reliability_review;
mod reliability_web;
mod sentinel;
mod server_interop;
mod server_seeds;
mod server_smoke;
mod servers;
mod topology;
mod web_api;
mod web_pages;
mod web_queues;
mod web_tasks;
