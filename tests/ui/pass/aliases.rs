//! Extractors are recognised by type, not by how the type is written: aliases, renamed
//! imports and full paths fill `TaskContext` and `State<T>` parameters, and a user type that
//! happens to be named `State` or `TaskContext` is an ordinary argument.

use mcp_tasks::TaskContext as Ctx;
use mcp_tasks::{TaskTool, task_tool, toolkit};

type Context = mcp_tasks::TaskContext;
type Shared<T> = mcp_tasks::State<T>;

#[derive(Clone)]
struct Db(u32);

/// Every way of writing the context's types.
#[task_tool]
async fn written_every_way(
    ctx: Ctx,
    again: Context,
    full: mcp_tasks::TaskContext,
    mcp_tasks::State(db): Shared<Db>,
    state: mcp_tasks::State<Db>,
    count: u32,
) -> u32 {
    let _ = (ctx, again, full);
    db.0 + state.0.0 + count
}

mod own {
    /// A user type named `State`: an argument like any other.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    pub struct State {
        pub value: u32,
    }

    /// And one named `TaskContext`.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    pub struct TaskContext {
        pub label: String,
    }
}

/// Reads its own `State` and `TaskContext` from the arguments.
#[task_tool]
async fn own_types(state: own::State, context: own::TaskContext) -> u32 {
    let _ = context.label;
    state.value
}

fn properties(tool: &impl TaskTool) -> Vec<String> {
    let definition = tool.definition();
    let schema = &definition.tool().input_schema;
    let mut keys: Vec<String> = schema["properties"]
        .as_object()
        .expect("properties")
        .keys()
        .cloned()
        .collect();
    keys.sort();
    keys
}

fn main() {
    assert_eq!(properties(&written_every_way {}), ["count"]);
    assert_eq!(properties(&own_types {}), ["context", "state"]);
    let toolkit = toolkit![written_every_way, own_types].unwrap().with_state(Db(1));
    assert_eq!(toolkit.len(), 2);
}
