//! The admin commands that change one task: `retry`, `fork`, `fail` and `version`.

use serde_json::Value;

use crate::{
    admin_api::{AdminError, Api, Target, encode, print_json, text},
    printable::printable,
};

/// `admin retry` (`step: None`) and `admin fork`.
pub async fn retry(target: &Target, task_id: &str, step: Option<usize>) -> Result<(), AdminError> {
    let (path, query) = match step {
        None => ("retry", Vec::new()),
        Some(step) => ("fork", vec![("step", step.to_string())]),
    };
    let answer = post(target, task_id, path, &query).await?;
    if !target.json {
        let new = text(&answer["newTaskId"]);
        let new = printable(&new);
        match step {
            None => println!("task {task_id} retried as task {new}"),
            Some(step) => println!("task {task_id} forked from step {step} as task {new}"),
        }
    }
    Ok(())
}

/// `admin fail`: ends a live task `failed`, with the operator's reason.
pub async fn fail(target: &Target, task_id: &str, reason: Option<&str>) -> Result<(), AdminError> {
    let query: Vec<_> = reason
        .map(|r| ("reason", r.to_owned()))
        .into_iter()
        .collect();
    let answer = post(target, task_id, "fail", &query).await?;
    if !target.json {
        let message = text(&answer["statusMessage"]);
        let message = printable(&message);
        println!("task {task_id} failed: {message}");
    }
    Ok(())
}

/// `admin version`: records a live task as one of version `to` of its tool (by default the
/// server's own), so that the servers that run that version take it.
pub async fn version(target: &Target, task_id: &str, to: Option<&str>) -> Result<(), AdminError> {
    let query: Vec<_> = to.map(|to| ("to", to.to_owned())).into_iter().collect();
    let answer = post(target, task_id, "version", &query).await?;
    if !target.json {
        let version = match to {
            Some(to) => format!("version `{}`", printable(to)),
            None => "the server's version".to_owned(),
        };
        let started = if answer["outcome"] == "started" {
            ", and started on the server"
        } else {
            ""
        };
        println!("task {task_id} moved to {version} of its tool{started}");
    }
    Ok(())
}

/// `POST /admin/api/tasks/{task_id}/{action}?{query}`: its answer, printed as JSON with
/// `--json`.
async fn post(
    target: &Target,
    task_id: &str,
    action: &str,
    query: &[(&str, String)],
) -> Result<Value, AdminError> {
    let api = Api::new(target)?;
    let path = format!("tasks/{}/{action}", encode(task_id));
    let answer = api.send(true, &path, query).await?;
    if target.json {
        print_json(&answer);
    }
    Ok(answer)
}
