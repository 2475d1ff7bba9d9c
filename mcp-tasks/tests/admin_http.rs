//! The admin API over real sockets: a server with tasks in every state on 127.0.0.1:0, the
//! admin router beside the MCP one; its credential, its filters (bad ones answer 400 naming
//! the parameter), pages, detail, cancel (seen by `tasks/get`) and purge.

#[path = "support/admin.rs"]
mod support;

use mcp_tasks::{
    HttpOptions, Owner, StaticTokens, TaskServer,
    admin::{self, AdminCredential},
};
use rmcp::model::TaskStatus;
use serde_json::Value;
use support::{ADMIN_SECRET, SCRIPT_MESSAGE, serve, tasks_in_every_state, until_status};

async fn get(url: &str) -> (u16, Value) {
    let response = reqwest::Client::new()
        .get(url)
        .bearer_auth(ADMIN_SECRET)
        .send()
        .await
        .expect("the admin API answers");
    read(response).await
}

async fn post(url: &str) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(url)
        .bearer_auth(ADMIN_SECRET)
        .send()
        .await
        .expect("the admin API answers");
    read(response).await
}

async fn read(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or_else(|_| panic!("JSON, not {text:?}"));
    (status, body)
}

fn ids(body: &Value) -> Vec<String> {
    body["tasks"]
        .as_array()
        .expect("a list of tasks")
        .iter()
        .map(|task| task["taskId"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_counts_details_cancels_and_purges() {
    let served = serve().await;
    let api = format!("{}/admin/api", served.base);
    let ids_of = tasks_in_every_state(&served.client).await;

    let (status, all) = get(&format!("{api}/tasks")).await;
    assert_eq!(status, 200, "{all}");
    assert_eq!(ids(&all).len(), 6);
    assert!(all["nextCursor"].is_null());

    // Without the credential every route is refused, and the refused ones changed nothing:
    // the destructive purge (three tasks had ended) and cancel too. The counts below are
    // still those of the tasks as they were made.
    let anonymous = reqwest::Client::new();
    for (method, path) in [
        ("GET", "tasks".to_owned()),
        ("GET", "counts".to_owned()),
        ("GET", format!("tasks/{}", ids_of.boom)),
        ("GET", format!("tasks/{}", ids_of.ask)),
        ("POST", "purge".to_owned()),
        ("POST", format!("tasks/{}/cancel", ids_of.spin[0])),
    ] {
        let url = format!("{api}/{path}");
        let request = if method == "GET" {
            anonymous.get(&url)
        } else {
            anonymous.post(&url)
        };
        let response = request.send().await.expect("the admin API answers");
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        assert_eq!(status, 401, "{method} {path} without a credential: {text}");
        assert!(!text.contains(&ids_of.boom), "{method} {path}: {text}");
    }
    let (_, unchanged) = get(&format!("{api}/tasks")).await;
    assert_eq!(
        ids(&unchanged),
        ids(&all),
        "the refused requests removed no task"
    );
    let (_, spins) = get(&format!("{api}/tasks?tool=spin")).await;
    let mut spin_ids = ids(&spins);
    spin_ids.sort();
    let mut expected = ids_of.spin.to_vec();
    expected.sort();
    assert_eq!(spin_ids, expected);
    for task in spins["tasks"].as_array().unwrap() {
        assert_eq!(task["status"], "working");
        assert_eq!(task["statusMessage"], SCRIPT_MESSAGE);
    }
    let (_, ended) = get(&format!("{api}/tasks?status=completed,failed")).await;
    assert_eq!(ids(&ended).len(), 3);
    let (_, counts) = get(&format!("{api}/counts")).await;
    assert_eq!(
        [
            &counts["working"],
            &counts["input_required"],
            &counts["completed"],
            &counts["failed"],
            &counts["cancelled"],
            &counts["total"]
        ],
        [2, 1, 2, 1, 0, 6].map(Value::from).each_ref()
    );

    // Pages of two, bound to their filter.
    let (_, first) = get(&format!("{api}/tasks?limit=4")).await;
    let cursor = first["nextCursor"]
        .as_str()
        .expect("more than four")
        .to_owned();
    let (_, second) = get(&format!("{api}/tasks?limit=4&cursor={cursor}")).await;
    let mut paged = ids(&first);
    paged.extend(ids(&second));
    assert_eq!(paged, ids(&all), "two pages, every task once, newest first");
    let (status, refused) = get(&format!("{api}/tasks?tool=spin&cursor={cursor}")).await;
    assert_eq!(status, 400);
    assert_eq!(refused["error"]["parameter"], "cursor");

    // Detail: the failed task's error, the open question.
    let (status, boom) = get(&format!("{api}/tasks/{}", ids_of.boom)).await;
    assert_eq!(status, 200);
    assert_eq!(boom["task"]["status"], "failed");
    assert_eq!(boom["error"]["message"], "the upstream API refused the job");
    let (_, ask) = get(&format!("{api}/tasks/{}", ids_of.ask)).await;
    assert_eq!(
        ask["questions"].as_object().map(|q| q.len()),
        Some(1),
        "{ask}"
    );
    let (_, quick) = get(&format!("{api}/tasks/{}", ids_of.quick[0])).await;
    assert!(quick["result"]["content"].is_array(), "{quick}");
    let (status, unknown) = get(&format!("{api}/tasks/no-such-task")).await;
    assert_eq!(status, 404, "{unknown}");

    // Cancel, as the operator, a task another principal owns: its work stops.
    let target = &ids_of.spin[0];
    let (status, cancelled) = post(&format!("{api}/tasks/{target}/cancel")).await;
    assert_eq!(
        (status, &cancelled["outcome"]),
        (200, &Value::from("cancel_requested"))
    );
    until_status(&served.client, target, TaskStatus::Cancelled).await;
    let (_, again) = post(&format!("{api}/tasks/{target}/cancel")).await;
    assert_eq!(again["outcome"], "already_ended");
    assert_eq!(again["status"], "cancelled");
    let (status, _) = post(&format!("{api}/tasks/no-such-task/cancel")).await;
    assert_eq!(status, 404);

    // Purge: the four finished tasks go, the live ones stay.
    let (status, purged) = post(&format!("{api}/purge?older_than=1h")).await;
    assert_eq!(
        (status, &purged["purged"]),
        (200, &Value::from(0)),
        "none is an hour old"
    );
    let (status, purged) = post(&format!("{api}/purge")).await;
    assert_eq!((status, &purged["purged"]), (200, &Value::from(4)));
    let (_, left) = get(&format!("{api}/tasks")).await;
    let mut left = ids(&left);
    left.sort();
    let mut live = vec![ids_of.spin[1].clone(), ids_of.ask.clone()];
    live.sort();
    assert_eq!(left, live);
    let (status, _) = get(&format!("{api}/tasks/{}", ids_of.boom)).await;
    assert_eq!(status, 404, "purged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_filters_answer_400_naming_the_parameter() {
    let served = serve().await;
    let api = format!("{}/admin/api", served.base);
    for (path, parameter) in [
        ("tasks?status=running", "status"),
        ("tasks?status=working,done", "status"),
        ("tasks?limit=0", "limit"),
        ("tasks?limit=lots", "limit"),
        ("tasks?stalled=a-while", "stalled"),
        ("tasks?created_after=yesterday", "created_after"),
        (
            "tasks?created_before=2026-13-40T00:00:00Z",
            "created_before",
        ),
        ("tasks?cursor=not-a-cursor", "cursor"),
        ("tasks?tool=a&tool=b", "tool"),
        ("tasks?tol=spin", "tol"),
        ("counts?cursor=abc", "cursor"),
        ("counts?stalled=5", "stalled"),
        ("purge?older_than=old", "older_than"),
        ("purge?before=never", "before"),
        ("purge?status=completed", "status"),
    ] {
        let url = format!("{api}/{path}");
        let (status, body) = if path.starts_with("purge") {
            post(&url).await
        } else {
            get(&url).await
        };
        assert_eq!(status, 400, "{path}: {body}");
        assert_eq!(body["error"]["parameter"], parameter, "{path}: {body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with(&format!("query parameter `{parameter}`: "))),
            "{path}: the message names what is wrong: {body}"
        );
    }
    let (status, _) = get(&format!(
        "{api}/tasks?stalled=90s&created_after=2h&limit=500"
    ))
    .await;
    assert_eq!(status, 200, "good values pass");
}

/// The API reads no body: a purge whose filter was put in a JSON body (which would purge every
/// finished task) is refused with 400 and a message pointing to the query string, and
/// purges nothing; so is a body sent in pieces. Without one the same purge works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_is_refused_not_ignored() {
    let served = serve().await;
    let api = format!("{}/admin/api", served.base);
    tasks_in_every_state(&served.client).await;
    let client = reqwest::Client::new();
    let chunks = futures::stream::iter([Ok::<_, std::io::Error>(r#"{"older_than":"1h"}"#)]);
    for body in [
        reqwest::Body::from(r#"{"older_than":"1h"}"#),
        reqwest::Body::wrap_stream(chunks),
    ] {
        let request = client
            .post(format!("{api}/purge"))
            .bearer_auth(ADMIN_SECRET);
        let response = request.body(body).send().await.unwrap();
        let (status, refused) = read(response).await;
        assert_eq!(status, 400, "{refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(message.contains("query string"), "{message}");
    }
    let (status, purged) = post(&format!("{api}/purge?older_than=1h")).await;
    assert_eq!((status, &purged["purged"]), (200, &Value::from(0)));
    let (_, all) = get(&format!("{api}/tasks")).await;
    assert_eq!(ids(&all).len(), 6, "the refused purges purged nothing");
}

/// 401 without the admin credential (none, a wrong one, HTTP Basic on the API, a user's MCP
/// token); the admin credential opens nothing on the MCP path, and nothing admin is served
/// under it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_api_takes_only_its_own_credential() {
    const USER_TOKEN: &str = "user-token-abcdefghijklmnop";
    let server = TaskServer::new(mcp_tasks::toolkit![support::quick].expect("toolkit"));
    let options = HttpOptions::new()
        .with_bearer(StaticTokens::new().with_token(USER_TOKEN, Owner::new("alice")));
    let app = mcp_tasks::http_router(server.clone(), options).merge(admin::router(
        server.engine(),
        AdminCredential::new(ADMIN_SECRET).unwrap(),
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let http = reqwest::Client::new();
    let tasks = format!("{base}/admin/api/tasks");

    let none = http.get(&tasks).send().await.unwrap();
    assert_eq!(none.status().as_u16(), 401);
    assert!(none.headers().contains_key("www-authenticate"));
    let body: Value = serde_json::from_str(&none.text().await.unwrap()).unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("credential")
    );
    for (what, request) in [
        (
            "a wrong token",
            http.get(&tasks).bearer_auth("admin-secret-0123456788"),
        ),
        (
            "a user's MCP token",
            http.get(&tasks).bearer_auth(USER_TOKEN),
        ),
        (
            "HTTP Basic on the API",
            http.get(&tasks).basic_auth("admin", Some(ADMIN_SECRET)),
        ),
        (
            "the credential as a query parameter",
            http.get(format!("{tasks}?token={ADMIN_SECRET}")),
        ),
    ] {
        let status = request.send().await.unwrap().status().as_u16();
        assert_eq!(status, 401, "{what}");
    }
    let cancel = http
        .post(format!("{tasks}/some-task/cancel"))
        .bearer_auth(USER_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(
        cancel.status().as_u16(),
        401,
        "a user's token cancels nothing here"
    );
    let ok = http
        .get(&tasks)
        .bearer_auth(ADMIN_SECRET)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status().as_u16(), 200);

    // The MCP path: the admin credential is not a user's token there, and the admin routes
    // are not under it.
    let mcp = http
        .post(format!("{base}/mcp"))
        .bearer_auth(ADMIN_SECRET)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(
        mcp.status().as_u16(),
        401,
        "the admin credential is no MCP token"
    );
    for path in ["/mcp/admin/api/tasks", "/mcp/api/tasks"] {
        let response = http
            .get(format!("{base}{path}"))
            .bearer_auth(ADMIN_SECRET)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        assert!(
            status == 404 || status == 401,
            "{path} answered {status}: {text}"
        );
        assert!(!text.contains("\"tasks\""), "{path} served the admin list");
    }
}

/// Merged beside `/mcp`, the admin router guards its own paths only: any other path is a
/// plain 404, without a credential prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_outside_admin_are_404_without_a_prompt() {
    let served = serve().await;
    let http = reqwest::Client::new();
    for path in ["/foo", "/favicon.ico", "/admin-not", "/mcp/extra"] {
        let response = http
            .get(format!("{}{path}", served.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 404, "{path}");
        assert!(
            response.headers().get("www-authenticate").is_none(),
            "{path}: {:?}",
            response.headers()
        );
    }
    // The admin paths themselves still ask for the credential.
    for path in ["/admin", "/admin/api/tasks"] {
        let response = http
            .get(format!("{}{path}", served.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 401, "{path}");
        assert!(
            response.headers().get("www-authenticate").is_some(),
            "{path}"
        );
    }
}
