//! What `SqliteStore::open` does to a file it refuses: nothing. The schema version is read
//! before the file is switched to WAL, so a rollback-mode file from a newer build (or one
//! that is not a task database at all) is left byte for byte as it was, with no `-wal` or
//! `-shm` file beside it.

use std::path::Path;

use mcp_tasks::SqliteStore;

#[path = "support/temp_db.rs"]
mod temp_db;
use temp_db::TempDb;

/// The error's whole chain, as one line.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(next) = source {
        text.push_str(": ");
        text.push_str(&next.to_string());
        source = next.source();
    }
    text
}

fn assert_untouched(db: &TempDb, before: &[u8]) {
    assert_eq!(
        std::fs::read(&db.0).unwrap(),
        before,
        "the refused file changed"
    );
    for suffix in ["-wal", "-shm", "-journal"] {
        assert!(
            !Path::new(&db.sidecar(suffix)).exists(),
            "opening the refused file left {suffix} beside it"
        );
    }
}

/// A rollback-mode (`journal_mode = DELETE`) file of a newer schema: refused with a message
/// naming the version, and not modified (it stays in rollback mode, same bytes).
#[test]
fn a_newer_rollback_mode_file_is_refused_unchanged() {
    let db = TempDb::new("newer");
    {
        let conn = rusqlite::Connection::open(&db.0).unwrap();
        let mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "DELETE", |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "delete");
        conn.execute_batch(
            "CREATE TABLE tasks (id TEXT PRIMARY KEY, payload TEXT);
             INSERT INTO tasks VALUES ('a', 'from a newer build');
             PRAGMA user_version = 99;",
        )
        .unwrap();
    }
    let before = std::fs::read(&db.0).unwrap();
    let error = SqliteStore::open(&db.0).unwrap_err();
    let message = chain(&error);
    assert!(
        message.contains("schema version 99") && message.contains("left untouched"),
        "{message}"
    );
    assert_untouched(&db, &before);
    let mode: String = rusqlite::Connection::open(&db.0)
        .unwrap()
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "delete", "still in rollback mode");
}

/// A rollback-mode file at schema 0 whose tables clash with the store's (some other
/// program's database): the first migration fails and is rolled back, and the file is left
/// as it was, not switched to WAL.
#[test]
fn a_foreign_rollback_mode_file_is_refused_unchanged() {
    let db = TempDb::new("foreign");
    {
        let conn = rusqlite::Connection::open(&db.0).unwrap();
        conn.pragma_update(None, "journal_mode", "DELETE").unwrap();
        conn.execute_batch(
            "CREATE TABLE tasks (title TEXT, done INTEGER);
             INSERT INTO tasks VALUES ('buy milk', 0);",
        )
        .unwrap();
    }
    let before = std::fs::read(&db.0).unwrap();
    let error = SqliteStore::open(&db.0).unwrap_err();
    let message = chain(&error);
    assert!(
        message.contains("could not migrate the task database from schema version 0 to 1"),
        "{message}"
    );
    assert_untouched(&db, &before);
}

/// Bytes that are not a SQLite database at all are refused, and stay as they were.
#[test]
fn a_file_that_is_not_a_database_is_refused_unchanged() {
    let db = TempDb::new("garbage");
    let before = b"these are not the droids you are looking for, nor a database\n".repeat(100);
    std::fs::write(&db.0, &before).unwrap();
    let error = SqliteStore::open(&db.0).unwrap_err();
    let message = chain(&error);
    assert!(message.contains("not a database"), "{message}");
    assert_untouched(&db, &before);
}

/// A task that completed keeps no replay data (tool version, arguments, the request's
/// `_meta`, steps) in the file; a cancelled or expired (failed) one keeps all of it for an
/// operator's retry, as a live task does.
#[tokio::test]
async fn a_completed_task_keeps_no_replay_data() {
    use std::{sync::Arc, time::Duration};

    use mcp_tasks::{
        TaskStore,
        store::{NewTask, Outcome, Step, Transition},
    };

    let db = TempDb::new("ended-origin");
    let store = SqliteStore::open(&db.0).expect("open");
    let with_origin = |id: &str| {
        let object = |value: serde_json::Value| value.as_object().cloned().unwrap();
        NewTask::new(Arc::from(id), Arc::from("alice"), Arc::from("report"))
            .with_arguments(object(serde_json::json!({ "n": 3 })))
            .with_request_meta(object(
                serde_json::json!({ "protocolVersion": "2026-07-28" }),
            ))
            .with_tool_version(Arc::from("2.1"))
    };
    for id in ["cancelled", "finished", "live"] {
        store.create(with_origin(id)).await.unwrap();
        let step = Step::new(0, "fetch", serde_json::json!(1));
        store
            .apply(id, None, Transition::SaveStep(step))
            .await
            .unwrap();
    }
    let done = Outcome::Completed(serde_json::Map::new());
    store
        .apply("finished", None, Transition::Finish(done))
        .await
        .unwrap();
    let cancel = Transition::Finish(Outcome::Cancelled);
    store.apply("cancelled", None, cancel).await.unwrap();
    store
        .create(with_origin("expired").with_ttl(Some(Duration::from_millis(1))))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    store.expire_due().await.unwrap();
    drop(store);

    let conn = rusqlite::Connection::open(&db.0).unwrap();
    let mut select = conn
        .prepare("SELECT id, status, tool_version, arguments, request_meta FROM tasks ORDER BY id")
        .unwrap();
    let rows: Vec<[String; 5]> = select
        .query_map([], |r| {
            Ok([r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?])
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let kept = |id: &str, status: &str| {
        let meta = r#"{"protocolVersion":"2026-07-28"}"#;
        [id, status, "2.1", r#"{"n":3}"#, meta].map(String::from)
    };
    assert_eq!(
        rows,
        [
            kept("cancelled", "cancelled"),
            kept("expired", "failed"),
            ["finished", "completed", "", "{}", "{}"].map(String::from),
            kept("live", "working"),
        ]
    );
    let mut select = conn
        .prepare("SELECT task_id FROM steps ORDER BY task_id")
        .unwrap();
    let steps: Vec<String> = (select.query_map([], |r| r.get(0)).unwrap())
        .map(Result::unwrap)
        .collect();
    assert_eq!(steps, ["cancelled", "live"], "a completed task's steps go");
}
