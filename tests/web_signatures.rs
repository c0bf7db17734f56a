//! Error signatures on the retry and archived tabs (issue 17 item 2): per
//! task type and normalised LastErr, the count, first and last seen (the
//! tasks' `last_failed_at`), the last hour against the hour before with a
//! 10-minute histogram; the block sits above the task list; a signature's
//! Filter link shows exactly its tasks and its bulk links start a job on
//! exactly them (S14).

use std::sync::Arc;

use asynqdeck::broker::Broker;
use asynqdeck::broker::proto::TaskMessage;
use asynqdeck::clock::SimulatedClock;
use asynqdeck::inspector::errgroups;
use asynqdeck::inspector::jobs::JobPhase;
use asynqdeck::web::WebConfig;
use asynqdeck::{Inspector, TaskState};
use axum::http::StatusCode;

use crate::support::clock::now;
use crate::support::http::{self, Dashboard};
use crate::support::{self, jobs, seed};

fn row_ids(body: &str) -> Vec<String> {
    body.split("<tr data-id=\"")
        .skip(1)
        .map(|s| s.split('"').next().unwrap().to_string())
        .collect()
}

/// A failed task of `ty` in `q` whose last failure was `ago` s before now.
fn failed(q: &str, id: &str, ty: &str, err: &str, ago: i64) -> TaskMessage {
    TaskMessage {
        retried: 1,
        error_msg: err.into(),
        last_failed_at: now().timestamp() - ago,
        ..seed::msg(q, id, ty, b"{}")
    }
}

/// The table row of the signature `(ty, err id)` in `html`.
fn sig_row<'a>(html: &'a str, ty: &str, gid: &str) -> &'a str {
    let start = html
        .find(&format!("<tr data-group=\"{gid}\" data-type=\"{ty}\">"))
        .unwrap_or_else(|| panic!("no signature {ty} {gid}: {html}"));
    &html[start..start + html[start..].find("</tr>").unwrap()]
}

#[tokio::test]
async fn signatures_group_by_type_and_text_with_times_trend_and_links() {
    let db = support::redis();
    let broker = Broker::connect(&db.url())
        .await
        .unwrap()
        .with_clock(Arc::new(SimulatedClock::new(now())));
    let insp = Inspector::from_broker(broker);
    let dash = Dashboard::new(insp.clone(), WebConfig::default());
    let mut raw = db.raw().await;
    let refused = |n: u8| format!("dial tcp 10.0.0.{n}:25: connect: connection refused");
    let seeds = [
        failed("sig", "e1", "email:send", &refused(1), 5 * 60),
        failed("sig", "e2", "email:send", &refused(2), 30 * 60),
        failed("sig", "e3", "email:send", &refused(3), 70 * 60),
        failed("sig", "e4", "email:send", &refused(4), 200 * 60),
        failed("sig", "s1", "sms:send", &refused(5), 60),
        failed("sig", "t1", "email:send", "template 42 missing", 600),
    ];
    for (i, m) in seeds.iter().enumerate() {
        seed::message(&mut raw, m, "retry", now().timestamp() + 100 + i as i64).await;
    }
    let gid = errgroups::group_id("dial tcp <ip>:<n>: connect: connection refused");
    let tid = errgroups::group_id("template <n> missing");

    let s = http::page(&dash.app, "/queues/sig/retry/summary", false).await;
    assert_eq!(s.status, StatusCode::OK);
    let html = &s.body;
    // Order: most tasks, then the most recently seen.
    let order: Vec<String> = html
        .split("<tr data-group=\"")
        .skip(1)
        .map(|r| r.split("\">").next().unwrap().to_string())
        .collect();
    assert_eq!(
        order,
        [
            format!("{gid}\" data-type=\"email:send"),
            format!("{gid}\" data-type=\"sms:send"),
            format!("{tid}\" data-type=\"email:send"),
        ]
    );
    assert!(html.find("Error signatures").unwrap() < html.find("Task types in this tab").unwrap());
    assert!(html.contains("over all 6 tasks."), "{html}");

    let e = sig_row(html, "email:send", &gid);
    assert!(
        e.contains("<code>dial tcp &#60;ip&#62;:&#60;n&#62;: connect: connection refused</code>"),
        "{e}"
    );
    assert!(
        e.contains(&format!("data-group-count=\"{gid}\">4</td>")),
        "{e}"
    );
    // First seen e4 (200 min ago), last seen e1 (5 min ago), whose text is the example.
    assert!(
        e.contains("<td class=\"first-seen\"><time datetime=\"2026-03-10T08:40:00Z\">"),
        "{e}"
    );
    assert!(
        e.contains("<td class=\"last-seen\"><time datetime=\"2026-03-10T11:55:00Z\">"),
        "{e}"
    );
    assert!(
        e.contains("<pre class=\"err\">dial tcp 10.0.0.1:25: connect: connection refused</pre>"),
        "{e}"
    );
    // Last hour: e1, e2; the hour before: e3; bins of 10 min, oldest first.
    assert!(e.contains("<span class=\"sig-trend up\" title=\"Last failure in the last hour / in the hour before\">2 <span class=\"meta\">(hour before 1)</span>"), "{e}");
    assert!(
        e.contains("Last hour per 10 minutes, oldest first: 0, 0, 1, 0, 0, 1</title>"),
        "{e}"
    );
    assert!(
        e.contains(&format!(
            "data-filter=\"signature\" href=\"/queues/sig/retry?type=email%3Asend&#38;err={gid}\""
        )),
        "{e}"
    );
    for op in ["run", "archive", "delete"] {
        assert!(e.contains(&format!(
            "data-bulk=\"group-{op}\" href=\"/queues/sig/retry/matching/{op}?type=email%3Asend&#38;err={gid}\""
        )), "{op}: {e}");
    }
    assert!(
        e.contains("(a background job; you confirm the count first)\">Run 4</a>"),
        "{e}"
    );

    let sms = sig_row(html, "sms:send", &gid);
    assert!(
        sms.contains(&format!("data-group-count=\"{gid}\">1</td>")),
        "{sms}"
    );
    assert!(
        sms.contains("1 <span class=\"meta\">(hour before 0)</span>"),
        "{sms}"
    );
    let t = sig_row(html, "email:send", &tid);
    // 600 s ago exactly: the second-newest bucket.
    assert!(t.contains("oldest first: 0, 0, 0, 0, 1, 0</title>"), "{t}");

    // The block is above the task list on the retry and archived tabs only.
    for (tab, above) in [("retry", true), ("archived", true), ("pending", false)] {
        let page = http::page(&dash.app, &format!("/queues/sig/{tab}"), false).await;
        let summary = page.body.find("id=\"summary\"").unwrap();
        let list = page.body.find("<section id=\"tab\"").unwrap();
        assert_eq!(summary < list, above, "{tab}");
    }

    // The Filter link shows exactly the signature's tasks.
    let f = http::page(
        &dash.app,
        &format!("/queues/sig/retry?type=email%3Asend&err={gid}"),
        false,
    )
    .await;
    assert_eq!(row_ids(&f.body), ["e1", "e2", "e3", "e4"]);

    // A bulk link: the confirmation page counts the signature, Confirm
    // archives exactly its tasks.
    let uri = format!("/queues/sig/retry/matching/archive?type=email%3Asend&err={gid}");
    let c = http::page(&dash.app, &uri, false).await;
    assert_eq!(c.status, StatusCode::OK);
    assert!(
        c.body.contains(">Confirm: Archive 4 tasks</button>"),
        "{}",
        c.body
    );
    let a = dash.post(&uri, "").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    let job = jobs::finished(&insp, &jobs::started_id(&a)).await;
    assert_eq!((job.phase, job.done), (JobPhase::Done, 4));
    for (id, state) in [
        ("e1", TaskState::Archived),
        ("e4", TaskState::Archived),
        ("s1", TaskState::Retry),
        ("t1", TaskState::Retry),
    ] {
        assert_eq!(
            insp.get_task_info("sig", id).await.unwrap().state,
            state,
            "{id}"
        );
    }
}
