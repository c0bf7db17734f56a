//! Alert webhooks (issue 17 item 6, COMPATIBILITY.md N6): the dedupe,
//! cooldown and "resolved" rules of `Alerter::transitions`; the alerter's
//! evaluation posting Slack-compatible JSON to a loopback receiver for a
//! critical finding and an evicting archive, once, then "resolved"; and
//! the "Send a test" button (one message, CSRF-protected, refused in
//! read-only mode, host only on the page).

use std::time::{Duration, Instant};

use asynqdeck::broker::keys;
use asynqdeck::web::alerts::{AlertConfig, AlertState, Alerter, evaluate_once};
use asynqdeck::web::{AppState, WebConfig};
use asynqdeck::{EnqueueOptions, Inspector, Task};
use redis::AsyncCommands;
use serde_json::json;

use crate::support::clock::{self, clocked};
use crate::support::http::{self, Dashboard};
use crate::support::webhook::{Receiver, config, sig, summary};

const WAIT: Duration = Duration::from_secs(10);

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
/// cooldown is announced when the cooldown ends if it still holds (and
/// then its clearing), not if it cleared before; after the cooldown at
/// once.
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
    // Back within the cooldown and still holding when it ends: announced
    // then, and its clearing too.
    assert!(a.transitions(&both, t + Duration::from_secs(80)).is_empty());
    assert!(
        a.transitions(&both, t + Duration::from_secs(899))
            .is_empty()
    );
    assert_eq!(
        summary(&a.transitions(&both, t + Duration::from_secs(900))),
        vec![("q".into(), "retry_growth".into(), AlertState::Firing)]
    );
    assert_eq!(
        summary(&a.transitions(&both[1..], t + Duration::from_secs(905))),
        vec![("q".into(), "retry_growth".into(), AlertState::Resolved)]
    );
    // Back after the cooldown of that post: announced again at once.
    let again = a.transitions(&both, t + Duration::from_secs(1801));
    assert_eq!(
        summary(&again),
        vec![("q".into(), "retry_growth".into(), AlertState::Firing)]
    );
    // Everything clears: both resolved.
    assert_eq!(
        summary(&a.transitions(&[], t + Duration::from_secs(1802))),
        vec![
            ("q".into(), "archive_evicting".into(), AlertState::Resolved),
            ("q".into(), "retry_growth".into(), AlertState::Resolved),
        ]
    );
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
