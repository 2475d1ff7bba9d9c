//! The admin web view in a real browser: headless Chromium (Debian's `chromium`) opens the
//! page of a running server with tasks in every state, saves a screenshot under
//! `target/screenshots/`, and the test checks the status counts, a one-tool filter, that a
//! status message with `<script>` shows as text, and that the cancel button's form (its
//! action and token read from the page the browser rendered) cancels a running task, seen
//! by `tasks/get`. A forged form (no token, or from another origin) cancels nothing.
//!
//! A second test clicks the retry button of a failed task, then its fork button (from step
//! 0, the form's default): a page of the same origin opens the task's page in a window, and
//! its script clicks the button the browser rendered; the window lands on the new task's
//! page, and the new task runs.
//!
//! A third (plain HTTP, no browser) sends a live task's fail form, then the failed task's
//! retry and fork forms, and, once another version recorded a task, its form that moves it
//! back to the server's version.
//!
//! Without Chromium the tests say how to install it and return, except under CI (`CI` set),
//! where they fail.

#[path = "support/admin.rs"]
mod support;

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use rmcp::model::TaskStatus;
use support::{ADMIN_SECRET, serve, tasks_in_every_state, until_status};

/// The browser, or `None` (said, and a failure under CI) without one.
fn browser() -> Option<Browser> {
    let Some(binary) = chromium() else {
        let line = "browser test skipped: no chromium on PATH; install Debian's `chromium` \
                    package (apt-get install -y chromium) or set MCP_TASKS_CHROMIUM";
        assert!(std::env::var_os("CI").is_none(), "{line} (CI requires it)");
        eprintln!("{line}");
        return None;
    };
    Some(Browser::new(binary))
}

/// The browser: `MCP_TASKS_CHROMIUM`, else `chromium` or `chromium-browser` on PATH.
fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("MCP_TASKS_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .flat_map(|dir| ["chromium", "chromium-browser"].map(|name| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

struct Browser {
    binary: PathBuf,
    profile: PathBuf,
}

impl Browser {
    fn new(binary: PathBuf) -> Self {
        let profile = std::env::temp_dir().join(format!(
            "mcp-tasks-chromium-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        Self { binary, profile }
    }

    /// Runs headless Chromium on `url` with `extra` flags; returns stdout.
    async fn run(&self, url: &str, extra: &[String]) -> String {
        let mut command = Command::new(&self.binary);
        command
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--hide-scrollbars",
                "--window-size=1400,900",
            ])
            .arg(format!("--user-data-dir={}", self.profile.display()))
            .args(extra)
            .arg(url);
        let output = tokio::task::spawn_blocking(move || command.output())
            .await
            .unwrap()
            .expect("chromium runs");
        assert!(
            output.status.success(),
            "chromium failed on {url}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// The DOM of `url` once loaded, as Chromium serializes it.
    async fn dom(&self, url: &str) -> String {
        self.run(url, &["--dump-dom".to_owned()]).await
    }

    async fn screenshot(&self, url: &str, file: &Path) {
        let _ = std::fs::remove_file(file);
        self.run(url, &[format!("--screenshot={}", file.display())])
            .await;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// The text between `start` and the next `end` after it, in `haystack`.
fn between<'a>(haystack: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = haystack.find(start)? + start.len();
    let to = haystack[from..].find(end)? + from;
    Some(&haystack[from..to])
}

fn count(dom: &str, status: &str) -> Option<u64> {
    between(dom, &format!("data-status=\"{status}\">"), "<")?
        .parse()
        .ok()
}

/// `data-task-id` of each task row.
fn rows(dom: &str) -> Vec<(String, String)> {
    dom.match_indices("<tr class=\"task\"")
        .map(|(at, _)| {
            let row = &dom[at..];
            (
                between(row, "data-task-id=\"", "\"").unwrap().to_owned(),
                between(row, "data-tool=\"", "\"").unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_view_in_headless_chromium() {
    let Some(browser) = browser() else {
        return;
    };
    let served = serve().await;
    let ids = tasks_in_every_state(&served.client).await;
    let authority = served.base.trim_start_matches("http://");
    let page = |path: &str| format!("http://admin:{ADMIN_SECRET}@{authority}{path}");

    // The screenshot of the list, every state on it.
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let shot = shots.join("admin-tasks.png");
    browser.screenshot(&page("/admin/"), &shot).await;
    let png = std::fs::read(&shot).expect("the screenshot is saved");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "a real PNG: {} bytes",
        png.len()
    );
    eprintln!("screenshot: {}", shot.canonicalize().unwrap().display());

    // The counts, every row, and the status message shown as text, not run.
    let dom = browser.dom(&page("/admin/")).await;
    for (status, n) in [
        ("working", 2),
        ("input_required", 1),
        ("completed", 2),
        ("failed", 1),
        ("cancelled", 0),
        ("total", 6),
    ] {
        assert_eq!(count(&dom, status), Some(n), "{status} in {dom}");
    }
    assert_eq!(rows(&dom).len(), 6);
    assert!(
        dom.contains("&lt;script&gt;document.title='pwned'&lt;/script&gt; spinning &amp; waiting"),
        "the message is escaped: {dom}"
    );
    assert!(
        dom.contains("<title>Tasks · mcp-tasks admin</title>"),
        "no script ran: {dom}"
    );
    assert!(!dom.contains("<script"), "no script element: {dom}");
    assert!(dom.contains("http-equiv=\"refresh\""), "refreshes itself");

    // One tool.
    let spins = browser.dom(&page("/admin/?tool=spin")).await;
    let spin_rows = rows(&spins);
    assert_eq!(spin_rows.len(), 2, "{spins}");
    assert!(spin_rows.iter().all(|(_, tool)| tool == "spin"));
    assert_eq!(count(&spins, "total"), Some(2), "counts follow the filter");

    // The cancel button of a running task: its form, as the browser rendered it.
    let target = &ids.spin[0];
    let detail = browser.dom(&page(&format!("/admin/tasks/{target}"))).await;
    assert!(
        detail.contains("id=\"cancel\""),
        "a cancel button: {detail}"
    );
    let action = between(&detail, "<form method=\"post\" action=\"", "\"")
        .expect("the cancel form")
        .to_owned();
    let token = between(&detail, "name=\"csrf\" value=\"", "\"")
        .expect("the form's token")
        .to_owned();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let submit_to = |action: &str, origin: &str, body: String| {
        http.post(format!("{}{action}", served.base))
            .basic_auth("admin", Some(ADMIN_SECRET))
            .header("origin", origin)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
    };
    let submit = |origin: &str, body: String| submit_to(&action, origin, body);
    // Forged: from another site, or without the token. Nothing is cancelled.
    let cross = submit("http://evil.example", format!("csrf={token}"))
        .await
        .unwrap();
    assert_eq!(cross.status().as_u16(), 403);
    let tokenless = submit(&served.base, String::new()).await.unwrap();
    assert_eq!(tokenless.status().as_u16(), 403);
    let other_task = submit(&served.base, format!("csrf={}", "0".repeat(64)))
        .await
        .unwrap();
    assert_eq!(other_task.status().as_u16(), 403);
    // Then a genuine form, of the other running task: once its cancel took effect, a
    // forged one, sent before it the same way, would have too.
    let other = &ids.spin[1];
    let other_page = http
        .get(format!("{}/admin/tasks/{other}", served.base))
        .basic_auth("admin", Some(ADMIN_SECRET))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let other_action = between(&other_page, "<form method=\"post\" action=\"", "\"")
        .expect("the other task's cancel form")
        .to_owned();
    let other_token = between(&other_page, "name=\"csrf\" value=\"", "\"")
        .expect("the other form's token")
        .to_owned();
    let genuine = submit_to(&other_action, &served.base, format!("csrf={other_token}"))
        .await
        .unwrap();
    assert_eq!(genuine.status().as_u16(), 303);
    until_status(&served.client, other, TaskStatus::Cancelled).await;
    let still = served.client.task(target).await.unwrap();
    assert_eq!(
        still.status(),
        TaskStatus::Working,
        "a forged form cancels nothing"
    );

    let sent = submit(&served.base, format!("csrf={token}")).await.unwrap();
    assert_eq!(sent.status().as_u16(), 303, "{:?}", sent.text().await);
    until_status(&served.client, target, TaskStatus::Cancelled).await;
    let after = browser.dom(&page(&format!("/admin/tasks/{target}"))).await;
    assert!(after.contains("id=\"status\">cancelled<"), "{after}");
    assert!(
        !after.contains("id=\"cancel\""),
        "no button on an ended task"
    );
    let list = browser.dom(&page("/admin/")).await;
    assert_eq!(count(&list, "cancelled"), Some(2));
    assert_eq!(count(&list, "working"), Some(0));

    // Without the credential the browser gets the sign-in challenge, not the page.
    let anonymous = browser.dom(&format!("{}/admin/", served.base)).await;
    assert!(!anonymous.contains("data-task-id"), "{anonymous}");
}

/// A page that opens the page of task `id` in a window of its own (the admin pages may not
/// be framed), clicks its `button` once it loaded, then writes where that window landed
/// into `#landed`. Behind the admin view's Basic challenge (the same realm), so the browser
/// signs in once for both.
async fn clicking_page(
    axum::extract::Path((id, button)): axum::extract::Path<(String, String)>,
    headers: axum::http::HeaderMap,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    if !headers.contains_key("authorization") {
        let challenge = "Basic realm=\"mcp-tasks admin\", charset=\"UTF-8\"";
        return (
            axum::http::StatusCode::UNAUTHORIZED,
            [("www-authenticate", challenge)],
        )
            .into_response();
    }
    let page = format!("/admin/tasks/{id}");
    axum::response::Html(format!(
        "<!doctype html><html><body><p id=\"landed\"></p><script>\
         const w = window.open('{page}', 'task');\
         const out = document.getElementById('landed');\
         let clicked = false;\
         const timer = setInterval(() => {{\
           try {{\
             if (w.document.readyState !== 'complete') return;\
             if (!clicked) {{\
               const button = w.document.getElementById('{button}');\
               if (button) {{ clicked = true; button.click(); }}\
             }} else if (w.location.pathname !== '{page}') {{\
               out.textContent = w.location.pathname; clearInterval(timer);\
             }}\
           }} catch (e) {{ out.textContent = 'error: ' + e; clearInterval(timer); }}\
         }}, 50);</script></body></html>"
    ))
    .into_response()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_click_on_retry_and_on_fork_in_headless_chromium() {
    let Some(browser) = browser() else {
        return;
    };
    let server = mcp_tasks::TaskServer::new(mcp_tasks::toolkit![support::boom].unwrap());
    let credential = mcp_tasks::admin::AdminCredential::new(ADMIN_SECRET).unwrap();
    let app = mcp_tasks::http_router(server.clone(), mcp_tasks::HttpOptions::new())
        .merge(mcp_tasks::admin::router(server.engine(), credential))
        .route("/click/{id}/{button}", axum::routing::get(clicking_page));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let authority = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let endpoint = mcp_tasks::client::Endpoint::http(format!("http://{authority}/mcp"));
    let client = mcp_tasks::client::TaskClient::connect(&endpoint)
        .await
        .unwrap();
    let old = support::start(&client, "boom", serde_json::json!({})).await;
    let old = old.id().to_owned();
    until_status(&client, &old, TaskStatus::Failed).await;

    for button in ["retry", "fork"] {
        let url = format!("http://admin:{ADMIN_SECRET}@{authority}/click/{old}/{button}");
        let flags = [
            "--dump-dom",
            "--virtual-time-budget=10000",
            "--disable-popup-blocking",
        ];
        let dom = browser.run(&url, &flags.map(str::to_owned)).await;
        let landed = between(&dom, "<p id=\"landed\">", "</p>")
            .unwrap_or_else(|| panic!("{button}: the window landed somewhere: {dom}"));
        let new = landed
            .strip_prefix("/admin/tasks/")
            .unwrap_or_else(|| panic!("{button}: on a task's page: {landed} in {dom}"));
        assert!(
            !new.is_empty() && new != old,
            "{button}: on the new task's page: {landed}"
        );
        // The new task is `boom` again: it runs, and fails again; the old one stays failed.
        until_status(&client, new, TaskStatus::Failed).await;
        assert_eq!(
            client.task(&old).await.unwrap().status(),
            TaskStatus::Failed
        );
    }
}

/// The page of a live task has a fail form (with a reason) and, once another version of its
/// tool recorded it, a form that moves it to this server's version; each form, sent with
/// its token from this origin, does what it says (a forged one, nothing), and a reason over
/// 500 bytes is refused with what to fix. Plain HTTP: what the browser would send.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fail_and_version_forms() {
    let served = serve().await;
    let ids = tasks_in_every_state(&served.client).await;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let base = served.base.as_str();
    let detail = |id: String| {
        let request = http.get(format!("{base}/admin/tasks/{id}"));
        async move {
            let response = request.basic_auth("admin", Some(ADMIN_SECRET)).send();
            response.await.unwrap().text().await.unwrap()
        }
    };
    let send = |id: &str, form: &str, origin: &str, body: String| {
        http.post(format!("{base}/admin/tasks/{id}/{form}"))
            .basic_auth("admin", Some(ADMIN_SECRET))
            .header("origin", origin)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
    };
    let token = |page: &str| {
        between(page, "name=\"csrf\" value=\"", "\"")
            .expect("a form's token")
            .to_owned()
    };

    // Every page's headers: no script, no frame, no address sent elsewhere, no cache.
    let list = http.get(format!("{base}/admin/"));
    let list = list
        .basic_auth("admin", Some(ADMIN_SECRET))
        .send()
        .await
        .unwrap();
    for (name, value) in [
        ("x-frame-options", "DENY"),
        ("referrer-policy", "same-origin"),
        ("cache-control", "no-store"),
    ] {
        assert_eq!(list.headers()[name], value, "{name}");
    }
    let policy = list.headers()["content-security-policy"].to_str().unwrap();
    assert!(policy.starts_with("default-src 'none';"), "{policy}");
    assert!(
        policy.ends_with("frame-ancestors 'none'; base-uri 'none'"),
        "{policy}"
    );

    // Fail, with a reason; a forged form first, which fails nothing.
    let (target, other) = (&ids.spin[0], &ids.spin[1]);
    let page = detail(target.clone()).await;
    assert!(page.contains("id=\"fail\""), "a fail form: {page}");
    assert!(
        !page.contains("id=\"version\""),
        "its version runs here: {page}"
    );
    let csrf = token(&page);
    let forged = send(
        target,
        "fail",
        "http://evil.example",
        format!("csrf={csrf}&reason=x"),
    );
    assert_eq!(forged.await.unwrap().status().as_u16(), 403);
    let long = format!("csrf={csrf}&reason={}", "x".repeat(501));
    let refused = send(target, "fail", base, long).await.unwrap();
    assert_eq!(refused.status().as_u16(), 400);
    let why = refused.text().await.unwrap();
    assert!(why.contains("at most 500 bytes"), "{why}");
    let body = format!("csrf={csrf}&reason=stuck+upstream");
    let failed = send(target, "fail", base, body).await.unwrap();
    assert_eq!(failed.status().as_u16(), 303);
    until_status(&served.client, target, TaskStatus::Failed).await;
    let page = detail(target.clone()).await;
    assert!(
        page.contains("failed by an operator: stuck upstream"),
        "{page}"
    );
    assert!(
        !page.contains("id=\"fail\""),
        "no fail form on an ended task"
    );

    // Its retry and fork forms (without a browser): each leads to the new task's page; a
    // fork from no step number is refused.
    let csrf = token(&page);
    for (form, body) in [("retry", ""), ("fork", "&step=0")] {
        let sent = send(target, form, base, format!("csrf={csrf}{body}"));
        let sent = sent.await.unwrap();
        assert_eq!(sent.status().as_u16(), 303, "{form}");
        let to = sent.headers()["location"].to_str().unwrap();
        assert!(to.starts_with("/admin/tasks/"), "{form}: {to}");
        assert!(
            !to.ends_with(target.as_str()),
            "{form}: a new task, not {to}"
        );
    }
    let bad = send(target, "fork", base, format!("csrf={csrf}&step=x"));
    assert_eq!(bad.await.unwrap().status().as_u16(), 400);

    // Recorded by another version (the admin API moves it): the page offers this server's.
    let moved = http
        .post(format!("{base}/admin/api/tasks/{other}/version?to=7"))
        .bearer_auth(ADMIN_SECRET)
        .send()
        .await
        .unwrap();
    assert_eq!(moved.status().as_u16(), 200);
    let page = detail(other.clone()).await;
    assert!(page.contains("id=\"version\""), "a version form: {page}");
    let sent = send(other, "version", base, format!("csrf={}", token(&page)));
    assert_eq!(sent.await.unwrap().status().as_u16(), 303);
    let page = detail(other.clone()).await;
    assert!(
        !page.contains("id=\"version\""),
        "back on this server's version: {page}"
    );
    assert!(!page.contains("<td>7</td>"), "{page}");
}
