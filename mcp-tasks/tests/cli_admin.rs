//! `mcp-tasks admin list|show|cancel|retry|fork|fail|version|purge` against a real server on
//! 127.0.0.1:0 with tasks in every state: table and `--json` output, the cancel seen by
//! `tasks/get`, exit codes (0 done, 4 refused or unusable).

#[path = "support/admin.rs"]
mod support;

use std::time::Duration;

use rmcp::model::TaskStatus;
use serde_json::Value;
use support::{ADMIN_SECRET, serve, tasks_in_every_state, until_status};

const BIN: &str = env!("CARGO_BIN_EXE_mcp-tasks");

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

async fn admin(token: Option<&str>, args: &[&str]) -> Run {
    let mut command = tokio::process::Command::new(BIN);
    command.arg("admin").args(args).kill_on_drop(true);
    match token {
        Some(token) => command.env("MCP_TASKS_ADMIN_TOKEN", token),
        None => command.env_remove("MCP_TASKS_ADMIN_TOKEN"),
    };
    let output = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("mcp-tasks ends")
        .expect("the mcp-tasks binary runs");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

async fn ok(args: &[&str]) -> String {
    let run = admin(Some(ADMIN_SECRET), args).await;
    assert_eq!(run.code, 0, "{args:?}: {}{}", run.stdout, run.stderr);
    run.stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_show_cancel_and_purge() {
    let served = serve().await;
    let url = served.base.as_str();
    let ids = tasks_in_every_state(&served.client).await;

    let table = ok(&["list", url]).await;
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("TASK ID"), "{table}");
    assert_eq!(lines.len(), 1 + 6 + 1, "header, six tasks, counts: {table}");
    assert_eq!(
        lines[7],
        "6 tasks: 2 working, 1 input_required, 2 completed, 1 failed, 0 cancelled"
    );
    let status_column = lines[0].find("STATUS").unwrap();
    assert!(
        lines[1..7]
            .iter()
            .all(|line| line[status_column..].starts_with(|c: char| c.is_ascii_lowercase())),
        "aligned columns: {table}"
    );

    let spins = ok(&["list", url, "--tool", "spin"]).await;
    let rows: Vec<&str> = spins
        .lines()
        .skip(1)
        .take_while(|l| !l.contains(" tasks: "))
        .collect();
    assert_eq!(rows.len(), 2, "{spins}");
    assert!(
        rows.iter()
            .all(|row| row.contains(" spin ") && row.contains("working"))
    );
    assert!(
        spins.contains("2 tasks: 2 working"),
        "counts follow the filter: {spins}"
    );

    let json: Value = serde_json::from_str(
        &ok(&[
            "list",
            &format!("{url}/admin"),
            "--json",
            "--limit",
            "2",
            "--all",
        ])
        .await,
    )
    .unwrap();
    assert_eq!(
        json["tasks"].as_array().unwrap().len(),
        6,
        "every page: {json}"
    );
    assert_eq!(json["counts"]["failed"], 1);
    let paged = admin(Some(ADMIN_SECRET), &["list", url, "--limit", "2"]).await;
    assert!(paged.stderr.contains("--cursor"), "{}", paged.stderr);

    let shown = ok(&["show", url, &ids.boom]).await;
    assert!(shown.contains("status          failed"), "{shown}");
    assert!(
        shown.contains("the upstream API refused the job"),
        "{shown}"
    );
    let asked = ok(&["show", url, &ids.ask]).await;
    assert!(asked.contains("open question"), "{asked}");
    let detail: Value =
        serde_json::from_str(&ok(&["show", url, &ids.quick[0], "--json"]).await).unwrap();
    assert_eq!(detail["task"]["status"], "completed");

    let target = &ids.spin[0];
    let cancelled = ok(&["cancel", url, target]).await;
    assert!(cancelled.starts_with("cancel requested"), "{cancelled}");
    until_status(&served.client, target, TaskStatus::Cancelled).await;
    let again = ok(&["cancel", url, target]).await;
    assert!(again.contains("had already ended (cancelled)"), "{again}");

    assert_eq!(
        ok(&["purge", url, "--older-than", "1d"]).await.trim(),
        "purged 0 finished tasks"
    );
    assert_eq!(ok(&["purge", url]).await.trim(), "purged 4 finished tasks");
    let left = ok(&["list", url, "--json"]).await;
    let left: Value = serde_json::from_str(&left).unwrap();
    assert_eq!(left["tasks"].as_array().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_exit_4_with_the_reason() {
    let served = serve().await;
    let url = served.base.as_str();
    let bad = admin(Some(ADMIN_SECRET), &["list", url, "--status", "running"]).await;
    assert_eq!(bad.code, 4);
    assert!(
        bad.stderr.contains("400") && bad.stderr.contains("query parameter `status`"),
        "{}",
        bad.stderr
    );
    let none = admin(None, &["list", url]).await;
    assert_eq!(none.code, 4);
    assert!(
        none.stderr.contains("MCP_TASKS_ADMIN_TOKEN"),
        "{}",
        none.stderr
    );
    let wrong = admin(Some("not-the-admin-secret"), &["list", url]).await;
    assert_eq!(wrong.code, 4);
    assert!(wrong.stderr.contains("401"), "{}", wrong.stderr);
    let unknown = admin(Some(ADMIN_SECRET), &["show", url, "no-such-task"]).await;
    assert_eq!(unknown.code, 4);
    assert!(unknown.stderr.contains("404"), "{}", unknown.stderr);
    let not_url = admin(Some(ADMIN_SECRET), &["list", "localhost:1"]).await;
    assert_eq!(not_url.code, 4);
    assert!(not_url.stderr.contains("not an http"), "{}", not_url.stderr);
}

/// The MCP endpoint, which every other command takes, leads to the admin API too; a URL
/// where no admin router answers says so instead of "not JSON" and nothing after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_url_works_and_a_wrong_path_says_what_to_give() {
    let served = serve().await;
    tasks_in_every_state(&served.client).await;
    let base = ok(&["list", &served.base, "--json"]).await;
    let mcp = ok(&["list", &format!("{}/mcp", served.base), "--json"]).await;
    let ids = |text: &str| -> Vec<String> {
        let value: Value = serde_json::from_str(text).unwrap();
        value["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["taskId"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(&mcp), ids(&base));
    assert_eq!(ids(&base).len(), 6);

    let elsewhere = admin(
        Some(ADMIN_SECRET),
        &["list", &format!("{}/elsewhere", served.base)],
    )
    .await;
    assert_eq!(elsewhere.code, 4);
    assert!(
        elsewhere.stderr.contains("answered 404")
            && elsewhere.stderr.contains("the server's base URL"),
        "{}",
        elsewhere.stderr
    );
}

/// `admin retry` and `admin fork` start a new task from a failed one (here `boom`, which
/// fails again); a fork past the stored steps and a retry of a completed task are refused
/// (exit 4, the server's reason).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_and_fork_a_failed_task() {
    let served = serve().await;
    let url = served.base.as_str();
    let ids = tasks_in_every_state(&served.client).await;
    until_status(&served.client, &ids.boom, TaskStatus::Failed).await;

    let retried = ok(&["retry", url, &ids.boom]).await;
    let new = retried
        .trim()
        .strip_prefix(&format!("task {} retried as task ", ids.boom))
        .unwrap_or_else(|| panic!("{retried}"));
    assert_ne!(new, ids.boom);
    until_status(&served.client, new, TaskStatus::Failed).await;
    let json: Value =
        serde_json::from_str(&ok(&["fork", url, &ids.boom, "--step", "0", "--json"]).await)
            .unwrap();
    assert_eq!(json["outcome"], "forked", "{json}");
    let forked = json["newTaskId"].as_str().unwrap();
    until_status(&served.client, forked, TaskStatus::Failed).await;

    let past = admin(Some(ADMIN_SECRET), &["fork", url, &ids.boom, "--step", "3"]).await;
    assert_eq!(past.code, 4, "{}", past.stdout);
    assert!(past.stderr.contains("stored 0 steps"), "{}", past.stderr);
    let completed = admin(Some(ADMIN_SECRET), &["retry", url, &ids.quick[0]]).await;
    assert_eq!(completed.code, 4, "{}", completed.stdout);
    assert!(
        completed.stderr.contains("only a failed or cancelled task"),
        "{}",
        completed.stderr
    );
}

/// `admin version` records a live task as one of another version of its tool, `admin fail`
/// ends one `failed` with the operator's reason in its error; an ended task is changed by
/// neither (exit 4, the server's reason).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_and_move_a_live_task() {
    let served = serve().await;
    let url = served.base.as_str();
    let ids = tasks_in_every_state(&served.client).await;

    let json: Value =
        serde_json::from_str(&ok(&["version", url, &ids.spin[0], "--to", "7", "--json"]).await)
            .unwrap();
    assert_eq!(
        (&json["outcome"], &json["status"]),
        (&Value::from("version_set"), &Value::from("working")),
        "{json}"
    );
    let moved = ok(&["version", url, &ids.spin[0]]).await;
    assert!(moved.contains("moved to the server's version"), "{moved}");

    let failed = ok(&["fail", url, &ids.spin[1], "--reason", "stuck upstream"]).await;
    assert_eq!(
        failed.trim(),
        format!(
            "task {} failed: failed by an operator: stuck upstream",
            ids.spin[1]
        )
    );
    until_status(&served.client, &ids.spin[1], TaskStatus::Failed).await;

    for args in [["fail", url, &ids.quick[0]], ["version", url, &ids.spin[1]]] {
        let ended = admin(Some(ADMIN_SECRET), &args).await;
        assert_eq!(ended.code, 4, "{args:?}: {}", ended.stdout);
        assert!(ended.stderr.contains("answered 409"), "{}", ended.stderr);
    }
}
