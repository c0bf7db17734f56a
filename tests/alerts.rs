//! Alert webhooks (issue 17 item 6, COMPATIBILITY.md N6): the dedupe,
//! cooldown and "resolved" rules of `Alerter::transitions`; the alerter's
//! evaluation posting Slack-compatible JSON to a loopback receiver for a
//! critical finding and an evicting archive, once, then "resolved"; and
//! the "Send a test" button (one message, CSRF-protected, refused in
//! read-only mode, host only on the page).

use std::time::{Duration, Instant};

use asynqdeck::broker::keys;
use asynqdeck::web::alerts::{AlertConfig, AlertState, Alerter, Signal, evaluate_once};
use asynqdeck::web::{AppState, WebConfig};
use asynqdeck::{EnqueueOptions, Inspector, Task};
use redis::AsyncCommands;
use serde_json::json;

use crate::support::clock::{self, clocked};
use crate::support::http::{self, Dashboard};
use crate::support::webhook::Receiver;

const WAIT: Duration = Duration::from_secs(10);

fn sig(queue: &str, signal: &str) -> Signal {
    Signal {
        queue: queue.into(),
        signal: signal.into(),
        text: format!("{signal} on {queue}"),
        numbers: vec![("n".into(), 1)],
        path: format!("/queues/{queue}"),
    }
}

fn summary(alerts: &[asynqdeck::web::alerts::Alert]) -> Vec<(String, String, AlertState)> {
    alerts
        .iter()
        .map(|a| (a.queue.clone(), a.signal.clone(), a.state))
        .collect()
}

/// Slack's formatting characters in a queue name are escaped in the Slack
/// parts, kept in the structured part.
#[test]
fn slack_text_is_escaped() {
    let alert = asynqdeck::web::alerts::Alert {
        queue: "<!channel>&q".into(),
        signal: "no_consumer".into(),
        state: AlertState::Firing,
        text: "Queue <!channel>&q has 1 pending tasks".into(),
        numbers: vec![],
        link: "http://dash/queues/%3C%21channel%3E%26q".into(),
        group: None,
    };
    let m = asynqdeck::web::alerts::message(&alert);
    assert_eq!(
        m["text"],
        "🔴 asynqdeck: Queue &lt;!channel&gt;&amp;q has 1 pending tasks <http://dash/queues/%3C%21channel%3E%26q|open>"
    );
    assert_eq!(
        m["attachments"][0]["fields"][0]["value"],
        "&lt;!channel&gt;&amp;q"
    );
    assert_eq!(m["asynqdeck"]["queue"], "<!channel>&q");
    // A summary escapes the names in its text and its queues field.
    let many: Vec<_> = ["<!channel>", "<!here>", "a&b", "d", "e", "f"]
        .iter()
        .map(|q| asynqdeck::web::alerts::Alert {
            queue: q.to_string(),
            group: None,
            ..alert.clone()
        })
        .collect();
    let folded = asynqdeck::web::alerts::fold(many, "http://dash");
    assert_eq!(folded.len(), 1);
    let m = asynqdeck::web::alerts::message(&folded[0]);
    assert_eq!(
        m["text"],
        "🔴 asynqdeck: 6 queues: no server consumes their pending tasks (&lt;!channel&gt;, &lt;!here&gt;, a&amp;b, … and 3 more) <http://dash/|open>"
    );
    assert_eq!(
        m["attachments"][0]["fields"][3]["value"],
        "&lt;!channel&gt;, &lt;!here&gt;, a&amp;b, d, e, f"
    );
    assert_eq!(
        m["asynqdeck"]["queues"],
        json!(["<!channel>", "<!here>", "a&b", "d", "e", "f"])
    );
}

fn alerter(cooldown: Duration) -> Alerter {
    Alerter::new(AlertConfig {
        webhooks: vec![],
        cooldown,
        dashboard_url: "http://dash".into(),
    })
}

/// One firing alert per (queue, signal) when it starts holding, nothing
/// while it holds, "resolved" when it clears; a signal back within the
/// cooldown is not announced again (nor its clearing), after the cooldown
/// it is.
#[test]
fn fires_once_resolves_and_respects_the_cooldown() {
    let a = alerter(Duration::from_secs(900));
    let t = Instant::now();
    let both = [sig("q", "retry_growth"), sig("q", "archive_evicting")];
    let fired = a.transitions(&both, t);
    assert_eq!(
        summary(&fired),
        vec![
            ("q".into(), "archive_evicting".into(), AlertState::Firing),
            ("q".into(), "retry_growth".into(), AlertState::Firing),
        ]
    );
    assert_eq!(fired[1].link, "http://dash/queues/q");
    assert!(a.transitions(&both, t + Duration::from_secs(5)).is_empty());
    let cleared = a.transitions(&both[1..], t + Duration::from_secs(10));
    assert_eq!(
        summary(&cleared),
        vec![("q".into(), "retry_growth".into(), AlertState::Resolved)]
    );
    assert_eq!(cleared[0].text, "Cleared: retry_growth on q");
    // Back within the cooldown: silent, and so is its clearing.
    assert!(a.transitions(&both, t + Duration::from_secs(60)).is_empty());
    assert!(
        a.transitions(&both[1..], t + Duration::from_secs(70))
            .is_empty()
    );
    // Back after the cooldown: announced again.
    let again = a.transitions(&both, t + Duration::from_secs(901));
    assert_eq!(
        summary(&again),
        vec![("q".into(), "retry_growth".into(), AlertState::Firing)]
    );
    // Everything clears: both resolved.
    assert_eq!(
        summary(&a.transitions(&[], t + Duration::from_secs(902))),
        vec![
            ("q".into(), "archive_evicting".into(), AlertState::Resolved),
            ("q".into(), "retry_growth".into(), AlertState::Resolved),
        ]
    );
}

fn config(receiver: &Receiver) -> WebConfig {
    WebConfig {
        poll_interval: Duration::ZERO,
        alerts: AlertConfig {
            webhooks: vec![receiver.url.clone()],
            cooldown: Duration::from_secs(900),
            dashboard_url: "http://dash.example".into(),
        },
        ..WebConfig::default()
    }
}

/// A queue with pending tasks and no server (a critical finding) and an
/// archive at 10,000 tasks: one Slack-compatible post each; nothing more
/// while they hold; "resolved" for the queue once a task is consumed.
#[tokio::test]
async fn the_alerter_posts_firing_then_resolved() {
    let receiver = Receiver::start().await;
    let mut c = clocked(clock::now()).await;
    c.client
        .enqueue(
            &Task::new("job", b"{}".to_vec()),
            EnqueueOptions::new().queue("idle").task_id("t1"),
        )
        .await
        .unwrap();
    let _: () = c.conn.sadd(keys::ALL_QUEUES, "full").await.unwrap();
    let members: Vec<(i64, String)> = (0..10_000).map(|i| (1, format!("a{i}"))).collect();
    let mut pipe = redis::pipe();
    for chunk in members.chunks(1000) {
        pipe.zadd_multiple(keys::archived_key("full"), chunk)
            .ignore();
    }
    let _: () = pipe.query_async(&mut c.conn).await.unwrap();
    let state = AppState::new(Inspector::from_broker(c.broker.clone()), config(&receiver));

    let sent = evaluate_once(&state).await;
    assert_eq!(sent.len(), 2);
    let bodies = receiver.wait_for(2, WAIT).await;
    assert_eq!(
        bodies[0],
        json!({
            "text": "🔴 asynqdeck: The archive of queue full holds 10000 tasks, asynq's cap: each new archived task evicts the oldest (export them to keep them). <http://dash.example/queues/full/archived|open>",
            "attachments": [{"fields": [
                {"title": "queue", "value": "full", "short": true},
                {"title": "signal", "value": "archive_evicting", "short": true},
                {"title": "state", "value": "firing", "short": true},
                {"title": "archive_full", "value": "10000", "short": true},
                {"title": "dashboard", "value": "http://dash.example/queues/full/archived", "short": false},
            ]}],
            "asynqdeck": {
                "queue": "full",
                "signal": "archive_evicting",
                "state": "firing",
                "text": "The archive of queue full holds 10000 tasks, asynq's cap: each new archived task evicts the oldest (export them to keep them).",
                "numbers": {"archive_full": 10000},
                "link": "http://dash.example/queues/full/archived",
            }
        })
    );
    assert_eq!(bodies[1]["asynqdeck"]["queue"], "idle");
    assert_eq!(bodies[1]["asynqdeck"]["signal"], "no_consumer");
    assert_eq!(bodies[1]["asynqdeck"]["state"], "firing");
    assert_eq!(bodies[1]["asynqdeck"]["numbers"], json!({"no_consumer": 1}));
    assert_eq!(
        bodies[1]["asynqdeck"]["link"],
        "http://dash.example/queues/idle/pending"
    );
    assert_eq!(receiver.paths(), vec!["/hook/T0KEN/secret"; 2]);

    // Still holding: nothing new.
    assert!(evaluate_once(&state).await.is_empty());
    assert_eq!(receiver.bodies().len(), 2);

    // The pending task goes: the no-consumer finding clears.
    c.inspector.delete_task("idle", "t1").await.unwrap();
    let sent = evaluate_once(&state).await;
    assert_eq!(sent.len(), 1);
    let bodies = receiver.wait_for(3, WAIT).await;
    assert_eq!(bodies[2]["asynqdeck"]["state"], "resolved");
    assert_eq!(bodies[2]["asynqdeck"]["signal"], "no_consumer");
    assert_eq!(
        bodies[2]["text"],
        "✅ asynqdeck resolved: Cleared: Queue idle has 1 pending tasks and no server consumes it. <http://dash.example/queues/idle/pending|open>"
    );
    let sends = state.alerts.sends();
    assert_eq!(sends.len(), 3);
    let host = receiver.url["http://".len()..]
        .split('/')
        .next()
        .unwrap()
        .to_string();
    assert!(sends.iter().all(|s| s.host == host), "{sends:?}");
}

/// "Send a test" posts one test message and answers the sends fragment;
/// `/alerts` shows the webhook's host, never its path; without the CSRF
/// token and in read-only mode nothing is sent.
#[tokio::test]
async fn the_test_button_sends_one_message() {
    let receiver = Receiver::start().await;
    let c = clocked(clock::now()).await;
    let d = Dashboard::new(Inspector::from_broker(c.broker.clone()), config(&receiver));
    let port = receiver
        .url
        .split(':')
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();

    let (status, html) = http::get(&d.app, "/alerts").await.parts();
    assert_eq!(status, 200);
    assert!(
        html.contains(&format!("<li class=\"webhook\">127.0.0.1:{port}</li>")),
        "{html}"
    );
    assert!(!html.contains("T0KEN"));
    assert!(html.contains("id=\"send-test\""));

    let refused = http::post(&d.app, "/alerts/test", None).await;
    assert_eq!(refused.status, 403);
    assert!(receiver.bodies().is_empty());

    let r = d.post("/alerts/test", "").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let html = r.text();
    assert!(html.contains("Test sent: delivered"), "{html}");
    assert!(html.contains("<td class=\"signal\">test</td><td class=\"state\">test</td><td class=\"result\">200 OK</td>"), "{html}");
    assert!(!html.contains("T0KEN"));
    let bodies = receiver.wait_for(1, WAIT).await;
    assert_eq!(bodies.len(), 1);
    assert_eq!(bodies[0]["asynqdeck"]["state"], "test");
    assert_eq!(bodies[0]["asynqdeck"]["link"], "http://dash.example/alerts");

    let ro = Dashboard::new(
        Inspector::from_broker(c.broker.clone()),
        WebConfig {
            read_only: true,
            ..config(&receiver)
        },
    );
    let r = ro.post("/alerts/test", "").await;
    assert_eq!(r.status, 403);
    let (_, html) = http::get(&ro.app, "/alerts").await.parts();
    assert!(!html.contains("id=\"send-test\""));
    assert_eq!(receiver.bodies().len(), 1);
    // The POST that passed the guard is audited; the two the guard refused
    // (no CSRF token, read-only mode) are not.
    let page = c
        .inspector
        .audit_log(&asynqdeck::inspector::AuditFilter::default(), None, 10)
        .await
        .unwrap();
    let seen: Vec<(String, String, bool)> = page
        .entries
        .iter()
        .map(|e| (e.verb.clone(), e.scope.clone(), e.result == "ok"))
        .collect();
    assert_eq!(seen, vec![("test".to_string(), "alerts".to_string(), true)]);
}

/// `--alert-webhook` is repeatable and `ASYNQDECK_ALERT_WEBHOOKS` takes a
/// comma-separated list; `--print-config` shows their hosts only; the
/// cooldown defaults to 15 minutes; a URL that is not http(s) is refused.
#[test]
fn alert_flags_and_environment() {
    let bin = env!("CARGO_BIN_EXE_asynqdeck");
    let run = |env: &[(&str, &str)], args: &[&str]| {
        std::process::Command::new(bin)
            .env_clear()
            .envs(env.iter().copied())
            .arg("serve")
            .arg("--print-config")
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(
        &[(
            "ASYNQDECK_ALERT_WEBHOOKS",
            "https://hooks.slack.com/services/T/B/SECRET,http://127.0.0.1:9/x",
        )],
        &[
            "--alert-cooldown",
            "5m",
            "--dashboard-url",
            "https://deck.example/",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("\"<hooks.slack.com redacted>\""), "{text}");
    assert!(text.contains("\"<127.0.0.1:9 redacted>\""), "{text}");
    assert!(!text.contains("SECRET"));
    assert!(text.contains("cooldown: 300s"), "{text}");
    assert!(
        text.contains("dashboard_url: \"https://deck.example\""),
        "{text}"
    );

    let out = run(
        &[],
        &[
            "--alert-webhook",
            "http://a.example/1",
            "--alert-webhook",
            "http://b.example/2",
        ],
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("\"<a.example redacted>\"") && text.contains("\"<b.example redacted>\""),
        "{text}"
    );
    assert!(text.contains("cooldown: 900s"), "{text}");

    let out = run(&[], &["--alert-webhook", "ftp://x.example/hook"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("--alert-webhook x.example: not an http:// or https:// URL")
    );
}

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
