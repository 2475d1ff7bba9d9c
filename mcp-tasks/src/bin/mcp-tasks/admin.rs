//! `mcp-tasks admin list|show|cancel|retry|fork|fail|version|purge`: the operators'
//! commands, against a server's admin API (`/admin/api`, the `admin` feature of the
//! library), with its own credential.

use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::Value;

use crate::{
    admin_api::{AdminError, Api, Target, TaskArgs, encode, print_json, text},
    printable::printable,
    steer,
};

/// `mcp-tasks admin ...`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct AdminArgs {
    #[command(subcommand)]
    pub command: AdminCommand,
}

/// The filters of `admin list`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
pub struct Filters {
    /// Only tasks with this status (working, input_required, completed, failed, cancelled);
    /// repeatable, or several separated by commas.
    #[arg(long, value_name = "STATUS")]
    pub status: Vec<String>,
    /// Only this tool's tasks.
    #[arg(long)]
    pub tool: Option<String>,
    /// Only this owner's tasks.
    #[arg(long)]
    pub owner: Option<String>,
    /// Only the tasks this instance runs (cluster mode).
    #[arg(long)]
    pub instance: Option<String>,
    /// Only tasks created at or after this instant (epoch ms, RFC 3339, or a duration ago
    /// such as 2h).
    #[arg(long, value_name = "INSTANT")]
    pub created_after: Option<String>,
    /// Only tasks created before this instant.
    #[arg(long, value_name = "INSTANT")]
    pub created_before: Option<String>,
    /// Only live tasks unchanged for longer than this (e.g. 1h, 30m).
    #[arg(long, value_name = "DURATION")]
    pub stalled: Option<String>,
    /// Only parked tasks (their work dropped while they wait for an answer or a timer).
    #[arg(long)]
    pub parked: bool,
}

/// The admin commands.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum AdminCommand {
    /// List tasks, newest first, with filters and status counts.
    List {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        filters: Filters,
        /// Tasks per page (1 to 500).
        #[arg(long)]
        limit: Option<u32>,
        /// The page after the one that printed this cursor (same filters).
        #[arg(long)]
        cursor: Option<String>,
        /// Every page, not only the first.
        #[arg(long, conflicts_with = "cursor")]
        all: bool,
    },
    /// Show one task in detail: steps, questions and answers, lease, result or error.
    Show(TaskArgs),
    /// Cancel a task, whoever owns it.
    Cancel(TaskArgs),
    /// Run a failed or cancelled task again, as a new task: its stored steps and answers
    /// are replayed, and it goes on from its last step.
    Retry(TaskArgs),
    /// Run a failed or cancelled task again from step N, as a new task: the steps before N
    /// are replayed, step N and the rest run again.
    Fork {
        #[command(flatten)]
        task: TaskArgs,
        /// The step to run again from (0 is the first).
        #[arg(long, value_name = "N")]
        step: usize,
    },
    /// End a live task `failed`, with a reason: its code never runs again.
    Fail {
        #[command(flatten)]
        task: TaskArgs,
        /// Why, shown in the task's error (at most 500 bytes).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Record a live task as one of another version of its tool (by default the server's
    /// own), so that a server running that version takes it.
    Version {
        #[command(flatten)]
        task: TaskArgs,
        /// The version (by default the server's version of the tool).
        #[arg(long, value_name = "VERSION")]
        to: Option<String>,
    },
    /// Remove finished tasks (completed, failed, cancelled).
    Purge {
        #[command(flatten)]
        target: Target,
        /// Only those last changed longer ago than this (e.g. 7d).
        #[arg(long, value_name = "DURATION", conflicts_with = "before")]
        older_than: Option<String>,
        /// Only those last changed before this instant.
        #[arg(long, value_name = "INSTANT")]
        before: Option<String>,
    },
}

/// The query's pairs whose value is given, in order.
fn given(
    pairs: impl IntoIterator<Item = (&'static str, Option<String>)>,
) -> Vec<(&'static str, String)> {
    pairs
        .into_iter()
        .filter_map(|(key, value)| Some((key, value?)))
        .collect()
}

/// Runs an admin command; its output goes to stdout, notes to stderr.
pub async fn run(args: AdminArgs) -> Result<(), AdminError> {
    match args.command {
        AdminCommand::List {
            target,
            filters,
            limit,
            mut cursor,
            all,
        } => {
            let api = Api::new(&target)?;
            let status = (!filters.status.is_empty()).then(|| filters.status.join(","));
            let base = given([
                ("status", status),
                ("tool", filters.tool),
                ("owner", filters.owner),
                ("instance", filters.instance),
                ("created_after", filters.created_after),
                ("created_before", filters.created_before),
                ("stalled", filters.stalled),
                ("parked", filters.parked.then(|| "true".to_owned())),
            ]);
            let counts = api.send(Method::GET, "counts", &base).await?;
            let mut tasks = Vec::new();
            loop {
                let mut query = base.clone();
                query.extend(given([
                    ("limit", limit.map(|limit| limit.to_string())),
                    ("cursor", cursor.clone()),
                ]));
                let page = api.send(Method::GET, "tasks", &query).await?;
                cursor = page["nextCursor"].as_str().map(str::to_owned);
                tasks.extend(page["tasks"].as_array().cloned().unwrap_or_default());
                if !all || cursor.is_none() {
                    break;
                }
            }
            if target.json {
                print_json(&serde_json::json!({
                    "tasks": tasks,
                    "nextCursor": cursor,
                    "counts": counts,
                }));
            } else {
                // The server's fields, made printable.
                print!("{}", printable(&table(&tasks)));
                let by_status: Vec<String> = "working input_required completed failed cancelled"
                    .split(' ')
                    .map(|status| format!("{} {status}", counts[status]))
                    .collect();
                let counts = format!("{} tasks: {}", counts["total"], by_status.join(", "));
                println!("{}", printable(&counts));
                if let Some(cursor) = &cursor {
                    eprintln!("more tasks: add --cursor {} (or --all)", printable(cursor));
                }
            }
        }
        AdminCommand::Show(TaskArgs { target, task_id }) => {
            let path = format!("tasks/{}", encode(&task_id));
            let detail = Api::new(&target)?.send(Method::GET, &path, &[]).await?;
            if target.json {
                print_json(&detail);
            } else {
                print!("{}", printable(&show(&detail)));
            }
        }
        AdminCommand::Cancel(task) => steer::cancel(&task).await?,
        AdminCommand::Retry(task) => steer::retry(&task, None).await?,
        AdminCommand::Fork { task, step } => steer::retry(&task, Some(step)).await?,
        AdminCommand::Fail { task, reason } => steer::fail(&task, reason.as_deref()).await?,
        AdminCommand::Version { task, to } => steer::version(&task, to.as_deref()).await?,
        AdminCommand::Purge {
            target,
            older_than,
            before,
        } => {
            let api = Api::new(&target)?;
            let query = given([("older_than", older_than), ("before", before)]);
            let answer = api.send(Method::POST, "purge", &query).await?;
            if target.json {
                print_json(&answer);
            } else {
                println!("purged {} finished tasks", answer["purged"]);
            }
        }
    }
    Ok(())
}

/// One line, at most `width` characters, control characters shown as spaces.
fn cell(value: &str, width: usize) -> String {
    let clean = value.replace(char::is_control, " ");
    if clean.chars().count() > width {
        let cut: String = clean.chars().take(width.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        clean
    }
}

/// The tasks as a table with aligned columns.
fn table(tasks: &[Value]) -> String {
    let header = [
        "TASK ID", "STATUS", "TOOL", "OWNER", "INSTANCE", "UPDATED", "MESSAGE",
    ];
    let rows: Vec<[String; 7]> = std::iter::once(header.map(str::to_owned))
        .chain(tasks.iter().map(|task| {
            [
                text(&task["taskId"]),
                match task["parked"]["waitsFor"].as_str() {
                    Some(waits_for) => format!("{} (parked: {waits_for})", text(&task["status"])),
                    None => text(&task["status"]),
                },
                cell(&text(&task["tool"]), 24),
                cell(&text(&task["owner"]), 16),
                cell(&text(&task["instance"]), 16),
                text(&task["lastUpdatedAt"]),
                cell(&text(&task["statusMessage"]), 48),
            ]
        }))
        .collect();
    let mut widths = [0; 7];
    for row in &rows {
        for (width, value) in widths.iter_mut().zip(row) {
            *width = (*width).max(value.chars().count());
        }
    }
    let line = |row: &[String; 7]| {
        let out: String = row
            .iter()
            .zip(widths)
            .map(|(value, width)| format!("{value:<width$}  "))
            .collect();
        out.trim_end().to_owned() + "\n"
    };
    rows.iter().map(line).collect()
}

/// A task in detail, one field a line.
fn show(detail: &Value) -> String {
    let task = &detail["task"];
    let mut out = String::new();
    let mut field = |name: &str, value: String| out.push_str(&format!("{name:<16}{value}\n"));
    field("task id", text(&task["taskId"]));
    field("status", text(&task["status"]));
    field("tool", text(&task["tool"]));
    field("owner", text(&task["owner"]));
    field("message", cell(&text(&task["statusMessage"]), 200));
    field("created", text(&task["createdAt"]));
    field("updated", text(&task["lastUpdatedAt"]));
    field("ttl ms", text(&task["ttlMs"]));
    field("cancel asked", text(&task["cancelRequested"]));
    if let Some(waits_for) = task["parked"]["waitsFor"].as_str() {
        let until = task["parked"]["until"]
            .as_str()
            .map(|at| format!(" until {at}"))
            .unwrap_or_default();
        field("parked", format!("waits for {waits_for}{until}"));
    }
    let lease = &detail["lease"];
    if lease.is_object() {
        let (instance, epoch) = (text(&lease["instance"]), text(&lease["epoch"]));
        field("lease", format!("{instance} at epoch {epoch}"));
    }
    for step in detail["steps"].as_array().into_iter().flatten() {
        let (seq, name, value) = (&step["seq"], text(&step["name"]), &step["value"]);
        field("step", format!("{seq} {name}: {value}"));
    }
    for (key, _) in detail["questions"].as_object().into_iter().flatten() {
        field("open question", key.clone());
    }
    for (key, value) in detail["answers"].as_object().into_iter().flatten() {
        let again = match detail["askedAtStep"][key].as_u64() {
            Some(step) => format!(" (a fork from step {step} or before asks it again)"),
            None => String::new(),
        };
        field("answered", format!("{key}: {value}{again}"));
    }
    let error = &detail["error"];
    if !error.is_null() {
        let (code, message) = (&error["code"], text(&error["message"]));
        field("error", format!("{code} {message}"));
    }
    if !detail["result"].is_null() {
        field("result", detail["result"].to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_percent_encoded() {
        assert_eq!(encode("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
        assert_eq!(encode("working,failed"), "working%2Cfailed");
    }

    /// Each answer says from which step a fork asks its question again, when it was asked
    /// after the first step began.
    #[test]
    fn an_answer_says_which_forks_ask_it_again() {
        let detail = serde_json::json!({"task": {"taskId": "t1", "status": "failed"},
            "answers": {"elicit-1": {"action": "accept"}, "elicit-2": {"action": "decline"}},
            "askedAtStep": {"elicit-2": 3}});
        let out = show(&detail);
        let answered: Vec<&str> = out.lines().filter(|l| l.starts_with("answered")).collect();
        assert_eq!(answered.len(), 2, "{out}");
        assert!(
            answered[0].ends_with(r#"elicit-1: {"action":"accept"}"#),
            "{out}"
        );
        assert!(
            answered[1].ends_with("(a fork from step 3 or before asks it again)"),
            "{out}"
        );
    }

    #[test]
    fn table_columns_align_and_cells_stay_on_one_line() {
        let a = serde_json::json!({"taskId": "t1", "status": "working", "tool": "spin",
            "owner": "alice", "instance": null, "lastUpdatedAt": "2026-01-01T00:00:00Z",
            "statusMessage": "line one\nline two"});
        let out = table(&[a]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].find("STATUS"), lines[1].find("working"));
        assert!(lines[1].ends_with("line one line two"));
    }
}
