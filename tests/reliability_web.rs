//! Issue 12, dashboard items over real HTTP against the `asynqdeck`
//! binary: R9 (every queue name Go accepts is reachable from the links the
//! pages render) and R15 (a loopback listener refuses foreign `Host`
//! names: DNS rebinding).

use asynqdeck::{Client, EnqueueOptions, Inspector, Task, TaskState};

use crate::support::http::{Reply, ServeBin, anchors, attr_values, follow, request, unescape};
use crate::support::{self, TestDb};

/// GET `path` with `Host: <host>` (and `Origin` when given).
async fn get_as(addr: &str, host: &str, origin: Option<&str>, path: &str) -> Reply {
    let mut headers = vec![("Host", host)];
    if let Some(o) = origin {
        headers.push(("Origin", o));
    }
    request(addr, "GET", path, &headers, "").await
}

/// The per-process CSRF token a page carries in `hx-headers`.
fn csrf_token(html: &str) -> String {
    let start = html
        .find("\"X-CSRF-Token\": \"")
        .expect("the page carries the CSRF token")
        + "\"X-CSRF-Token\": \"".len();
    html[start..start + html[start..].find('"').unwrap()].to_string()
}

/// An htmx POST of `path` as the dashboard's own page sends it from
/// `http://<host>` (Origin, same-origin fetch metadata, CSRF token).
async fn post_as(addr: &str, host: &str, token: &str, path: &str) -> Reply {
    let origin = format!("http://{host}");
    request(
        addr,
        "POST",
        path,
        &[
            ("Host", host),
            ("Origin", &origin),
            ("Sec-Fetch-Site", "same-origin"),
            ("HX-Request", "true"),
            ("X-CSRF-Token", token),
        ],
        "",
    )
    .await
}

async fn seed_queue(db: &TestDb, queue: &str, id: &str) {
    Client::connect(&db.url())
        .await
        .unwrap()
        .enqueue(
            &Task::new("probe", format!("payload of {id}")),
            EnqueueOptions::new().queue(queue).task_id(id),
        )
        .await
        .unwrap();
}

// ------------------------------------------------------------------ R15

/// R15: with `Host` and `Origin` both `evil.example:<port>` (a DNS
/// rebinding page), a dashboard listening on loopback answers 421 to reads
/// and to POSTs (the queue stays unpaused), for pages, `/api` and
/// `/static` alike. Loopback names (`localhost`, `*.localhost`,
/// 127.0.0.0/8, `[::1]`, any case, with or without port) pass, and so do
/// names given with `--allowed-hosts` or `ASYNQDECK_ALLOWED_HOSTS`. A
/// listener on every interface accepts any `Host` unless
/// `--allowed-hosts` is given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r15_foreign_host_is_refused_on_loopback() {
    let db = support::redis();
    seed_queue(&db, "mail", "t1").await;
    let insp = Inspector::connect(&db.url()).await.unwrap();
    let app = ServeBin::start(&db.url(), &["--listen", "127.0.0.1:0", "--no-engine"], &[]).await;
    let port = app.port();
    let own = format!("127.0.0.1:{port}");
    let page = get_as(&app.addr, &own, None, "/").await;
    assert_eq!(page.status, 200, "{}", page.body);
    let token = csrf_token(&page.body);

    let evil = format!("evil.example:{port}");
    let evil_origin = format!("http://{evil}");
    for path in ["/", "/queues/mail/pending", "/api/queues", "/static/app.js"] {
        let r = get_as(&app.addr, &evil, Some(&evil_origin), path).await;
        assert_eq!(r.status, 421, "GET {path} with Host {evil}: {}", r.body);
        assert!(
            r.body.contains("Host \"evil.example\" is not allowed"),
            "GET {path}: {}",
            r.body
        );
    }
    let r = post_as(&app.addr, &evil, &token, "/queues/mail/pause").await;
    assert_eq!(r.status, 421, "POST with Host {evil}: {}", r.body);
    let r = request(
        &app.addr,
        "POST",
        "/api/queues/mail:pause",
        &[("Host", &evil), ("Origin", &evil_origin)],
        "",
    )
    .await;
    assert_eq!(r.status, 421, "API POST with Host {evil}: {}", r.body);
    assert!(!insp.queue_info("mail").await.unwrap().paused);

    for host in [
        own.clone(),
        format!("localhost:{port}"),
        format!("LocalHost:{port}"),
        "localhost".to_string(),
        format!("dash.localhost:{port}"),
        format!("127.8.9.10:{port}"),
        format!("[::1]:{port}"),
    ] {
        let r = get_as(&app.addr, &host, None, "/queues/mail/pending").await;
        assert_eq!(r.status, 200, "GET with Host {host}: {}", r.body);
        assert!(r.body.contains(r#"data-id="t1""#), "Host {host}");
    }
    for host in [
        format!("127.0.0.1.evil.example:{port}"),
        format!("localhost.evil.example:{port}"),
        format!("[::2]:{port}"),
        format!("10.0.0.1:{port}"),
    ] {
        let r = get_as(&app.addr, &host, None, "/").await;
        assert_eq!(r.status, 421, "GET with Host {host}: {}", r.body);
    }
    let r = post_as(
        &app.addr,
        &format!("localhost:{port}"),
        &token,
        "/queues/mail/pause",
    )
    .await;
    assert_eq!(r.status, 200, "POST from localhost: {}", r.body);
    assert!(insp.queue_info("mail").await.unwrap().paused);
    insp.unpause_queue("mail").await.unwrap();
    drop(app);

    // --allowed-hosts, and its variable: those names pass, others not.
    let by_flag = ServeBin::start(
        &db.url(),
        &[
            "--listen",
            "127.0.0.1:0",
            "--no-engine",
            "--allowed-hosts",
            "dash.example, Other.Example",
        ],
        &[],
    )
    .await;
    let by_env = ServeBin::start(
        &db.url(),
        &["--listen", "127.0.0.1:0", "--no-engine"],
        &[("ASYNQDECK_ALLOWED_HOSTS", "dash.example,other.example")],
    )
    .await;
    for app in [&by_flag, &by_env] {
        let port = app.port();
        for (host, want) in [
            (format!("dash.example:{port}"), 200),
            (format!("OTHER.example:{port}"), 200),
            ("dash.example".to_string(), 200),
            (format!("localhost:{port}"), 200),
            (format!("evil.example:{port}"), 421),
            (format!("sub.dash.example:{port}"), 421),
        ] {
            let r = get_as(&app.addr, &host, None, "/").await;
            assert_eq!(r.status, want, "GET with Host {host}: {}", r.body);
        }
    }
    let host = format!("dash.example:{}", by_flag.port());
    let token = csrf_token(&get_as(&by_flag.addr, &host, None, "/").await.body);
    let r = post_as(&by_flag.addr, &host, &token, "/queues/mail/pause").await;
    assert_eq!(r.status, 200, "POST from an allowed host: {}", r.body);
    assert!(insp.queue_info("mail").await.unwrap().paused);
    insp.unpause_queue("mail").await.unwrap();
    drop((by_flag, by_env));

    // Every interface: any Host, unless --allowed-hosts narrows it.
    let open = ServeBin::start(&db.url(), &["--listen", "0.0.0.0:0", "--no-engine"], &[]).await;
    let addr = format!("127.0.0.1:{}", open.port());
    let r = get_as(&addr, &format!("evil.example:{}", open.port()), None, "/").await;
    assert_eq!(r.status, 200, "any Host on 0.0.0.0: {}", r.body);
    let narrowed = ServeBin::start(
        &db.url(),
        &[
            "--listen",
            "0.0.0.0:0",
            "--no-engine",
            "--allowed-hosts",
            "dash.example",
        ],
        &[],
    )
    .await;
    let addr = format!("127.0.0.1:{}", narrowed.port());
    for (host, want) in [
        ("evil.example", 421),
        ("dash.example", 200),
        ("localhost", 200),
    ] {
        let r = get_as(&addr, host, None, "/").await;
        assert_eq!(
            r.status, want,
            "0.0.0.0 with --allowed-hosts, Host {host}: {}",
            r.body
        );
    }
}

// ------------------------------------------------------------------- R9

/// Queue names a browser or a URL parser could mangle, each valid for Go
/// (`ValidateQueueName`: anything not blank).
pub const NASTY_QUEUES: &[&str] = &[
    "..",
    ".",
    "...",
    "..~",
    ".~",
    "~",
    "a/b",
    "../x",
    "a/../b",
    "a?b=c",
    "a#b",
    "100%",
    "%2E%2E",
    "%2e",
    "with space",
    " lead",
    "ünï 😀",
    "a&b<c>\"d'",
    "+plus",
    "tasks",
    "a;b",
    "back\\slash",
    "x}y{",
];

/// The text of the page's `<h1>` up to its first inner tag, decoded.
fn h1(html: &str) -> String {
    let start = html.find("<h1>").expect("the page has an h1") + 4;
    let rest = &html[start..];
    let end = rest.find(['<']).unwrap();
    unescape(rest[..end].trim())
}

/// The part of `html` from `from` to the next `to`.
fn section<'a>(html: &'a str, from: &str, to: &str) -> &'a str {
    let start = html
        .find(from)
        .unwrap_or_else(|| panic!("no {from:?} in the page"));
    let rest = &html[start..];
    &rest[..rest.find(to).unwrap_or(rest.len())]
}

/// R9: for every name of [`NASTY_QUEUES`] the links the pages render,
/// resolved as a browser resolves them (WHATWG URL parsing, which drops
/// `.` and `..` segments, `%2E` forms included), reach that queue: its row
/// link on the queues page, all seven tab links, the task link of its
/// pending row, the task page, the daily history link, and the POST
/// targets of its Pause button and of the task's Archive button (both act
/// on that queue in Redis).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r9_every_queue_name_is_reachable_from_its_links() {
    let db = support::redis();
    for (i, q) in NASTY_QUEUES.iter().enumerate() {
        seed_queue(&db, q, &format!("task-{i}")).await;
    }
    let insp = Inspector::connect(&db.url()).await.unwrap();
    let app = ServeBin::start(&db.url(), &["--listen", "127.0.0.1:0", "--no-engine"], &[]).await;
    let host = app.addr.clone();
    let get = |path: String| {
        let (addr, host) = (app.addr.clone(), host.clone());
        async move {
            let r = get_as(&addr, &host, None, &path).await;
            assert_eq!(r.status, 200, "GET {path}: {}", r.body);
            r.body
        }
    };
    let queues_page = get("/".to_string()).await;
    let token = csrf_token(&queues_page);
    let rows: Vec<&str> = section(&queues_page, "<tbody>", "</tbody>")
        .split("<tr")
        .skip(1)
        .collect();
    for (i, q) in NASTY_QUEUES.iter().enumerate() {
        let id = format!("task-{i}");
        let row = rows
            .iter()
            .find(|r| anchors(r).first().is_some_and(|(_, text)| text == q.trim()))
            .unwrap_or_else(|| panic!("no row for queue {q:?} on the queues page"));
        let (href, _) = &anchors(row)[0];
        let path = follow(&host, "/", href);
        let queue_page = get(path.clone()).await;
        assert_eq!(h1(&queue_page), format!("Queue {q}"), "{href:?} -> {path}");

        // The seven tabs.
        let tabs = anchors(section(&queue_page, "<nav class=\"tabs\"", "</nav>"));
        assert_eq!(tabs.len(), 7, "{q:?}: {tabs:?}");
        for (tab_href, label) in &tabs {
            let tab_path = follow(&host, &path, tab_href);
            let tab = get(tab_path.clone()).await;
            assert_eq!(
                h1(&tab),
                format!("Queue {q}"),
                "tab {label:?} of {q:?}: {tab_href:?} -> {tab_path}"
            );
            let current = section(&tab, "<nav class=\"tabs\"", "</nav>");
            let current = section(current, "aria-current=\"page\"", "</a>");
            assert!(
                current.contains(&label.split(' ').next().unwrap().to_string()),
                "tab {label:?} of {q:?} is the current one: {current}"
            );
            if label.starts_with("Pending") {
                assert!(
                    tab.contains(&format!("data-id=\"{id}\"")),
                    "the pending tab of {q:?} shows {id}"
                );
            }
        }
        let pending_path = follow(&host, &path, &tabs[1].0);
        let pending = get(pending_path.clone()).await;
        let id_cell = section(&pending, "<td class=\"id\">", "</td>");
        let (task_href, _) = &anchors(id_cell)[0];
        let task_path = follow(&host, &pending_path, task_href);
        let task_page = get(task_path.clone()).await;
        assert_eq!(h1(&task_page), "Task", "{task_path}");
        assert!(
            task_page.contains(&format!("<span class=\"mono\">{id}</span>")),
            "the task page of {q:?} shows {id}: {task_path}"
        );

        // Daily history.
        let (history_href, _) = anchors(&queue_page)
            .into_iter()
            .find(|(_, t)| t == "Daily history")
            .expect("a history link");
        let history_path = follow(&host, &path, &history_href);
        let history = get(history_path.clone()).await;
        assert!(
            history.contains(&format!("← Queue {}", askama_escape(q))),
            "the history page of {q:?}: {history_path}"
        );

        // POST targets: Pause on the queues page, Archive on the task page.
        let pause = attr_values(row, "hx-post")
            .into_iter()
            .find(|p| p.ends_with("/pause"))
            .expect("a Pause button");
        let r = post_as(&app.addr, &host, &token, &follow(&host, "/", &pause)).await;
        assert_eq!(r.status, 200, "pause {q:?} via {pause:?}: {}", r.body);
        assert!(insp.queue_info(q).await.unwrap().paused, "{q:?} paused");
        let archive = attr_values(&task_page, "hx-post")
            .into_iter()
            .find(|p| p.contains("/archive?"))
            .expect("an Archive button");
        let r = post_as(
            &app.addr,
            &host,
            &token,
            &follow(&host, &task_path, &archive),
        )
        .await;
        assert_eq!(
            r.status, 200,
            "archive {id} of {q:?} via {archive:?}: {}",
            r.body
        );
        assert_eq!(
            insp.get_task_info(q, &id).await.unwrap().state,
            TaskState::Archived,
            "{id} of {q:?}"
        );
    }
}

/// askama's HTML escaping of text (`<>&"'`).
fn askama_escape(s: &str) -> String {
    s.replace('&', "&#38;")
        .replace('<', "&#60;")
        .replace('>', "&#62;")
        .replace('"', "&#34;")
        .replace('\'', "&#39;")
}
