//! The fixture server of the official MCP conformance suite (see CONFORMANCE.md): the task
//! fixtures of its `tasks-*` scenarios, the plain tools of its `tools-*` scenarios, and the
//! tools of the `input-required-result-*`, `json-schema-2020-12`, `server-stateless`,
//! `tools-call-with-progress` and `http-custom-header-server-validation` scenarios, all
//! written with `#[task_tool]`.
//!
//! `cargo run --example conformance_fixture -- --port 3001` serves Streamable HTTP on
//! `http://127.0.0.1:3001/mcp`; `-- --stdio` serves stdio. `scripts/conformance.sh` runs the
//! suite against it. It runs without authentication; `--tokens alice:TOKEN_A,bob:TOKEN_B`
//! makes every HTTP request need one of those bearer tokens (each names its owner).

#![allow(
    deprecated,
    reason = "sampling and roots are deprecated by SEP-2577 yet still part of the 2026-07-28 wire, and scenarios call them"
)]

use std::time::Duration;

use mcp_tasks::{
    HttpOptions, StaticTokens, TaskContext, TaskServer, ToolError, task_tool, toolkit,
};
use rmcp::model::{
    CallToolResult, ContentBlock, CreateMessageRequestParams, CreateMessageResult, ElicitResult,
    ElicitationAction, ElicitationSchema, ErrorData, LoggingLevel, ResourceContents,
    SamplingMessage,
};

/// A 1x1 red PNG.
const RED_PIXEL_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A WAV file with a header and no samples (8 kHz, mono, 16-bit).
const EMPTY_WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=";

fn schema(field: &str, boolean: bool) -> Result<ElicitationSchema, ToolError> {
    let builder = ElicitationSchema::builder();
    let builder = if boolean {
        builder.required_bool(field)
    } else {
        builder.required_string(field)
    };
    builder
        .build()
        .map_err(|e| ToolError::rpc(ErrorData::internal_error(e.to_string(), None)))
}

fn accepted(answer: &ElicitResult, field: &str) -> Option<serde_json::Value> {
    (answer.action == ElicitationAction::Accept)
        .then(|| answer.content.as_ref().map(|c| c[field].clone()))
        .flatten()
}

/// Says hello; never a task.
#[task_tool(mode = "inline")]
async fn greet(name: String) -> String {
    format!("Hello, {name}!")
}

/// Sleeps `seconds`, then answers; may run as a task and honours cancellation.
#[task_tool(poll_interval = "200ms")]
async fn slow_compute(
    ctx: TaskContext,
    seconds: f64,
    #[arg(default)] label: String,
) -> Result<String, ToolError> {
    let seconds = if seconds.is_finite() {
        seconds.clamp(0.0, 3600.0)
    } else {
        0.0
    };
    ctx.status(format!("computing {label}")).await;
    ctx.until_cancelled(tokio::time::sleep(Duration::from_secs_f64(seconds)))
        .await?;
    Ok(format!("computed {label} in {seconds}s"))
}

/// Always fails as a tool (`isError: true`) after about a second.
#[task_tool(mode = "required", poll_interval = "200ms")]
async fn failing_job() -> Result<String, String> {
    tokio::time::sleep(Duration::from_secs(1)).await;
    Err("the job failed (as it always does)".to_owned())
}

/// Ends in a JSON-RPC error: the task ends `failed`.
#[task_tool(mode = "required", poll_interval = "200ms")]
async fn protocol_error_job() -> Result<String, ToolError> {
    Err(ToolError::rpc(ErrorData::internal_error(
        "simulated internal failure of the job",
        None,
    )))
}

/// Asks for confirmation during the task before deleting.
#[task_tool(mode = "required", poll_interval = "200ms")]
async fn confirm_delete(ctx: TaskContext, filename: String) -> Result<String, ToolError> {
    let answer = ctx
        .elicit_form(format!("Delete {filename}?"), schema("confirm", true)?)
        .await?;
    Ok(match accepted(&answer, "confirm") {
        Some(serde_json::Value::Bool(true)) => format!("Deleted {filename}"),
        _ => format!("Kept {filename}"),
    })
}

/// Asks two questions at once during the task. The suite answers both with the same content,
/// `{"name": .., "confirm": true}`, so the colour is not required: an answer without a field
/// the form requires is refused.
#[task_tool(mode = "required", poll_interval = "200ms")]
async fn multi_input(ctx: TaskContext) -> Result<String, ToolError> {
    let colour = ElicitationSchema::builder()
        .optional_string("color")
        .build()
        .map_err(|e| ToolError::rpc(ErrorData::internal_error(e.to_string(), None)))?;
    let (name, color) = tokio::try_join!(
        ctx.elicit_form("Your name?", schema("name", false)?),
        ctx.elicit_form("Your favourite colour?", colour),
    )?;
    let text = |a: &ElicitResult, f: &str| {
        accepted(a, f)
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_else(|| "(no answer)".to_owned())
    };
    Ok(format!(
        "{} likes {}",
        text(&name, "name"),
        text(&color, "color")
    ))
}

/// Asks a name before its task exists (multi round-trip), then works as a task.
#[task_tool(mode = "required", poll_interval = "200ms")]
async fn test_tool_with_task(ctx: TaskContext) -> Result<String, ToolError> {
    let answer = ctx
        .elicit_form_before_task("What is your name?", schema("name", false)?)
        .await?;
    let name = accepted(&answer, "name")
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "stranger".to_owned());
    ctx.status("working on it").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    Ok(format!("Hello, {name}! Your task is done."))
}

/// `input-required-result-tampered-state`: asks one question by multi round-trip request; the
/// `requestState` of the round is sealed, so a tampered one is refused with `-32602`.
#[task_tool(mode = "inline")]
async fn test_input_required_result_tampered_state(ctx: TaskContext) -> Result<String, ToolError> {
    let answer = ctx.elicit_form("Continue?", schema("ok", true)?).await?;
    Ok(match accepted(&answer, "ok") {
        Some(serde_json::Value::Bool(true)) => "confirmed".to_owned(),
        _ => "not confirmed".to_owned(),
    })
}

/// `http-custom-header-server-validation`: its arguments travel as `Mcp-Param-*` headers too
/// (SEP-2243); the server refuses a call whose header is missing or differs from the body.
#[task_tool(mode = "inline")]
async fn test_custom_header(
    #[arg(header = "Region", description = "where the request is served")] region: String,
    #[arg(header = "Priority", default)] priority: i64,
    #[arg(header = "Verbose", default)] verbose: bool,
) -> String {
    format!("region {region}, priority {priority}, verbose {verbose}")
}

/// A postal address (`json-schema-2020-12`).
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[schemars(rename = "address", extend("$anchor" = "addressDef"))]
#[allow(
    dead_code,
    reason = "decoded for the schema; the tool only answers `ok`"
)]
struct Address {
    street: Option<String>,
    city: Option<String>,
}

/// How to reach someone.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
enum ContactMethod {
    Phone,
    Email,
}

/// The arguments of `json_schema_2020_12_tool`: `$defs` with an `$anchor`, composition
/// (`allOf`/`anyOf`), conditionals (`if`/`then`/`else`) and `additionalProperties: false`,
/// all written with schemars.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(extend(
    "allOf" = [{ "anyOf": [{ "required": ["phone"] }, { "required": ["email"] }] }],
    "if" = { "properties": { "contactMethod": { "const": "phone" } }, "required": ["contactMethod"] },
    "then" = { "required": ["phone"] },
    "else" = { "required": ["email"] },
))]
#[allow(
    dead_code,
    reason = "decoded for the schema; the tool only answers `ok`"
)]
struct Contact {
    name: Option<String>,
    address: Option<Address>,
    contact_method: Option<ContactMethod>,
    phone: Option<String>,
    email: Option<String>,
}

/// `json-schema-2020-12`: an input schema with the 2020-12 vocabulary.
#[task_tool(mode = "inline")]
async fn json_schema_2020_12_tool(#[args] _contact: Contact) -> String {
    "ok".to_owned()
}

/// `server-stateless`: needs sampling, so a client that did not declare it gets `-32021`.
#[task_tool(mode = "inline")]
async fn test_missing_capability(ctx: TaskContext) -> Result<String, ToolError> {
    let answer = ctx.sample(question("Say something.", 20)).await?;
    Ok(sampled(&answer))
}

/// `server-stateless`: asks by multi round-trip request; the response stream carries the
/// `input_required` result, never a request of the server's own.
#[task_tool(mode = "inline")]
async fn test_streaming_elicitation(ctx: TaskContext) -> Result<String, ToolError> {
    let answer = ctx.elicit_form("Continue?", schema("ok", true)?).await?;
    Ok(format!("answered: {}", action(&answer)))
}

fn question(text: &str, max_tokens: u32) -> CreateMessageRequestParams {
    CreateMessageRequestParams::new(vec![SamplingMessage::user_text(text)], max_tokens)
}

fn sampled(answer: &CreateMessageResult) -> String {
    answer
        .message
        .content
        .first()
        .and_then(|c| c.as_text())
        .map_or_else(|| "(no text)".to_owned(), |t| t.text.clone())
}

/// `accept`, `decline` or `cancel`.
fn action(answer: &ElicitResult) -> String {
    serde_json::to_value(&answer.action)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn text_answer(answer: &ElicitResult, field: &str) -> String {
    accepted(answer, field)
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "(no answer)".to_owned())
}

/// `input-required-result-basic-elicitation`: one question by multi round-trip request, under
/// the key the scenario expects (`user_name`).
#[task_tool(mode = "inline")]
async fn test_input_required_result_elicitation(ctx: TaskContext) -> Result<String, ToolError> {
    let answer = ctx
        .keyed("user_name")
        .elicit_form("What is your name?", schema("name", false)?)
        .await?;
    Ok(format!("Hello, {}!", text_answer(&answer, "name")))
}

/// `input-required-result-basic-sampling`.
#[task_tool(mode = "inline")]
async fn test_input_required_result_sampling(ctx: TaskContext) -> Result<String, ToolError> {
    let answer = ctx
        .sample(question("What is the capital of France?", 100))
        .await?;
    Ok(format!("The model said: {}", sampled(&answer)))
}

/// `input-required-result-basic-list-roots`.
#[task_tool(mode = "inline")]
async fn test_input_required_result_list_roots(ctx: TaskContext) -> Result<String, ToolError> {
    let roots = ctx.roots().await?;
    let uris: Vec<&str> = roots.roots.iter().map(|r| r.uri.as_str()).collect();
    Ok(format!("roots: {}", uris.join(", ")))
}

/// `input-required-result-request-state`: the SDK seals the `requestState` and checks it on
/// the retry, so an answer reaching the tool means the state was valid.
#[task_tool(mode = "inline")]
async fn test_input_required_result_request_state(ctx: TaskContext) -> Result<String, ToolError> {
    let answer = ctx
        .elicit_form("Please confirm", schema("ok", true)?)
        .await?;
    Ok(format!("state-ok: {}", action(&answer)))
}

/// `input-required-result-multiple-input-requests`: three kinds in one round.
#[task_tool(mode = "inline")]
async fn test_input_required_result_multiple_inputs(ctx: TaskContext) -> Result<String, ToolError> {
    let (name, greeting, roots) = tokio::try_join!(
        ctx.elicit_form("What is your name?", schema("name", false)?),
        ctx.sample(question("Generate a greeting", 50)),
        ctx.roots(),
    )?;
    Ok(format!(
        "{} {} ({} roots)",
        sampled(&greeting),
        text_answer(&name, "name"),
        roots.roots.len()
    ))
}

/// `input-required-result-multi-round`: a second question once the first is answered.
#[task_tool(mode = "inline")]
async fn test_input_required_result_multi_round(ctx: TaskContext) -> Result<String, ToolError> {
    let name = ctx
        .elicit_form("Step 1: What is your name?", schema("name", false)?)
        .await?;
    let color = ctx
        .elicit_form(
            "Step 2: What is your favorite color?",
            schema("color", false)?,
        )
        .await?;
    Ok(format!(
        "{} likes {}",
        text_answer(&name, "name"),
        text_answer(&color, "color")
    ))
}

/// `input-required-result-capability-check`: asks only what the client declared it can answer.
#[task_tool(mode = "inline")]
async fn test_input_required_result_capabilities(ctx: TaskContext) -> Result<String, ToolError> {
    let caps = ctx.client_capabilities();
    let (elicitation, sampling, roots) = (
        caps.elicitation.is_some(),
        caps.sampling.is_some(),
        caps.roots.is_some(),
    );
    if elicitation {
        let answer = ctx
            .elicit_form("What is your name?", schema("name", false)?)
            .await?;
        Ok(format!("Hello, {}!", text_answer(&answer, "name")))
    } else if sampling {
        let answer = ctx.sample(question("Say hello.", 20)).await?;
        Ok(format!("The model said: {}", sampled(&answer)))
    } else if roots {
        let roots = ctx.roots().await?;
        Ok(format!("{} roots", roots.roots.len()))
    } else {
        Ok("the client declared no input capability; nothing asked".to_owned())
    }
}

/// `tools-call-with-progress`: reports 0/100, 50/100 and 100/100, about 50 ms apart; with
/// `_meta.progressToken` each is a `notifications/progress` before the result.
#[task_tool(mode = "inline")]
async fn test_tool_with_progress(ctx: TaskContext) -> Result<String, ToolError> {
    for (i, progress) in [0.0, 50.0, 100.0].into_iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        ctx.progress(progress, Some(100.0), Some(&format!("{progress}% done")))
            .await?;
    }
    Ok("progress reported: 0, 50 and 100 of 100".to_owned())
}

/// `server-stateless`: logs at four levels. The request's
/// `_meta["io.modelcontextprotocol/logLevel"]` decides which become `notifications/message`;
/// without it none does.
#[task_tool(mode = "inline")]
async fn test_logging_tool(ctx: TaskContext) -> String {
    ctx.log(LoggingLevel::Debug, "debug: starting").await;
    ctx.log(LoggingLevel::Info, "info: working").await;
    ctx.log_as(
        "fixture",
        LoggingLevel::Warning,
        serde_json::json!({ "warning": "half way" }),
    )
    .await;
    ctx.log(
        LoggingLevel::Error,
        "error: a simulated error, for the log only",
    )
    .await;
    "logged at debug, info, warning and error".to_owned()
}

/// `tools-call-simple-text`.
#[task_tool(mode = "inline")]
async fn test_simple_text() -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(
        "This is a simple text response for testing.",
    )])
}

/// `tools-call-error`.
#[task_tool(mode = "inline")]
async fn test_error_handling() -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(
        "This tool intentionally returns an error for testing",
    )])
}

/// `tools-call-image`.
#[task_tool(mode = "inline")]
async fn test_image_content() -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::image(RED_PIXEL_PNG, "image/png")])
}

/// `tools-call-audio`.
#[task_tool(mode = "inline")]
async fn test_audio_content() -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::audio(EMPTY_WAV, "audio/wav")])
}

/// `tools-call-embedded-resource`.
#[task_tool(mode = "inline")]
async fn test_embedded_resource() -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::resource(ResourceContents::text(
        "This is an embedded resource content.",
        "test://embedded-resource",
    ))])
}

/// `tools-call-mixed-content`.
#[task_tool(mode = "inline")]
async fn test_multiple_content_types() -> CallToolResult {
    CallToolResult::success(vec![
        ContentBlock::text("Multiple content types test:"),
        ContentBlock::image(RED_PIXEL_PNG, "image/png"),
        ContentBlock::resource(
            ResourceContents::text(
                r#"{"test":"data","value":123}"#,
                "test://mixed-content-resource",
            )
            .with_mime_type("application/json"),
        ),
    ])
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // Print the error's message: a `main` that returns it would print its Debug form.
    if let Err(error) = run().await {
        eprintln!("error: {error}");
        return std::process::ExitCode::FAILURE;
    }
    std::process::ExitCode::SUCCESS
}

async fn run() -> std::io::Result<()> {
    let toolkit = toolkit![
        greet,
        slow_compute,
        failing_job,
        protocol_error_job,
        confirm_delete,
        multi_input,
        test_tool_with_task,
        test_input_required_result_tampered_state,
        test_input_required_result_elicitation,
        test_input_required_result_sampling,
        test_input_required_result_list_roots,
        test_input_required_result_request_state,
        test_input_required_result_multiple_inputs,
        test_input_required_result_multi_round,
        test_input_required_result_capabilities,
        test_custom_header,
        json_schema_2020_12_tool,
        test_missing_capability,
        test_streaming_elicitation,
        test_tool_with_progress,
        test_logging_tool,
        test_simple_text,
        test_error_handling,
        test_image_content,
        test_audio_content,
        test_embedded_resource,
        test_multiple_content_types,
    ]
    .map_err(std::io::Error::other)?;
    let server = TaskServer::from_engine(
        mcp_tasks::Engine::builder(toolkit)
            .with_server_info(rmcp::model::Implementation::new(
                "mcp-tasks-conformance-fixture",
                env!("CARGO_PKG_VERSION"),
            ))
            .build(),
    );
    let usage = "usage: conformance_fixture --port N [--tokens owner:token,...] | --stdio";
    let (mut port, mut stdio, mut options) = (None, false, HttpOptions::new());
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--stdio" => stdio = true,
            "--port" => {
                let value = args.next().unwrap_or_default();
                port = Some(value.parse::<u16>().map_err(|_| {
                    std::io::Error::other(format!("--port takes a port number, not `{value}`"))
                })?);
            }
            "--tokens" => {
                let tokens = StaticTokens::parse(&args.next().unwrap_or_default())
                    .map_err(|e| std::io::Error::other(format!("--tokens: {e}")))?;
                options = options.with_static_tokens(tokens);
            }
            other => {
                return Err(std::io::Error::other(format!(
                    "unknown argument `{other}`; {usage}"
                )));
            }
        }
    }
    match (stdio, port) {
        (true, None) => mcp_tasks::serve_stdio(server).await,
        (false, Some(port)) => {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
            eprintln!(
                "conformance fixture on http://{}/mcp",
                listener.local_addr()?
            );
            mcp_tasks::serve_http(listener, server, options).await
        }
        _ => Err(std::io::Error::other(usage)),
    }
}
