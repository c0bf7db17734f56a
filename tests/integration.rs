//! One integration test binary (each file in `tests/` is another binary to
//! link and another redis-server to start). One module per area.

mod support;

mod acl_topology;
mod aggregator;
mod cli;
mod client;
mod cluster_dashboard;
mod cluster_interop;
mod cluster_queue_names;
mod dashboard_scale;
mod dashboard_stats;
mod demo_topology;
mod engine_broker;
mod inspector_queues;
mod inspector_tasks;
mod interop;
mod jobs;
mod maintenance;
mod maintenance_scale;
mod props_routes;
mod reliability_chaosfix;
mod reliability_data;
mod reliability_engine;
mod reliability_recovery;
mod reliability_review;
mod reliability_web;
mod retry_pressure;
mod scale_reads;
mod schedule_file;
mod scheduler;
mod scheduler_replicas;
mod sentinel;
mod server_interop;
mod server_seeds;
mod server_smoke;
mod servers;
mod topology;
mod web_api;
mod web_jobs;
mod web_pages;
mod web_queues;
mod web_signatures;
mod web_tasks;
mod zz_cluster_audit;
