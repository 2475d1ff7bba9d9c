use mcp_tasks::task_tool;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct State {
    value: u32,
}

// A parameter whose type is named `State` is an extractor, so a user type of that name
// is pointed at.
#[task_tool]
async fn read(state: State) -> u32 {
    state.value
}

fn main() {}
