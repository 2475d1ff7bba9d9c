use mcp_tasks::{State, task_tool};

#[derive(Clone)]
struct Db;

// `State(db)` may destructure (it is filled from the context); an argument needs a name.
#[task_tool]
async fn f(State(db): State<Db>, (a, b): (u32, u32)) {
    let _ = (db, a, b);
}

fn main() {}
