//! A task key of another type than a hash (a string someone `SET` at
//! `asynq:{q}:t:<id>`, its id listed in a container) is a corrupt row that
//! says so, not "the task hash has no msg": in the tab's listing, the
//! search, the export (whole tab, and filtered by its id) and the task
//! page (COMPATIBILITY.md W13).

use std::sync::Arc;

use asynqdeck::broker::{Broker, keys};
use asynqdeck::clock::SimulatedClock;
use asynqdeck::inspector::{Page, TaskRow};
use asynqdeck::web::WebConfig;
use asynqdeck::{Inspector, TaskState};
use axum::http::StatusCode;

use crate::support::clock::now;
use crate::support::http::{self, Dashboard};
use crate::support::{self, seed};

/// The error of the string key `asynq:{bad}:t:str`.
const REASON: &str =
    "corrupt data in Redis at asynq:{bad}:t:str: the task key is a string, not a hash";

#[tokio::test]
async fn a_string_task_key_is_named_as_such() {
    let db = support::redis();
    let mut raw = db.raw().await;
    seed::message(
        &mut raw,
        &seed::msg("bad", "ok", "t", b"x"),
        "archived",
        now().timestamp() - 10,
    )
    .await;
    let _: () = redis::cmd("SET")
        .arg(keys::task_key("bad", "str"))
        .arg("x")
        .query_async(&mut raw)
        .await
        .unwrap();
    let _: () = redis::cmd("ZADD")
        .arg(keys::archived_key("bad"))
        .arg(now().timestamp())
        .arg("str")
        .query_async(&mut raw)
        .await
        .unwrap();
    let broker = Broker::connect(&db.url())
        .await
        .unwrap()
        .with_clock(Arc::new(SimulatedClock::new(now())));
    let insp = Inspector::from_broker(broker);
    let dash = Dashboard::new(insp.clone(), WebConfig::default());

    // The tab's listing.
    let rows = insp
        .list_tasks("bad", TaskState::Archived, Page::new(1, 20).unwrap())
        .await
        .unwrap();
    let errors: Vec<String> = rows
        .iter()
        .filter_map(|r| match r {
            TaskRow::Corrupt { id, error, .. } => Some(format!("{id}: {error}")),
            _ => None,
        })
        .collect();
    assert_eq!(errors, [format!("str: {REASON}")]);

    // The export, whole and by id.
    let line = format!("{{\"id\":\"str\",\"state\":\"archived\",\"error\":\"{REASON}\"}}\n");
    let r = http::get(&dash.app, "/queues/bad/archived/export").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        r.body.lines().nth(1).map(|l| format!("{l}\n")),
        Some(line.clone())
    );
    let r = http::get(&dash.app, "/queues/bad/archived/export?id=str").await;
    assert_eq!((r.status, r.body), (StatusCode::OK, line));

    // The search.
    let v = http::get_json(&dash.app, "/api/search?q=queue%3Abad").await;
    let hit = v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == "str")
        .cloned();
    assert_eq!(
        hit.map(|t| t["error"].clone()),
        Some(serde_json::json!(REASON))
    );

    // The task page.
    let r = http::get(&dash.app, "/queues/bad/tasks/str").await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(
        r.body
            .contains(&format!("<p class=\"error-text\">{REASON}</p>")),
        "{}",
        r.body
    );
}
