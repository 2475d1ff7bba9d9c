//! `#[arg(header = "..")]`: arguments mirrored into `Mcp-Param-{Name}` headers (SEP-2243;
//! docs/protocol.md C35), over Streamable HTTP on 127.0.0.1:0. The tool's `inputSchema`
//! carries `x-mcp-header` on each annotated property with a type a client accepts; the
//! server answers a `tools/call` whose header is missing, differs from the argument (after
//! decoding `=?base64?..?=`, C32), or holds characters a header value may not, with HTTP 400
//! and `-32020` naming the header (C33), before the tool runs; header names compare without
//! case (C34). `TaskClient` sends the headers itself. Definitions whose annotations a client
//! would refuse fail at registration (`ToolkitError::InvalidDefinition`).

mod common;

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use common::{Http, PLAIN, V2026, meta};
use mcp_tasks::{
    DefinitionError, State, TaskServer, ToolkitError, client::TaskClient, task_tool, toolkit,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// Counts the runs of `route`.
#[derive(Clone, Default)]
struct Runs(Arc<AtomicUsize>);

/// Where a request is served.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Zone {
    Eu,
    Us,
}

/// Routes a request; every argument but `note` travels as a header too.
#[task_tool(mode = "inline")]
async fn route(
    State(runs): State<Runs>,
    #[arg(header = "Region", description = "the region")] region: String,
    #[arg(header = "Shard")] shard: i64,
    #[arg(header = "Dry-Run")] dry_run: Option<bool>,
    #[arg(header = "Zone")] zone: Option<Zone>,
    #[arg(default)] note: String,
) -> String {
    runs.0.fetch_add(1, Ordering::SeqCst);
    let zone = match zone {
        Some(Zone::Eu) => "eu",
        Some(Zone::Us) => "us",
        None => "-",
    };
    format!("{region}/{shard}/{dry_run:?}/{zone}/{note}")
}

fn server(runs: &Runs) -> TaskServer {
    TaskServer::new(toolkit![route].unwrap().with_state(runs.clone()))
}

/// A `tools/call` of `route` with `arguments` and exactly these `Mcp-Param-*` headers (the
/// standard ones are added); the HTTP status and the JSON-RPC response.
async fn call(http: &Http, arguments: Value, params: &[(&str, &str)]) -> (u16, Value) {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": "route", "arguments": arguments, "_meta": meta(PLAIN) },
    });
    let mut headers = vec![
        ("mcp-protocol-version", V2026.to_owned()),
        ("mcp-method", "tools/call".to_owned()),
        ("mcp-name", "route".to_owned()),
    ];
    headers.extend(params.iter().map(|(n, v)| (*n, (*v).to_owned())));
    let (status, response, _) = http.post(&body, &headers).await;
    (status, response)
}

fn text(response: &Value) -> &str {
    response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text result: {response}"))
}

/// C35: the annotations in `tools/list`, each on a property of a type a client accepts.
#[tokio::test]
async fn the_schema_carries_the_annotations() {
    let mut http = Http::start(server(&Runs::default())).await;
    let (status, listed) = http.rpc("tools/list", json!({}), PLAIN).await;
    assert_eq!(status, 200, "{listed}");
    let schema = &listed["result"]["tools"][0]["inputSchema"];
    let properties = &schema["properties"];
    assert_eq!(
        properties["region"],
        json!({ "type": "string", "description": "the region", "x-mcp-header": "Region" })
    );
    assert_eq!(properties["shard"]["type"], "integer");
    assert_eq!(properties["shard"]["x-mcp-header"], "Shard");
    // An `Option` drops its `null` alternative (a missing value sends no header) and an
    // enum is inlined from `$defs`: a client reads the `type` on the property itself.
    assert_eq!(
        properties["dry_run"],
        json!({ "type": "boolean", "x-mcp-header": "Dry-Run" })
    );
    assert_eq!(properties["zone"]["type"], "string");
    assert_eq!(properties["zone"]["enum"], json!(["eu", "us"]));
    assert_eq!(properties["zone"]["x-mcp-header"], "Zone");
    assert!(properties["note"].get("x-mcp-header").is_none());
    assert_eq!(schema["required"], json!(["region", "shard"]));
}

/// What a refused call is (for the log), its arguments, its `Mcp-Param-*` headers, and the
/// text the error message must contain.
type Refusal = (
    &'static str,
    Value,
    Vec<(&'static str, &'static str)>,
    &'static str,
);

/// C32-C34: what the server accepts and refuses, and that a refused call never runs.
#[tokio::test]
async fn the_server_checks_the_headers() {
    let runs = Runs::default();
    let http = Http::start(server(&runs)).await;
    let args = json!({ "region": "eu-west", "shard": 7 });

    // Matching headers, with the names in any case.
    let (status, ok) = call(
        &http,
        args.clone(),
        &[("mcp-param-region", "eu-west"), ("MCP-PARAM-SHARD", "7")],
    )
    .await;
    assert_eq!(status, 200, "{ok}");
    assert_eq!(text(&ok), "eu-west/7/None/-/");

    // A value that cannot travel as plain ASCII goes Base64-encoded (C32).
    let (status, ok) = call(
        &http,
        json!({ "region": "Zürich", "shard": 7, "dry_run": true, "zone": "us" }),
        &[
            ("Mcp-Param-Region", "=?base64?WsO8cmljaA==?="),
            ("Mcp-Param-Shard", "7"),
            ("Mcp-Param-Dry-Run", "true"),
            ("Mcp-Param-Zone", "us"),
        ],
    )
    .await;
    assert_eq!(status, 200, "{ok}");
    assert_eq!(text(&ok), "Zürich/7/Some(true)/us/");
    let before = runs.0.load(Ordering::SeqCst);
    assert_eq!(before, 2);

    // Each refusal: HTTP 400, -32020, and a message naming the header (C33).
    let refused: [Refusal; 7] = [
        (
            "a missing header",
            args.clone(),
            vec![("Mcp-Param-Shard", "7")],
            "missing Mcp-Param-Region header",
        ),
        (
            "a different value",
            args.clone(),
            vec![("Mcp-Param-Region", "us-east"), ("Mcp-Param-Shard", "7")],
            "Mcp-Param-Region header `us-east` does not match body value `eu-west`",
        ),
        (
            "a different integer",
            args.clone(),
            vec![("Mcp-Param-Region", "eu-west"), ("Mcp-Param-Shard", "8")],
            "Mcp-Param-Shard header `8` does not match body value `7`",
        ),
        (
            "Base64 without its padding",
            json!({ "region": "Hello", "shard": 7 }),
            vec![
                ("Mcp-Param-Region", "=?base64?SGVsbG8?="),
                ("Mcp-Param-Shard", "7"),
            ],
            "Mcp-Param-Region header is not valid Base64",
        ),
        (
            "Base64 that decodes to something else",
            args.clone(),
            vec![
                ("Mcp-Param-Region", "=?base64?SGVsbG8=?="),
                ("Mcp-Param-Shard", "7"),
            ],
            "Mcp-Param-Region header `Hello` does not match body value `eu-west`",
        ),
        (
            "a header for an argument that is not there",
            args.clone(),
            vec![
                ("Mcp-Param-Region", "eu-west"),
                ("Mcp-Param-Shard", "7"),
                ("Mcp-Param-Dry-Run", "false"),
            ],
            "unexpected Mcp-Param-Dry-Run header",
        ),
        (
            "a plain value where Base64 was needed",
            json!({ "region": "Zürich", "shard": 7 }),
            vec![("Mcp-Param-Region", "Zurich"), ("Mcp-Param-Shard", "7")],
            "Mcp-Param-Region header `Zurich` does not match body value `Zürich`",
        ),
    ];
    for (what, arguments, headers, message) in refused {
        let (status, response) = call(&http, arguments, &headers).await;
        assert_eq!(status, 400, "{what}: {response}");
        assert_eq!(response["error"]["code"], -32020, "{what}: {response}");
        let got = response["error"]["message"].as_str().unwrap_or_default();
        assert!(got.contains(message), "{what}: {got:?} lacks {message:?}");
    }

    // A byte a header value may not hold as text (C33: invalid characters).
    let body = json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": { "name": "route", "arguments": args, "_meta": meta(PLAIN) },
    });
    let response = http
        .client
        .post(&http.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", V2026)
        .header("mcp-method", "tools/call")
        .header("mcp-name", "route")
        .header(
            "mcp-param-region",
            reqwest::header::HeaderValue::from_bytes(b"eu-w\xe9st").unwrap(),
        )
        .header("mcp-param-shard", "7")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let response: Value = response.json().await.unwrap();
    assert_eq!(response["error"]["code"], -32020, "{response}");
    assert!(
        response["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("Mcp-Param-Region header contains invalid characters"),
        "{response}"
    );

    assert_eq!(runs.0.load(Ordering::SeqCst), before, "a refused call ran");
}

/// C35, the client half: `TaskClient` over HTTP mirrors the annotated arguments itself (the
/// server refuses the call without them), Base64 where needed, with or without listing
/// the tools first.
#[tokio::test]
async fn the_client_sends_the_headers() {
    let runs = Runs::default();
    let http = Http::start(server(&runs)).await;
    let client = TaskClient::builder()
        .connect_http(&http.url)
        .await
        .expect("connects");
    let result = client
        .call_tool(
            "route",
            json!({ "region": "Zürich", "shard": 42, "dry_run": false, "note": "first" }),
        )
        .await
        .expect("the call goes through with its headers");
    assert_eq!(
        result.content[0].as_text().map(|t| t.text.as_str()),
        Some("Zürich/42/Some(false)/-/first")
    );
    let tools = client.list_tools().await.expect("lists");
    assert_eq!(
        tools.len(),
        1,
        "a client keeps a tool whose annotations are valid"
    );
    let result = client
        .call_tool(
            "route",
            json!({ "region": "eu", "shard": -1, "zone": "eu" }),
        )
        .await
        .expect("the second call too");
    assert_eq!(
        result.content[0].as_text().map(|t| t.text.as_str()),
        Some("eu/-1/None/eu/")
    );
    assert_eq!(runs.0.load(Ordering::SeqCst), 2);
    client.close().await;
}

/// A weight in kilograms: its schema is a `number`, which no header can carry.
#[derive(Deserialize, JsonSchema)]
struct Weight(f64);

/// Takes a `number` as a header: refused when the toolkit registers it (the compiler cannot
/// see through the newtype).
#[task_tool(mode = "inline")]
async fn weigh(#[arg(header = "Weight")] weight: Weight) -> String {
    weight.0.to_string()
}

/// Takes any JSON value as a header: refused at registration (`true` has no `type`).
#[task_tool(mode = "inline")]
async fn anything(#[arg(header = "Value")] value: serde_json::Value) -> String {
    value.to_string()
}

/// C35: a definition a client would drop is refused at registration, naming the property.
#[test]
fn types_no_header_can_carry_fail_at_registration() {
    let error = toolkit![weigh].expect_err("a number");
    assert_eq!(
        error,
        ToolkitError::InvalidDefinition {
            tool: "weigh".into(),
            problem: DefinitionError::HeaderNotPrimitive {
                property: "weight".into(),
                header: "Weight".into(),
                found: "\"number\"".into(),
            },
        }
    );
    assert_eq!(
        error.to_string(),
        "tool `weigh`: property `weight` is sent as the header `Mcp-Param-Weight`, so its schema \
         `type` must be \"string\", \"integer\" or \"boolean\"; found \"number\""
    );
    let error = toolkit![anything].expect_err("any value");
    assert!(
        matches!(
            &error,
            ToolkitError::InvalidDefinition {
                problem: DefinitionError::HeaderNotPrimitive { found, .. },
                ..
            } if found == "no `type`"
        ),
        "{error}"
    );
}
