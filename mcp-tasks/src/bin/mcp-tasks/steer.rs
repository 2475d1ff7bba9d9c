//! The admin commands that change one task: `cancel`, `retry`, `fork`, `fail` and
//! `version`.

use reqwest::Method;
use serde_json::Value;

use crate::{
    admin_api::{AdminError, Api, TaskArgs, encode, print_json, text},
    printable::printable,
};

/// `admin cancel`: asks a task's work to stop, whoever owns it.
pub async fn cancel(task: &TaskArgs) -> Result<(), AdminError> {
    let answer = post(task, "cancel", &[]).await?;
    let task_id = &task.task_id;
    if task.target.json {
        // `post` printed the answer.
    } else if answer["outcome"] == "already_ended" {
        let status = printable(&text(&answer["status"])).into_owned();
        println!("task {task_id} had already ended ({status}): nothing to cancel");
    } else {
        println!("cancel requested for task {task_id}: its work stops when it honours it");
    }
    Ok(())
}

/// `admin retry` (`step: None`) and `admin fork`.
pub async fn retry(task: &TaskArgs, step: Option<usize>) -> Result<(), AdminError> {
    let (path, query) = match step {
        None => ("retry", Vec::new()),
        Some(step) => ("fork", vec![("step", step.to_string())]),
    };
    let answer = post(task, path, &query).await?;
    let task_id = &task.task_id;
    if !task.target.json {
        let new = printable(&text(&answer["newTaskId"])).into_owned();
        match step {
            None => println!("task {task_id} retried as task {new}"),
            Some(step) => println!("task {task_id} forked from step {step} as task {new}"),
        }
    }
    Ok(())
}

/// `admin fail`: ends a live task `failed`, with the operator's reason.
pub async fn fail(task: &TaskArgs, reason: Option<&str>) -> Result<(), AdminError> {
    let query = reason.map(|r| ("reason", r.to_owned()));
    let answer = post(task, "fail", query.as_slice()).await?;
    if !task.target.json {
        let message = printable(&text(&answer["statusMessage"])).into_owned();
        println!("task {} failed: {message}", task.task_id);
    }
    Ok(())
}

/// `admin version`: records a live task as one of version `to` of its tool (by default the
/// server's own), so that the servers that run that version take it.
pub async fn version(task: &TaskArgs, to: Option<&str>) -> Result<(), AdminError> {
    let query = to.map(|to| ("to", to.to_owned()));
    let answer = post(task, "version", query.as_slice()).await?;
    if !task.target.json {
        let version = match to {
            Some(to) => format!("version `{}`", printable(to)),
            None => "the server's version".to_owned(),
        };
        let started = if answer["outcome"] == "started" {
            ", and started on the server"
        } else {
            ""
        };
        let task_id = &task.task_id;
        println!("task {task_id} moved to {version} of its tool{started}");
    }
    Ok(())
}

/// `POST /admin/api/tasks/{task_id}/{action}?{query}`: its answer, printed as JSON with
/// `--json`.
async fn post(
    task: &TaskArgs,
    action: &str,
    query: &[(&str, String)],
) -> Result<Value, AdminError> {
    let api = Api::new(&task.target)?;
    let path = format!("tasks/{}/{action}", encode(&task.task_id));
    let answer = api.send(Method::POST, &path, query).await?;
    if task.target.json {
        print_json(&answer);
    }
    Ok(answer)
}
