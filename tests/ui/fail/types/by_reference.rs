use mcp_tasks::{State, TaskContext, task_tool};

#[derive(Clone)]
struct Db;

// The context's types are recognised by type, so a reference to one is pointed at.
#[task_tool]
async fn f(ctx: &TaskContext, State(db): &State<Db>) {
    let _ = (ctx, db);
}

fn main() {}
