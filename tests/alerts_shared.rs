//! Alert webhooks shared by several dashboards on one Redis (issue 17 item
//! 6, COMPATIBILITY.md N6): each post claimed in Redis first, so each
//! episode posts once whichever dashboard sees it; many alerts of one
//! signal folded into one summary; an outage back within the cooldown
//! posted when the cooldown ends.

use std::time::{Duration, Instant};

use asynqdeck::broker::keys;
use asynqdeck::web::AppState;
use asynqdeck::web::alerts::{AlertState, evaluate_once};
use asynqdeck::{EnqueueOptions, Inspector, Task};
use redis::AsyncCommands;
use serde_json::json;

use crate::support::clock::{self, clocked};
use crate::support::webhook::{Receiver, config, sig, summary};

const WAIT: Duration = Duration::from_secs(10);

/// Two dashboards on one Redis post one firing message per episode and
/// one resolved message (N6); a dashboard started while the finding holds
/// (a restart) posts nothing; the claim keys carry the `{alerts}` hash tag.
#[tokio::test]
async fn dashboards_sharing_a_redis_post_each_transition_once() {
    let receiver = Receiver::start().await;
    let mut c = clocked(clock::now()).await;
    c.client
        .enqueue(
            &Task::new("job", b"{}".to_vec()),
            EnqueueOptions::new().queue("idle").task_id("t1"),
        )
        .await
        .unwrap();
    let dashboard = || AppState::new(Inspector::from_broker(c.broker.clone()), config(&receiver));
    let (a, b) = (dashboard(), dashboard());

    assert_eq!(
        summary(&evaluate_once(&a).await),
        vec![(
            "idle".to_string(),
            "no_consumer".to_string(),
            AlertState::Firing
        )]
    );
    assert!(evaluate_once(&b).await.is_empty());
    let restarted = dashboard();
    assert!(evaluate_once(&restarted).await.is_empty());
    receiver.wait_for(1, WAIT).await;
    assert_eq!(receiver.bodies().len(), 1);
    let token: String = c
        .conn
        .get(keys::alert_firing_key("idle", "no_consumer"))
        .await
        .unwrap();
    assert_eq!(token.len(), 32, "{token}");
    let ttl: i64 = c
        .conn
        .pttl(keys::alert_firing_key("idle", "no_consumer"))
        .await
        .unwrap();
    assert!(ttl > 0 && ttl <= 900_000, "{ttl}");

    c.inspector.delete_task("idle", "t1").await.unwrap();
    assert_eq!(
        summary(&evaluate_once(&b).await),
        vec![(
            "idle".to_string(),
            "no_consumer".to_string(),
            AlertState::Resolved
        )]
    );
    assert!(evaluate_once(&a).await.is_empty());
    assert!(evaluate_once(&restarted).await.is_empty());
    let bodies = receiver.wait_for(2, WAIT).await;
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[1]["asynqdeck"]["state"], "resolved");
    let resolved: String = c.conn.get(keys::alert_resolved_key(&token)).await.unwrap();
    assert_eq!(resolved, "1");
    assert_eq!(
        keys::alert_firing_key("idle", "no_consumer"),
        "asynqdeck:{alerts}:firing:4:idle:no_consumer"
    );
}

/// Enqueues one task on each of `queues` (no server consumes them).
async fn idle_queues(c: &crate::support::clock::Clocked, queues: &[String]) {
    for q in queues {
        c.client
            .enqueue(
                &Task::new("job", b"{}".to_vec()),
                EnqueueOptions::new().queue(q),
            )
            .await
            .unwrap();
    }
}

/// 50 queues with pending tasks and no server (every worker down): one
/// evaluation posts one summary (count 50, the first 20 names sorted, a
/// link to the overview), each queue's episode still claimed in Redis so
/// a second dashboard posts nothing; when they clear, one resolved
/// summary, each resolution claimed.
#[tokio::test]
async fn many_alerts_of_one_signal_post_one_summary() {
    let receiver = Receiver::start().await;
    let mut c = clocked(clock::now()).await;
    // Named out of order: the summary sorts them.
    let queues: Vec<String> = (0..50).rev().map(|i| format!("q{i:02}")).collect();
    idle_queues(&c, &queues).await;
    let dashboard = || AppState::new(Inspector::from_broker(c.broker.clone()), config(&receiver));
    let (a, b) = (dashboard(), dashboard());

    let sent = evaluate_once(&a).await;
    assert_eq!(
        summary(&sent),
        vec![(String::new(), "no_consumer".to_string(), AlertState::Firing)]
    );
    assert!(evaluate_once(&b).await.is_empty());
    let bodies = receiver.wait_for(1, WAIT).await;
    assert_eq!(bodies.len(), 1);
    let first20: Vec<String> = (0..20).map(|i| format!("q{i:02}")).collect();
    let text = "50 queues: no server consumes their pending tasks (q00, q01, q02, … and 47 more)";
    assert_eq!(
        bodies[0],
        json!({
            "text": format!("🔴 asynqdeck: {text} <http://dash.example/|open>"),
            "attachments": [{"fields": [
                {"title": "signal", "value": "no_consumer", "short": true},
                {"title": "state", "value": "firing", "short": true},
                {"title": "count", "value": "50", "short": true},
                {"title": "queues", "value": format!("{} and 30 more", first20.join(", ")), "short": false},
                {"title": "dashboard", "value": "http://dash.example/", "short": false},
            ]}],
            "asynqdeck": {
                "signal": "no_consumer",
                "state": "firing",
                "text": text,
                "count": 50,
                "queues": first20,
                "link": "http://dash.example/",
            }
        })
    );
    // Each queue's episode is claimed.
    let mut tokens = Vec::new();
    for q in &queues {
        let t: String = c
            .conn
            .get(keys::alert_firing_key(q, "no_consumer"))
            .await
            .unwrap();
        tokens.push(t);
    }
    assert_eq!(tokens.iter().filter(|t| t.len() == 32).count(), 50);
    let sends = a.alerts.sends();
    assert_eq!(sends.len(), 1);
    assert_eq!(sends[0].queue, "50 queues");

    for q in &queues {
        c.inspector
            .delete_all(q, asynqdeck::TaskState::Pending)
            .await
            .unwrap();
    }
    let sent = evaluate_once(&b).await;
    assert_eq!(
        summary(&sent),
        vec![(
            String::new(),
            "no_consumer".to_string(),
            AlertState::Resolved
        )]
    );
    assert!(evaluate_once(&a).await.is_empty());
    let bodies = receiver.wait_for(2, WAIT).await;
    assert_eq!(bodies.len(), 2);
    assert_eq!(
        bodies[1]["text"],
        "✅ asynqdeck resolved: Cleared on 50 queues: no server consumes their pending tasks (q00, q01, q02, … and 47 more) <http://dash.example/|open>"
    );
    assert_eq!(bodies[1]["asynqdeck"]["count"], 50);
    assert_eq!(bodies[1]["asynqdeck"]["state"], "resolved");
    for t in &tokens {
        let r: String = c.conn.get(keys::alert_resolved_key(t)).await.unwrap();
        assert_eq!(r, "1");
    }
}

/// Five alerts of one signal (the summary threshold) go out one by one,
/// sorted by queue, as before.
#[tokio::test]
async fn a_few_alerts_go_out_one_by_one() {
    let receiver = Receiver::start().await;
    let c = clocked(clock::now()).await;
    let queues: Vec<String> = ["e", "d", "c", "b", "a"].map(String::from).to_vec();
    idle_queues(&c, &queues).await;
    let state = AppState::new(Inspector::from_broker(c.broker.clone()), config(&receiver));
    let sent = evaluate_once(&state).await;
    let want: Vec<(String, String, AlertState)> = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|q| (q.to_string(), "no_consumer".to_string(), AlertState::Firing))
        .collect();
    assert_eq!(summary(&sent), want);
    let bodies = receiver.wait_for(5, WAIT).await;
    let got: Vec<&str> = bodies
        .iter()
        .map(|b| b["asynqdeck"]["queue"].as_str().unwrap())
        .collect();
    assert_eq!(got, ["a", "b", "c", "d", "e"]);
    assert_eq!(
        bodies[0]["asynqdeck"]["text"],
        "Queue a has 1 pending tasks and no server consumes it."
    );
}

/// 250 claims in one call (three pipelined chunks): each answered in
/// order, the held ones with their holder's token wherever they fall.
#[tokio::test]
async fn batched_claims_answer_each_in_order() {
    use asynqdeck::inspector::{AlertClaim, ClaimRequest};
    let mut c = clocked(clock::now()).await;
    let _: () = c
        .conn
        .set(keys::alert_firing_key("q000", "past_due"), "theirs0")
        .await
        .unwrap();
    let _: () = c
        .conn
        .set(keys::alert_firing_key("q150", "past_due"), "theirs150")
        .await
        .unwrap();
    let _: () = c
        .conn
        .set(keys::alert_resolved_key("done"), "1")
        .await
        .unwrap();
    let mut asks: Vec<ClaimRequest> = (0..249)
        .map(|i| ClaimRequest::Firing {
            queue: format!("q{i:03}"),
            signal: "past_due".into(),
            token: format!("mine{i}"),
        })
        .collect();
    asks.push(ClaimRequest::Resolved {
        token: "done".into(),
    });
    let ttl = Duration::from_secs(60);
    let got = c.inspector.claim_alerts(&asks, ttl).await;
    let mut want = vec![Some(AlertClaim::Claimed); 250];
    want[0] = Some(AlertClaim::Held(Some("theirs0".into())));
    want[150] = Some(AlertClaim::Held(Some("theirs150".into())));
    want[249] = Some(AlertClaim::Held(Some("1".into())));
    assert_eq!(got, want);
    let mine: String = c
        .conn
        .get(keys::alert_firing_key("q151", "past_due"))
        .await
        .unwrap();
    assert_eq!(mine, "mine151");
    let pttl: i64 = c
        .conn
        .pttl(keys::alert_firing_key("q151", "past_due"))
        .await
        .unwrap();
    assert!(pttl > 0 && pttl <= 60_000, "{pttl}");
    // Asked again: every claim is held now, by the tokens just set.
    let again = c.inspector.claim_alerts(&asks[1..3], ttl).await;
    assert_eq!(
        again,
        vec![
            Some(AlertClaim::Held(Some("mine1".into()))),
            Some(AlertClaim::Held(Some("mine2".into())))
        ]
    );
}

/// An outage back within the cooldown of the last one is not lost: the
/// running dashboard holds its post until the cooldown ends; a dashboard
/// started meanwhile finds the firing claim held by the episode that is
/// over (its resolution was claimed) and holds its post back as well,
/// until the claim lapses.
#[tokio::test]
async fn an_outage_back_within_the_cooldown_is_posted_when_it_ends() {
    let receiver = Receiver::start().await;
    let c = clocked(clock::now()).await;
    let job = |id: &str| {
        let client = c.client.clone();
        let id = id.to_string();
        async move {
            client
                .enqueue(
                    &Task::new("job", b"{}".to_vec()),
                    EnqueueOptions::new().queue("idle").task_id(&id),
                )
                .await
                .unwrap();
        }
    };
    job("t1").await;
    let dashboard = || AppState::new(Inspector::from_broker(c.broker.clone()), config(&receiver));
    let a = dashboard();
    assert_eq!(evaluate_once(&a).await.len(), 1);
    c.inspector.delete_task("idle", "t1").await.unwrap();
    assert_eq!(evaluate_once(&a).await.len(), 1);
    receiver.wait_for(2, WAIT).await;

    job("t2").await;
    let before = Instant::now();
    assert!(evaluate_once(&a).await.is_empty());
    // The first episode's claim has 5 s left when the restarted dashboard
    // looks: it posts then, not a whole claim lifetime later.
    let mut conn = c.conn.clone();
    let _: () = redis::cmd("PEXPIRE")
        .arg(keys::alert_firing_key("idle", "no_consumer"))
        .arg(5_000)
        .query_async(&mut conn)
        .await
        .unwrap();
    let restarted = dashboard();
    assert!(evaluate_once(&restarted).await.is_empty());
    assert_eq!(receiver.bodies().len(), 2);
    let due_a = a
        .alerts
        .due("idle", "no_consumer")
        .expect("a holds its post back");
    assert!(due_a > before && due_a <= before + Duration::from_secs(900));
    let due_r = restarted
        .alerts
        .due("idle", "no_consumer")
        .expect("the restarted dashboard holds its post back");
    assert!(
        due_r > before && due_r <= Instant::now() + Duration::from_secs(5),
        "{:?}",
        due_r - before
    );
    let still = [sig("idle", "no_consumer")];
    assert!(
        restarted
            .alerts
            .transitions(&still, due_r - Duration::from_secs(1))
            .is_empty()
    );
    assert_eq!(
        summary(&restarted.alerts.transitions(&still, due_r)),
        vec![("idle".into(), "no_consumer".into(), AlertState::Firing)]
    );
}
