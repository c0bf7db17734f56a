//! The slot audit of the cluster pass (issue 14 §2), run last: libtest runs
//! tests in name order with `--test-threads=1`, hence the module's name.
//! `scripts/test.sh` runs the client, server, inspector and dashboard
//! suites on the shared local cluster (`ASYNQDECK_TEST_REDIS=cluster`,
//! tests/support/redis.rs), then this test, in the same process, on the
//! same cluster.
//!
//! How the audit covers every script and every call site: on a Redis
//! Cluster ≥ 7 the broker sends each script in its strict `#!lua` form
//! (src/broker/scripts.rs), so Redis itself checks at every call that all
//! keys the script touches, declared or built from `ARGV`, hash to one
//! slot, and fails it with `ERR Script attempted to access keys that do
//! not hash to the same slot` otherwise; a multi-key command or
//! transaction over two slots fails with `CROSSSLOT`. This test then
//! asserts that over the whole pass (1) no command failed with
//! `CROSSSLOT` on any master (`INFO errorstats`), (2) no Redis error our
//! code received said keys crossed slots (`broker::slot_errors`: the
//! script errors above, which `INFO errorstats` files under the generic
//! `ERR` with every other error — redis-rs's `CLIENT SETINFO`, unknown to
//! Redis 7.0, gives thousands — and redis-rs refusing a pipeline over two
//! slots before sending it), and (3) every registered script ran in its
//! strict form (its SHA1 was seen loaded on the masters), so none escapes
//! the check by not being exercised.
//!
//! `strict_form_refuses_two_slots_of_one_node` (on a cluster of its own, in
//! both passes) shows why the strict form is needed, and that its error is
//! the one counted: Redis 7.0 runs a plain script reading two slots of one
//! node, and refuses the same script with `#!lua`.

use crate::support::cluster::LocalCluster;

/// Scripts a cluster never runs, by design: they read many queues in one
/// call. On a cluster their work is done per queue by another script
/// (checked to have run): `QUEUES_MEMORY_USAGE` by `QUEUE_MEMORY_USAGE`
/// (COMPATIBILITY.md K5). The audit asserts
/// that exactly these were not run.
const NOT_ON_A_CLUSTER: &[&str] = &["QUEUES_MEMORY_USAGE"];
use crate::support::redis::{cluster_mode, cluster_taken, scripts_run_on_cluster, shared_cluster};

#[test]
#[ignore = "run last by the cluster pass of scripts/test.sh (--include-ignored)"]
fn every_script_ran_strict_and_nothing_crossed_slots() {
    assert!(
        cluster_mode(),
        "the audit reads the cluster of ASYNQDECK_TEST_REDIS=cluster"
    );
    assert!(asynqdeck::broker::strict_form(), "scripts went strict");
    let cluster = shared_cluster();
    eprintln!("tests that ran on the shared cluster: {}", cluster_taken());
    let errors = cluster.error_stats();
    let failures = cluster.command_failures();
    eprintln!("errorstats over the pass: {errors:?}");
    eprintln!("failed or rejected commands over the pass: {failures:?}");
    let crossslot = errors
        .iter()
        .find(|(k, _)| k == "CROSSSLOT")
        .map_or(0, |(_, n)| *n);
    let slot_errors = asynqdeck::broker::slot_errors();
    let not_run: Vec<&str> = scripts_run_on_cluster()
        .into_iter()
        .filter(|(_, ran)| !ran)
        .map(|(name, _)| name)
        .collect();
    assert_eq!(
        (crossslot, slot_errors, not_run),
        (0, 0, NOT_ON_A_CLUSTER.to_vec()),
        "(CROSSSLOT replies on the masters, Redis errors saying keys crossed \
         slots (logged at error level), scripts never run on the cluster)"
    );
}

/// Why the strict form: on Redis 7 a script without `#!lua` may read keys
/// of two slots that one node serves, and the same script with `#!lua` is
/// refused with the error the audit counts. Two hash tags of one master are
/// picked from the cluster's own slot map.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_form_refuses_two_slots_of_one_node() {
    let cluster = tokio::task::spawn_blocking(|| LocalCluster::start(3))
        .await
        .unwrap();
    let first = "{q0}:k".to_string();
    let port = cluster.port_of(&first);
    let second = (1..1000)
        .map(|i| format!("{{q{i}}}:k"))
        .find(|k| cluster.port_of(k) == port && cluster.keyslot(k) != cluster.keyslot(&first))
        .expect("another slot on the same master");
    let mut conn = redis::Client::open(format!("redis://127.0.0.1:{port}"))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let body = "redis.call('GET', KEYS[1]); return redis.call('GET', ARGV[1])";
    let plain: Option<String> = redis::cmd("EVAL")
        .arg(body)
        .arg(1)
        .arg(&first)
        .arg(&second)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(plain, None);
    let strict = redis::cmd("EVAL")
        .arg(format!("#!lua\n{body}"))
        .arg(1)
        .arg(&first)
        .arg(&second)
        .query_async::<Option<String>>(&mut conn)
        .await
        .unwrap_err();
    assert!(
        strict
            .to_string()
            .contains("Script attempted to access keys that do not hash to the same slot"),
        "{strict}"
    );
    let errors = cluster.error_stats();
    assert_eq!(errors.iter().find(|(k, _)| k == "CROSSSLOT"), None);
    assert!(
        errors.iter().any(|(k, n)| k == "ERR" && *n >= 1),
        "{errors:?}"
    );
}
