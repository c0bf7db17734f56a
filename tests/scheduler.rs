//! The periodic task [`Scheduler`] on a real Redis (Go `scheduler.go`, wire
//! spec §4.4, §6.17, §8): fires on its spec, records history, publishes
//! entries Go's way after one heartbeat, and clears both at shutdown.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use asynqdeck::broker::{Broker, Page, keys};
use asynqdeck::scheduler::{Scheduler, SchedulerOpts};
use asynqdeck::{EnqueueOptions, Error, Inspector, Task};
use redis::AsyncCommands;

use crate::support;

const WAIT: Duration = Duration::from_secs(30);

/// `@every 1s` fires each second: pending tasks of the registered type and
/// options appear, each recorded in the entry's history; the pre and post
/// hooks ran once per fire; the entries are published (spec, type, payload,
/// Go option strings, prev/next times) after one heartbeat; shutdown removes
/// the entries key, its `asynq:schedulers` member and the history.
#[tokio::test]
async fn every_second_fires_records_publishes_and_clears() {
    let db = support::redis();
    let broker = Broker::connect(&db.url()).await.unwrap();
    let pre = Arc::new(AtomicUsize::new(0));
    let post = Arc::new(AtomicUsize::new(0));
    let (p1, p2) = (pre.clone(), post.clone());
    let opts = SchedulerOpts {
        heartbeat_interval: Duration::from_secs(1),
        pre_enqueue: Some(Arc::new(move |_, _| {
            p1.fetch_add(1, Ordering::SeqCst);
        })),
        post_enqueue: Some(Arc::new(move |r| {
            assert!(r.is_ok(), "{r:?}");
            p2.fetch_add(1, Ordering::SeqCst);
        })),
        ..SchedulerOpts::default()
    };
    let scheduler = Scheduler::new(broker.clone(), opts);
    let entry = scheduler
        .register(
            "@every 1s",
            Task::new("report:daily", b"{\"x\":1}".to_vec()),
            EnqueueOptions::new().queue("low").max_retry(3),
        )
        .unwrap();
    assert_eq!(
        scheduler.entries()[0].next,
        None,
        "no next time before start"
    );
    scheduler.start().await.unwrap();
    assert!(
        matches!(scheduler.start().await, Err(Error::InvalidArgument(m)) if m == "asynq: the scheduler is already running")
    );

    let inspector = Inspector::connect(&db.url()).await.unwrap();
    let events = support::eventually(WAIT, || async {
        let ev = inspector
            .scheduler_enqueue_events(&entry, Page::new(1, 30).unwrap())
            .await
            .unwrap();
        (ev.len() >= 2).then_some(ev)
    })
    .await
    .expect("two fires recorded");
    for ev in &events {
        let info = inspector.get_task_info("low", &ev.task_id).await.unwrap();
        assert_eq!(info.task_type, "report:daily");
        assert_eq!(info.payload, b"{\"x\":1}");
        assert_eq!(info.max_retry, 3);
    }
    let published = support::eventually(WAIT, || async {
        let e = inspector.scheduler_entries().await.unwrap();
        e.into_iter()
            .find(|e| e.id == entry && e.prev_enqueue_at.is_some())
    })
    .await
    .expect("entry published after a heartbeat");
    assert_eq!(published.spec, "@every 1s");
    assert_eq!(published.task_type, "report:daily");
    assert_eq!(published.payload, b"{\"x\":1}");
    assert_eq!(
        published.options,
        vec!["Queue(\"low\")".to_string(), "MaxRetry(3)".to_string()]
    );
    let (prev, next) = (
        published.prev_enqueue_at.unwrap(),
        published.next_enqueue_at.unwrap(),
    );
    assert!(next > prev, "prev {prev} next {next}");
    assert_eq!(
        next.timestamp_subsec_nanos(),
        0,
        "@every fires on whole seconds"
    );

    scheduler.shutdown().await;
    let fired = pre.load(Ordering::SeqCst);
    assert!(fired >= 2);
    assert_eq!(
        post.load(Ordering::SeqCst),
        fired,
        "one post hook per pre hook"
    );
    let mut conn = db.raw().await;
    let entries_key = keys::scheduler_entries_key(scheduler.id());
    assert!(!conn.exists::<_, bool>(&entries_key).await.unwrap());
    let score: Option<f64> = conn
        .zscore(keys::ALL_SCHEDULERS, &entries_key)
        .await
        .unwrap();
    assert_eq!(score, None);
    assert!(
        !conn
            .exists::<_, bool>(keys::scheduler_history_key(&entry))
            .await
            .unwrap()
    );
    assert!(
        matches!(scheduler.start().await, Err(Error::InvalidArgument(m)) if m == "asynq: the scheduler has already been stopped")
    );
}

/// Unregister removes the entry (it stops firing and is no longer
/// published); an unknown id is Go's error.
#[tokio::test]
async fn unregister_removes_and_unknown_id_errors() {
    let db = support::redis();
    let broker = Broker::connect(&db.url()).await.unwrap();
    let scheduler = Scheduler::new(broker, SchedulerOpts::default());
    let a = scheduler
        .register(
            "*/5 * * * *",
            Task::new("a", Vec::new()),
            EnqueueOptions::new(),
        )
        .unwrap();
    let b = scheduler
        .register("@hourly", Task::new("b", Vec::new()), EnqueueOptions::new())
        .unwrap();
    assert_ne!(a, b);
    scheduler.unregister(&a).unwrap();
    let left: Vec<String> = scheduler.entries().into_iter().map(|e| e.id).collect();
    assert_eq!(left, vec![b]);
    match scheduler.unregister(&a) {
        Err(Error::InvalidArgument(m)) => assert_eq!(m, "asynq: no scheduler entry found"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        scheduler.register("* * * *", Task::new("c", Vec::new()), EnqueueOptions::new()),
        Err(Error::InvalidArgument(_))
    ));
}
