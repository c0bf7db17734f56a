//! One active scheduler among replicas (issue 16 item 3, beyond Go): three
//! schedulers with the same replica group and the same entry enqueue each
//! tick once; when the active one dies (no release), a standby takes over
//! and does not fire a tick the dead one fired.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use asynqdeck::broker::{Broker, keys};
use asynqdeck::scheduler::{Scheduler, SchedulerOpts};
use asynqdeck::{EnqueueOptions, Task};
use redis::AsyncCommands;

use crate::support;

const WAIT: Duration = Duration::from_secs(30);

async fn pending_len(db: &support::TestDb, q: &str) -> usize {
    let mut conn = db.raw().await;
    conn.llen(keys::pending_key(q)).await.unwrap()
}

#[tokio::test]
async fn three_replicas_fire_each_tick_once_and_hand_over() {
    let db = support::redis();
    let broker = Broker::connect(&db.url()).await.unwrap();
    let mut replicas = Vec::new();
    for _ in 0..3 {
        let fires = Arc::new(AtomicUsize::new(0));
        let f = fires.clone();
        let s = Scheduler::new(
            broker.clone(),
            SchedulerOpts {
                heartbeat_interval: Duration::from_secs(3),
                replica_group: Some("reports".into()),
                pre_enqueue: Some(Arc::new(move |_, _| {
                    f.fetch_add(1, Ordering::SeqCst);
                })),
                ..SchedulerOpts::default()
            },
        );
        s.register(
            "@every 1s",
            Task::new("report:hourly", b"r".to_vec()),
            EnqueueOptions::new().queue("rep"),
        )
        .unwrap();
        s.start().await.unwrap();
        replicas.push((s, fires));
    }
    let active: Vec<usize> = (0..3).filter(|&i| replicas[i].0.is_active()).collect();
    assert_eq!(active.len(), 1, "exactly one replica holds the lease");
    let leader = active[0];

    support::eventually(WAIT, || async {
        (pending_len(&db, "rep").await >= 3).then_some(())
    })
    .await
    .expect("the active replica fires");
    let fired: Vec<usize> = replicas
        .iter()
        .map(|(_, f)| f.load(Ordering::SeqCst))
        .collect();
    let enqueued = pending_len(&db, "rep").await;
    for (i, n) in fired.iter().enumerate() {
        if i != leader {
            assert_eq!(*n, 0, "standby {i} fired");
        }
    }
    assert!(
        fired[leader] >= enqueued,
        "one task per fire: {fired:?} vs {enqueued}"
    );

    // The group's replicas as the dashboard reads them: the leader first.
    let seen = broker.scheduler_replicas("reports").await.unwrap();
    assert_eq!(seen.len(), 3);
    assert!(seen[0].active);
    assert_eq!(seen[0].scheduler_id, replicas[leader].0.id());
    assert!(seen[1..].iter().all(|r| !r.active));
    assert_eq!(
        broker.scheduler_groups().await.unwrap(),
        vec!["reports".to_string()]
    );

    // The leader dies without releasing: a standby takes over once the
    // lease lapses, and fires only ticks after the dead one's last.
    let (dead, _) = replicas.remove(leader);
    dead.abandon().await;
    let before = pending_len(&db, "rep").await;
    let new_leader = support::eventually(WAIT, || async {
        replicas.iter().position(|(s, _)| s.is_active())
    })
    .await
    .expect("a standby takes over");
    support::eventually(WAIT, || async {
        (pending_len(&db, "rep").await >= before + 2).then_some(())
    })
    .await
    .expect("the new leader fires");
    let other = 1 - new_leader;
    assert_eq!(
        replicas[other].1.load(Ordering::SeqCst),
        0,
        "the other standby never fired"
    );

    // Every tick claimed once: the fired hash holds one entry (the three
    // registrations are one config) with a tick no later than now.
    let mut conn = db.raw().await;
    let fired: std::collections::HashMap<String, i64> = conn
        .hgetall(keys::scheduler_fired_key("reports"))
        .await
        .unwrap();
    assert_eq!(fired.len(), 1, "{fired:?}");
    for (s, _) in &replicas {
        s.shutdown().await;
    }
    let left: Option<String> = conn
        .get(keys::scheduler_leader_key("reports"))
        .await
        .unwrap();
    assert_eq!(left, None, "a clean shutdown releases the lease");
}
