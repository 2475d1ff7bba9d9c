//! `#[task_tool]` at run time, over stdio framing on an in-process pipe: arguments decode
//! (and a bad or missing field is named with the expected type, no task created), return
//! values become `structuredContent` plus a text copy, `E: Display` becomes `isError`,
//! `ToolError::rpc` a JSON-RPC error or a `failed` task, `State<T>` is filled from the
//! toolkit, and a missing state is a JSON-RPC error rather than a panic.

mod common;

use common::{Caps, Stdio};
use mcp_tasks::{
    State, TaskContext, TaskServer, ToolError, ToolkitError, task_tool, toolkit,
    toolkit::DefinitionError,
};
use rmcp::model::{CallToolResult, ContentBlock, ErrorData};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Serialize, JsonSchema)]
struct Sum {
    total: u64,
}

/// Adds two numbers.
#[task_tool(mode = "inline")]
async fn add(a: u32, #[arg(rename = "second")] b: Option<u32>) -> Sum {
    Sum {
        total: u64::from(a) + u64::from(b.unwrap_or(0)),
    }
}

/// Divides.
#[task_tool]
async fn divide(a: i64, b: i64) -> Result<i64, String> {
    if b == 0 {
        Err(format!("cannot divide {a} by zero"))
    } else {
        Ok(a / b)
    }
}

/// Fails with a JSON-RPC error.
#[task_tool]
async fn broken(ctx: TaskContext) -> Result<u32, ToolError> {
    Err(ToolError::rpc(ErrorData::internal_error(
        format!("{} is broken", ctx.tool_name()),
        None,
    )))
}

#[derive(Clone)]
struct Greeting(String);

#[derive(Clone)]
struct NeverRegistered;

/// Greets with the registered greeting.
#[task_tool]
async fn greet(State(greeting): State<Greeting>, #[arg(default)] name: String) -> String {
    format!("{}, {name}", greeting.0)
}

/// Needs state nobody registered.
#[task_tool]
async fn needs_state(State(_missing): State<NeverRegistered>) -> u32 {
    1
}

/// Returns nothing.
#[task_tool]
async fn nothing() {}

/// Returns a ready result.
#[task_tool]
async fn ready() -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text("as is")])
}

/// Runs only as a task.
#[task_tool(mode = "required", ttl = "1m", poll_interval = "10ms")]
async fn background(ctx: TaskContext, n: u32) -> Result<u32, ToolError> {
    ctx.status("working").await;
    match n {
        0 => Err(ToolError::rpc(ErrorData::invalid_params(
            "n must be positive",
            None,
        ))),
        1 => Err(ToolError::cancelled()),
        n => Ok(n * 2),
    }
}

/// Either form.
#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
enum Either {
    Number(u32),
    Text(String),
}

/// Takes an argument object whose schema is not an object schema.
#[task_tool]
async fn either(#[args] value: Either) -> u32 {
    match value {
        Either::Number(n) => n,
        Either::Text(t) => u32::try_from(t.len()).unwrap_or(u32::MAX),
    }
}

/// Shares its wire name with `add`.
#[task_tool(name = "add")]
async fn another_add() {}

#[test]
fn building_the_toolkit_reports_what_compile_time_cannot_see() {
    let error = toolkit![add, either].unwrap_err();
    assert_eq!(
        error,
        ToolkitError::InvalidDefinition {
            tool: "either".into(),
            problem: DefinitionError::InputSchemaNotObject,
        }
    );
    assert_eq!(
        error.to_string(),
        "tool `either`: the input schema's root must be `\"type\": \"object\"`"
    );
    // Names are checked at compile time within one `toolkit!`; a tool added later is
    // checked when it is added.
    let error = toolkit![add]
        .unwrap()
        .with_tool(another_add {})
        .unwrap_err();
    assert_eq!(error, ToolkitError::DuplicateName("add".into()));
}

/// The toolkit above over stdio framing (the shared harness in `tests/common`).
struct Client(Stdio);

impl Client {
    fn start() -> Self {
        let toolkit = toolkit![
            add,
            divide,
            broken,
            greet,
            needs_state,
            nothing,
            ready,
            background,
            raw_failure
        ]
        .expect("the toolkit builds")
        .with_state(Greeting("hello".into()));
        Self(Stdio::start(TaskServer::new(toolkit)))
    }

    async fn rpc(&mut self, method: &str, params: Value, tasks: bool) -> Value {
        let caps = Caps {
            tasks,
            elicitation: false,
        };
        self.0.rpc(method, params, caps).await
    }

    async fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.rpc(
            "tools/call",
            json!({ "name": tool, "arguments": arguments }),
            false,
        )
        .await
    }
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn decodes_arguments_and_returns_structured_content_with_a_text_copy() {
    let mut client = Client::start();
    let response = client.call("add", json!({ "a": 2, "second": 3 })).await;
    let result = &response["result"];
    assert_eq!(result["structuredContent"], json!({ "total": 5 }));
    assert_eq!(result["isError"], json!(false));
    let copy: Value = serde_json::from_str(text(result)).unwrap();
    assert_eq!(copy, json!({ "total": 5 }));

    // The Option parameter may be left out.
    let response = client.call("add", json!({ "a": 7 })).await;
    assert_eq!(
        response["result"]["structuredContent"],
        json!({ "total": 7 })
    );
}

#[tokio::test]
async fn a_bad_field_is_named_with_the_expected_type() {
    let mut client = Client::start();
    let response = client.call("add", json!({ "a": "x" })).await;
    let result = &response["result"];
    assert_eq!(result["isError"], json!(true), "{response}");
    assert_eq!(
        text(result),
        "invalid arguments for tool `add`: `a`: invalid type: string \"x\", expected u32"
    );
    let response = client.call("add", json!({ "second": 1 })).await;
    assert_eq!(
        text(&response["result"]),
        "invalid arguments for tool `add`: `a`: missing, expected u32"
    );
    let response = client.call("add", json!({ "a": 1, "second": -1 })).await;
    assert_eq!(
        text(&response["result"]),
        "invalid arguments for tool `add`: `second`: invalid value: integer `-1`, expected u32"
    );
}

#[tokio::test]
async fn a_bad_field_creates_no_task() {
    let mut client = Client::start();
    let response = client
        .rpc(
            "tools/call",
            json!({ "name": "background", "arguments": { "n": "two" } }),
            true,
        )
        .await;
    let result = &response["result"];
    assert_ne!(result["resultType"], json!("task"), "{response}");
    assert_eq!(result["isError"], json!(true));
    assert!(
        text(result).contains("`n`: invalid type: string \"two\", expected u32"),
        "{response}"
    );
}

#[tokio::test]
async fn non_object_outputs_are_wrapped_and_errors_are_text() {
    let mut client = Client::start();
    let response = client.call("divide", json!({ "a": 9, "b": 3 })).await;
    assert_eq!(
        response["result"]["structuredContent"],
        json!({ "result": 3 })
    );
    let response = client.call("divide", json!({ "a": 9, "b": 0 })).await;
    let result = &response["result"];
    assert_eq!(result["isError"], json!(true));
    assert_eq!(text(result), "cannot divide 9 by zero");
    assert!(result.get("structuredContent").is_none());
}

#[tokio::test]
async fn tool_error_rpc_is_a_json_rpc_error_inline() {
    let mut client = Client::start();
    let response = client.call("broken", json!({})).await;
    assert_eq!(response["error"]["code"], json!(-32603), "{response}");
    assert_eq!(response["error"]["message"], json!("broken is broken"));
}

#[tokio::test]
async fn state_is_filled_and_a_missing_state_is_a_json_rpc_error() {
    let mut client = Client::start();
    let response = client.call("greet", json!({ "name": "ada" })).await;
    assert_eq!(
        response["result"]["structuredContent"],
        json!({ "result": "hello, ada" })
    );
    let response = client.call("greet", json!({})).await;
    assert_eq!(
        response["result"]["structuredContent"],
        json!({ "result": "hello, " })
    );

    let response = client.call("needs_state", json!({})).await;
    assert_eq!(response["error"]["code"], json!(-32603), "{response}");
    let message = response["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "tool `needs_state` needs state of type `macros_runtime::NeverRegistered`"
        ),
        "{message}"
    );
    assert!(message.contains("Toolkit::with_state"), "{message}");
}

#[tokio::test]
async fn unit_and_ready_results() {
    let mut client = Client::start();
    let response = client.call("nothing", json!({})).await;
    assert_eq!(response["result"]["content"], json!([]), "{response}");
    assert_eq!(response["result"]["isError"], json!(false));
    let response = client.call("ready", json!({})).await;
    assert_eq!(text(&response["result"]), "as is");
    assert!(response["result"].get("structuredContent").is_none());
}

#[tokio::test]
async fn tools_list_shows_schemas_and_policy() {
    let mut client = Client::start();
    let response = client.rpc("tools/list", json!({}), false).await;
    let tools = response["result"]["tools"].as_array().unwrap();
    let add = tools.iter().find(|t| t["name"] == "add").unwrap();
    assert_eq!(add["description"], json!("Adds two numbers."));
    assert_eq!(add["inputSchema"]["required"], json!(["a"]));
    assert_eq!(
        add["outputSchema"]["properties"]["total"]["type"],
        json!("integer")
    );
    let nothing = tools.iter().find(|t| t["name"] == "nothing").unwrap();
    assert!(nothing.get("outputSchema").is_none());
}

#[tokio::test]
async fn as_a_task_results_and_rpc_errors_end_completed_and_failed() {
    let mut client = Client::start();
    let response = client
        .rpc(
            "tools/call",
            json!({ "name": "background", "arguments": { "n": 21 } }),
            true,
        )
        .await;
    assert_eq!(
        response["result"]["resultType"],
        json!("task"),
        "{response}"
    );
    let id = response["result"]["taskId"].as_str().unwrap().to_owned();
    let done = wait_terminal(&mut client, &id).await;
    assert_eq!(done["status"], json!("completed"), "{done}");
    assert_eq!(
        done["result"]["structuredContent"],
        json!({ "result": 42 }),
        "{done}"
    );

    let response = client
        .rpc(
            "tools/call",
            json!({ "name": "background", "arguments": { "n": 0 } }),
            true,
        )
        .await;
    let id = response["result"]["taskId"].as_str().unwrap().to_owned();
    let done = wait_terminal(&mut client, &id).await;
    assert_eq!(done["status"], json!("failed"), "{done}");
    assert_eq!(done["error"]["code"], json!(-32602), "{done}");

    let response = client
        .rpc(
            "tools/call",
            json!({ "name": "background", "arguments": { "n": 1 } }),
            true,
        )
        .await;
    let id = response["result"]["taskId"].as_str().unwrap().to_owned();
    let done = wait_terminal(&mut client, &id).await;
    assert_eq!(done["status"], json!("cancelled"), "{done}");
}

/// Ends with a `Failure` directly.
#[task_tool]
async fn raw_failure() -> Result<u32, mcp_tasks::Failure> {
    Err(mcp_tasks::Failure::Error(ErrorData::invalid_request(
        "not now", None,
    )))
}

#[tokio::test]
async fn a_failure_error_type_is_a_json_rpc_error() {
    let mut client = Client::start();
    let response = client.call("raw_failure", json!({})).await;
    assert_eq!(response["error"]["code"], json!(-32600), "{response}");
    assert_eq!(response["error"]["message"], json!("not now"));
}

async fn wait_terminal(client: &mut Client, id: &str) -> Value {
    for _ in 0..500 {
        let response = client.rpc("tasks/get", json!({ "taskId": id }), true).await;
        let status = response["result"]["status"].as_str().unwrap_or_default();
        if matches!(status, "completed" | "failed" | "cancelled") {
            return response["result"].clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("task {id} did not end");
}

/// Polls as slowly as the default `ttl` allows.
#[task_tool(poll_interval = "1h")]
async fn slow_poll() {}

#[test]
fn the_macro_checks_against_the_runtime_defaults() {
    use mcp_tasks::{
        TaskTool,
        tool::{DEFAULT_POLL_INTERVAL, DEFAULT_TTL},
    };
    // The macro checks `poll_interval <= ttl` at compile time with the runtime's default
    // `ttl` (1h) and `poll_interval` (1s) in mind; this fails if those drift apart.
    let definition = slow_poll {}.definition();
    assert_eq!(definition.ttl(), DEFAULT_TTL);
    assert_eq!(
        DEFAULT_TTL.duration(),
        Some(std::time::Duration::from_secs(3600))
    );
    assert_eq!(DEFAULT_POLL_INTERVAL, std::time::Duration::from_secs(1));
    assert!(toolkit![slow_poll].is_ok());
}

/// Takes a borrowed type with an elided lifetime (it decodes owned), and the context under
/// an alias.
#[task_tool(mode = "inline")]
async fn shout(ctx: Ctx, text: std::borrow::Cow<'_, str>) -> String {
    let _ = ctx;
    text.to_uppercase()
}

type Ctx = mcp_tasks::TaskContext;

#[tokio::test]
async fn elided_lifetimes_and_aliases_in_parameters() {
    use mcp_tasks::TaskTool as _;
    let definition = shout {}.definition();
    let schema = &definition.tool().input_schema;
    assert_eq!(schema["required"], json!(["text"]), "{schema:?}");
    assert!(schema["properties"].get("ctx").is_none(), "{schema:?}");
    let mut stdio = Stdio::start(TaskServer::new(toolkit![shout].unwrap()));
    let response = stdio
        .rpc(
            "tools/call",
            json!({ "name": "shout", "arguments": { "text": "hi" } }),
            common::PLAIN,
        )
        .await;
    assert_eq!(text(&response["result"]), "HI", "{response}");
}
