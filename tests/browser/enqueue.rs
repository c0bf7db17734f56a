//! Enqueue and edit from the dashboard in a real browser (issue 17 item
//! 8): a refused form comes back with the values and the problem, a good
//! one opens the new task's page; "Edit payload" there saves a new payload.

use std::time::Duration;

use asynqdeck::{Inspector, TaskState};

use crate::harness::{App, with_browser};
use crate::support;

const WAIT: Duration = Duration::from_secs(15);

/// Fill the enqueue form with bad JSON: 422, the form again with the
/// values kept and "payload: not valid JSON" listed; fix it: the new
/// task's page opens; "Edit payload", change it, Save: the task page shows
/// the new payload and Redis holds it. No console error. With
/// `UPDATE_SCREENSHOTS=1` writes `docs/screenshots/enqueue.png`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_then_edit_the_payload() {
    let db = support::redis();
    let app = App::serve(&db, &["--no-engine"]);
    let url = db.url();

    with_browser(|page| async move {
        page.goto(&app.url("/enqueue")).await;
        page.js::<bool>(
            "var f = document.getElementById('enqueue-form');
             f.task_type.value = 'email:send';
             f.queue.value = 'mail';
             f.payload_format.value = 'json';
             f.payload.value = '{\"to\": ';
             f.task_id.value = 'ui-1';
             f.max_retry.value = '3';
             f.headers.value = 'trace: t-9';
             return true;",
        )
        .await;
        page.park_pointer().await;
        page.screenshot("enqueue").await;
        page.click("#enqueue-form button[type=submit]").await;
        let (problem, kept): (String, String) = page
            .wait_js(
                WAIT,
                "the form again with its problem",
                "var e = document.querySelector('#enqueue-form .form-errors li');
                 return e ? [e.textContent, document.getElementById('enqueue-form').task_id.value] : null;",
            )
            .await;
        assert!(problem.starts_with("payload: not valid JSON: "), "{problem}");
        assert_eq!(kept, "ui-1");

        page.js::<bool>(
            "document.getElementById('enqueue-form').payload.value = '{\"to\": \"a@example.com\"}'; return true;",
        )
        .await;
        page.click("#enqueue-form button[type=submit]").await;
        let _: bool = page
            .wait_js(
                WAIT,
                "the new task's page",
                "return location.pathname === '/queues/mail/tasks/ui-1' && document.querySelector('[data-field=payload]') ? true : null;",
            )
            .await;
        let inspector = Inspector::connect(&url).await.unwrap();
        let t = inspector.get_task_info("mail", "ui-1").await.unwrap();
        assert_eq!(
            (t.task_type.as_str(), t.payload.as_slice(), t.state, t.max_retry),
            ("email:send", br#"{"to": "a@example.com"}"#.as_slice(), TaskState::Pending, 3)
        );
        assert_eq!(t.headers.get("trace").map(String::as_str), Some("t-9"));

        page.click("a.edit-payload").await;
        let _: bool = page
            .wait_js(
                WAIT,
                "the edit form",
                "return document.getElementById('edit-form') ? true : null;",
            )
            .await;
        page.js::<bool>(
            "var f = document.getElementById('edit-form'); f.payload_format.value = 'text'; f.payload.value = 'fixed'; return true;",
        )
        .await;
        page.click("#edit-form button[type=submit]").await;
        let shown: String = page
            .wait_js(
                WAIT,
                "the task page with the new payload",
                "var p = document.querySelector('[data-field=payload]'); return location.pathname === '/queues/mail/tasks/ui-1' && p ? p.textContent : null;",
            )
            .await;
        assert_eq!(shown, "fixed");
        let t = inspector.get_task_info("mail", "ui-1").await.unwrap();
        assert_eq!(t.payload, b"fixed");
        page.assert_no_console_errors("/queues/mail/tasks/ui-1").await;

        // Saving a payload unchanged keeps its bytes: a leading newline, CR
        // LF and a NUL survive the browser's textarea.
        let odd = b"\nline1\r\nline2\0\r\n".to_vec();
        inspector
            .edit_task_payload("mail", "ui-1", odd.clone())
            .await
            .unwrap();
        page.goto(&app.url("/queues/mail/tasks/ui-1/edit")).await;
        page.click("#edit-form button[type=submit]").await;
        let _: bool = page
            .wait_js(
                WAIT,
                "the task page after an unchanged save",
                "return location.pathname === '/queues/mail/tasks/ui-1' && document.querySelector('[data-field=payload]') ? true : null;",
            )
            .await;
        let t = inspector.get_task_info("mail", "ui-1").await.unwrap();
        assert_eq!(t.payload, odd);

        // And a text payload with a leading newline, likewise.
        let lead = b"\n\nindented\n".to_vec();
        inspector
            .edit_task_payload("mail", "ui-1", lead.clone())
            .await
            .unwrap();
        page.goto(&app.url("/queues/mail/tasks/ui-1/edit")).await;
        page.click("#edit-form button[type=submit]").await;
        let _: bool = page
            .wait_js(
                WAIT,
                "the task page after the second unchanged save",
                "return location.pathname === '/queues/mail/tasks/ui-1' && document.querySelector('[data-field=payload]') ? true : null;",
            )
            .await;
        let t = inspector.get_task_info("mail", "ui-1").await.unwrap();
        assert_eq!(t.payload, lead);
    })
    .await;
}
