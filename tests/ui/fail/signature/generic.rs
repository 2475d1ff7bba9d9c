use mcp_tasks::task_tool;

#[task_tool]
async fn echo<T: serde::de::DeserializeOwned>(value: T) -> String {
    let _ = value;
    String::new()
}

#[task_tool]
async fn echo_impl(value: impl Into<String>) -> String {
    value.into()
}

fn main() {}
