//! Property-based fuzzing of the real request path (issue 12, item 6), on stable Rust with
//! `proptest`: JSON-RPC messages for `tools/call` (arguments generated from the tools' own
//! input schemas, then sometimes broken; random `inputResponses` and `requestState`) and for
//! `tasks/get` / `tasks/update` / `tasks/cancel` with random shapes and values (known task ids,
//! random ones, wrong types), plus bytes that are not JSON, sent over Streamable HTTP on
//! 127.0.0.1:0 and over stdio framing (`serve_io` on an in-process pipe).
//!
//! Mixed into that stream: valid calls (a `scalars` call, a `tasks/get` of a known task)
//! that must succeed with their answer (liveness: a server that refuses everything fails);
//! the same valid calls with an `Mcp-Method`, `Mcp-Name` or `MCP-Protocol-Version` header
//! that contradicts the body (missing, another value, another case, a base64 form of
//! another value), which must be refused with HTTP 400 and `-32020` (or `-32022` for a
//! version the server does not speak), while over stdio, which has no headers, they must
//! succeed; and bad envelopes (`jsonrpc` wrong or missing, an `id` or `method` of the
//! wrong type, `params` not an object, a batch array), which must be refused, and no `id`
//! (a notification), which must get no answer.
//!
//! Properties, per message:
//! - the server does not panic (a panic hook counts panics in every thread);
//! - the answer is one JSON-RPC response: `jsonrpc: "2.0"`, the request's `id`, exactly one
//!   of `result` / `error`, and an error code from the JSON-RPC and MCP sets; over HTTP,
//!   a JSON-RPC body (a plain-text 400 is not an answer);
//! - a request answered with an error created no task (the store's size), changed no task
//!   (every task's full state as the store holds it: status, message, `lastUpdatedAt`, open
//!   questions, outcome, cancel intent, answers kept) and, unless the error came from the
//!   tool's own input (`-32021`, `-32603`), ran no tool (a run counter), all read once the
//!   server is quiet (unchanged for [`QUIET`]), so that a late run or write is seen. Every
//!   case starts with the tasks settled (none `working`, no cancel pending), the test knows
//!   every task in the store (the ids its answers named), and live `confirm` tasks waiting
//!   for an answer are always there to be hit: `tasks/update` and `tasks/cancel` cases aim
//!   at them (a task that ends is replaced after its case);
//! - the server still answers afterwards (`tools/list`).
//!
//! `cargo test --test fuzz` runs 2,500 cases per transport (`MCP_TASKS_FUZZ_CASES` sets
//! another number). `MCP_TASKS_FUZZ_SECS=600` runs batches until that many seconds have
//! passed and prints the number of cases.

mod common;

use std::{
    cell::RefCell,
    collections::{BTreeMap, BTreeSet},
    sync::{
        Arc, Mutex, OnceLock,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use common::{Http, PLAIN, Stdio, TASKS, V2026, meta, parse_body};
use mcp_tasks::{
    Engine, MemoryStore, State, TaskContext, TaskServer, ToolError,
    store::{TaskSnapshot, TaskStore},
    task_tool, toolkit,
};
use proptest::{
    prelude::*,
    test_runner::{Config, TestCaseError, TestRunner},
};
use rmcp::model::{ElicitationSchema, InputResponses, TaskStatus};
use serde_json::{Value, json};

/// Starts of every tool's work.
#[derive(Clone, Default)]
struct Runs(Arc<AtomicUsize>);

impl Runs {
    fn bump(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Scalars and options.
#[task_tool(mode = "inline")]
async fn scalars(
    State(runs): State<Runs>,
    count: u32,
    label: String,
    flag: Option<bool>,
    ratio: Option<f64>,
) -> String {
    runs.bump();
    format!("{count} {label} {flag:?} {ratio:?}")
}

/// One filter of `search`.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Filter {
    field: String,
    values: Vec<i64>,
}

/// How `search` orders its results.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Order {
    Asc,
    Desc,
}

/// Nested arguments; runs as a task when the caller declares the extension.
#[task_tool(poll_interval = "10ms")]
async fn search(
    State(runs): State<Runs>,
    query: String,
    filters: Vec<Filter>,
    order: Option<Order>,
) -> usize {
    runs.bump();
    let _ = order;
    query.len()
        + filters
            .iter()
            .map(|f| f.field.len() + f.values.len())
            .sum::<usize>()
}

/// Asks for a confirmation before the task exists (multi round-trip), then, as a task,
/// for a note it waits for.
#[task_tool(mode = "required", poll_interval = "10ms")]
async fn confirm(
    ctx: TaskContext,
    State(runs): State<Runs>,
    name: String,
) -> Result<String, ToolError> {
    runs.bump();
    let schema = ElicitationSchema::builder()
        .required_bool("ok")
        .build()
        .map_err(|e| ToolError::new(e.to_string()))?;
    let first = ctx
        .elicit_form_before_task(format!("Delete {name}?"), schema.clone())
        .await?;
    let note = ctx.elicit_form("A note?", schema).await?;
    Ok(format!("{:?} {:?}", first.action, note.action))
}

/// Panics seen in any thread since the hook was installed.
static PANICS: AtomicUsize = AtomicUsize::new(0);

fn count_panics() {
    static HOOK: OnceLock<()> = OnceLock::new();
    HOOK.get_or_init(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // The server's tasks run on the runtime's workers; the test threads' own panics
            // (a failing test) are not the server's.
            if std::thread::current()
                .name()
                .is_some_and(|name| name.starts_with("tokio-runtime-worker"))
            {
                PANICS.fetch_add(1, Ordering::SeqCst);
            }
            previous(info);
        }));
    });
}

struct Fixture {
    store: Arc<MemoryStore>,
    runs: Runs,
}

impl Fixture {
    fn new() -> Self {
        Self {
            store: Arc::new(MemoryStore::new()),
            runs: Runs::default(),
        }
    }

    fn server(&self) -> TaskServer {
        let toolkit = toolkit![scalars, search, confirm]
            .unwrap()
            .with_state(self.runs.clone());
        TaskServer::from_engine(
            Engine::builder(toolkit)
                .with_shared_store(self.store.clone())
                .build(),
        )
    }

    fn counts(&self) -> (usize, usize) {
        (self.store.len(), self.runs.0.load(Ordering::SeqCst))
    }

    /// The full state of every task in `ids`, as the store holds it: status, message,
    /// `lastUpdatedAt`, open questions, outcome, cancel intent, and the answers kept.
    async fn tasks(&self, ids: &BTreeSet<String>) -> Tasks {
        let mut tasks = Tasks::new();
        for id in ids {
            let snapshot = self.store.get(id).await.unwrap();
            let answers = self.store.stored_answers(id).await.unwrap_or_default();
            tasks.insert(id.clone(), (snapshot, answers));
        }
        tasks
    }
}

/// Every task's state, by id (`None`: gone).
type Tasks = BTreeMap<String, (Option<TaskSnapshot>, InputResponses)>;

/// Whether no task is about to change by itself: none is `working`, and none that has not
/// ended holds a cancel its work has not honoured yet.
fn settled(tasks: &Tasks) -> bool {
    tasks.values().all(|(task, _)| {
        task.as_ref().is_none_or(|task| {
            task.status != TaskStatus::Working
                && (!task.cancel_requested || is_terminal(task.status))
        })
    })
}

fn is_terminal(status: TaskStatus) -> bool {
    matches!(
        status,
        TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
    )
}

/// The tasks whose state differs between two reads, with both states.
fn changed(before: &Tasks, after: &Tasks) -> Vec<String> {
    after
        .iter()
        .filter(|(id, state)| before.get(*id) != Some(*state))
        .map(|(id, state)| format!("{id}: {:?}\n  -> {state:?}", before.get(id)))
        .collect()
}

/// One thing to send.
#[derive(Debug, Clone)]
enum Message {
    Json(Value),
    Bytes(Vec<u8>),
}

impl Message {
    fn bytes(&self) -> Vec<u8> {
        match self {
            Self::Json(value) => value.to_string().into_bytes(),
            Self::Bytes(bytes) => bytes.clone(),
        }
    }
}

/// What a case must get back, beyond the properties every answer has.
#[derive(Debug, Clone)]
enum Expect {
    /// Whatever the server decides.
    Any,
    /// A valid call (liveness): a result whose JSON holds this text.
    Success(String),
    /// A JSON-RPC error with one of these codes, and no effect; over HTTP, a header that
    /// contradicts the body gets status 400.
    Refused(&'static [i64]),
    /// A notification: no answer (HTTP 202 with an empty body, nothing on stdio).
    Nothing,
}

/// One fuzz case: a message, HTTP headers that replace the ones that match its body
/// (`None`: left out), and what each transport must answer.
#[derive(Debug, Clone)]
struct Case {
    message: Message,
    headers: Vec<(&'static str, Option<String>)>,
    http: Expect,
    stdio: Expect,
}

impl Case {
    fn any(message: Message) -> Self {
        Self {
            message,
            headers: Vec::new(),
            http: Expect::Any,
            stdio: Expect::Any,
        }
    }
}

/// Codes for a header that contradicts the body (`-32022`: a version the server does not
/// speak).
const HEADER_CODES: &[i64] = &[-32020, -32022];
/// Codes for an envelope that is not a JSON-RPC request.
const ENVELOPE_CODES: &[i64] = &[-32600, -32700];
/// Codes for params that are not an object (a `tasks/*` request answers the missing tasks
/// capability first, `-32021`, by design: the `_meta` that would declare it is in the
/// params).
const PARAMS_CODES: &[i64] = &[-32600, -32602, -32021];

/// A valid call and what it answers: `scalars` (inline, its text) or `tasks/get` of a known
/// task (its id).
fn valid_call(pools: &Pools) -> BoxedStrategy<(Value, String)> {
    let scalars = (1_u32..1_000_000, any::<u32>(), "[a-z]{1,8}").prop_map(|(id, count, label)| {
        (
            json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                "name": "scalars", "arguments": { "count": count, "label": label },
                "_meta": meta(PLAIN) } }),
            format!("{count} {label} None None"),
        )
    });
    let known = prop_oneof![
        prop::sample::select(pools.task_ids.clone()),
        pools.live.task(),
    ];
    let get = (1_u32..1_000_000, known).prop_map(|(id, task)| {
        (
            json!({ "jsonrpc": "2.0", "id": id, "method": "tasks/get", "params": {
                    "taskId": task, "_meta": meta(TASKS) } }),
            task,
        )
    });
    prop_oneof![3 => scalars, 1 => get].boxed()
}

/// The base64 form of a header value (`=?base64?..?=`, standard alphabet, padded).
fn base64(value: &str) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in value.as_bytes().chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    format!("=?base64?{out}?=")
}

/// A valid call with one header that contradicts its body, or (one in eight) the base64
/// form of the right `Mcp-Name`, which must be accepted.
fn header_conflict(pools: &Pools) -> BoxedStrategy<Case> {
    (valid_call(pools), 0_u8..12)
        .prop_map(|((message, text), which)| {
            let method = message["method"].as_str().unwrap().to_owned();
            let name = message["params"]["name"]
                .as_str()
                .or(message["params"]["taskId"].as_str())
                .unwrap()
                .to_owned();
            let other_method = if method == "tools/call" {
                "tasks/get"
            } else {
                "tasks/cancel"
            };
            let header: (&'static str, Option<String>) = match which {
                0 => ("mcp-method", Some(other_method.to_owned())),
                1 => ("mcp-method", Some(method.to_uppercase())),
                2 => ("mcp-method", None),
                3 => ("mcp-name", Some(format!("{name}x"))),
                4 => ("mcp-name", Some(base64(&format!("{name}x")))),
                5 => ("mcp-name", None),
                6 => ("mcp-name", Some(name.to_uppercase())),
                7 => ("mcp-protocol-version", Some("2025-11-25".to_owned())),
                8 => ("mcp-protocol-version", Some("1999-01-01".to_owned())),
                9 => ("mcp-method", Some("tools/list".to_owned())),
                _ => ("mcp-name", Some(base64(&name))),
            };
            let http = if which >= 10 {
                Expect::Success(text.clone())
            } else {
                Expect::Refused(HEADER_CODES)
            };
            Case {
                message: Message::Json(message),
                headers: vec![header],
                http,
                stdio: Expect::Success(text),
            }
        })
        .boxed()
}

/// A valid call whose envelope is broken in one way.
fn bad_envelope(pools: &Pools) -> BoxedStrategy<Case> {
    (valid_call(pools), 0_u8..13)
        .prop_map(|((mut message, _), which)| {
            let mut expect = Expect::Refused(ENVELOPE_CODES);
            let object = message.as_object_mut().unwrap();
            match which {
                0 => drop(object.insert("jsonrpc".into(), json!("1.0"))),
                1 => drop(object.remove("jsonrpc")),
                2 => drop(object.insert("jsonrpc".into(), json!(2))),
                3 => drop(object.insert("method".into(), json!(42))),
                4 => drop(object.insert("method".into(), Value::Null)),
                5 => drop(object.remove("method")),
                6 => drop(object.insert("id".into(), json!({ "n": 1 }))),
                7 => drop(object.insert("id".into(), json!([1]))),
                8 => drop(object.insert("id".into(), json!(true))),
                9 => {
                    object.insert("params".into(), json!(["scalars", {}]));
                    expect = Expect::Refused(PARAMS_CODES);
                }
                10 => {
                    object.insert("params".into(), json!("scalars"));
                    expect = Expect::Refused(PARAMS_CODES);
                }
                11 => {
                    object.remove("id");
                    expect = Expect::Nothing;
                }
                _ => message = json!([message]),
            }
            Case {
                message: Message::Json(message),
                headers: Vec::new(),
                http: expect.clone(),
                stdio: expect,
            }
        })
        .boxed()
}

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u32>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f)
            .map(Value::Number)),
        "[a-z0-9 _./-]{0,12}".prop_map(Value::from),
        any::<String>().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z_]{1,8}", inner, 0..5)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// Values for a JSON Schema (the subset schemars writes: `type`, `properties`, `required`,
/// `items`, `enum`, `$ref` into `$defs`, `anyOf`/`oneOf`), valid most of the time.
fn from_schema(schema: &Value, defs: &Value, depth: u32) -> BoxedStrategy<Value> {
    if depth > 5 {
        return any_json().boxed();
    }
    if let Some(reference) = schema["$ref"].as_str() {
        let name = reference.rsplit('/').next().unwrap_or_default();
        return from_schema(&defs[name], defs, depth + 1);
    }
    if let Some(values) = schema["enum"].as_array().filter(|v| !v.is_empty()) {
        return prop::sample::select(values.clone()).boxed();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = schema[key].as_array().filter(|v| !v.is_empty()) {
            let options: Vec<_> = options
                .iter()
                .map(|s| from_schema(s, defs, depth + 1))
                .collect();
            return prop::strategy::Union::new(options).boxed();
        }
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    if types.is_empty() {
        return any_json().boxed();
    }
    let strategies: Vec<BoxedStrategy<Value>> = types
        .into_iter()
        .map(|t| match t {
            "null" => Just(Value::Null).boxed(),
            "boolean" => any::<bool>().prop_map(Value::from).boxed(),
            "integer" if schema["minimum"].as_f64() == Some(0.0) => prop_oneof![
                9 => any::<u32>().prop_map(Value::from),
                1 => any::<i64>().prop_map(Value::from),
            ]
            .boxed(),
            "integer" => any::<i64>().prop_map(Value::from).boxed(),
            "number" => any::<f64>()
                .prop_filter_map("finite", |f| {
                    serde_json::Number::from_f64(f).map(Value::Number)
                })
                .boxed(),
            "string" => prop_oneof!["[a-z ]{0,10}", any::<String>()]
                .prop_map(Value::from)
                .boxed(),
            "array" => prop::collection::vec(from_schema(&schema["items"], defs, depth + 1), 0..4)
                .prop_map(Value::Array)
                .boxed(),
            "object" => object_from_schema(schema, defs, depth),
            _ => any_json().boxed(),
        })
        .collect();
    prop::strategy::Union::new(strategies).boxed()
}

fn object_from_schema(schema: &Value, defs: &Value, depth: u32) -> BoxedStrategy<Value> {
    let required: Vec<String> = schema["required"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let properties: Vec<(String, bool, BoxedStrategy<Value>)> = schema["properties"]
        .as_object()
        .map(|props| {
            props
                .iter()
                .map(|(name, s)| {
                    (
                        name.clone(),
                        required.contains(name),
                        from_schema(s, defs, depth + 1),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let mut object: BoxedStrategy<serde_json::Map<String, Value>> =
        Just(serde_json::Map::new()).boxed();
    for (name, required, strategy) in properties {
        object = (object, strategy, any::<u8>())
            .prop_map(move |(mut map, value, roll)| {
                // Required properties are present 9 times in 10, optional ones half the time.
                if (required && roll % 10 != 0) || (!required && roll % 2 == 0) {
                    map.insert(name.clone(), value);
                }
                map
            })
            .boxed();
    }
    (
        object,
        prop::option::weighted(0.1, ("[a-z]{1,6}", any_json())),
    )
        .prop_map(|(mut map, extra)| {
            if let Some((key, value)) = extra {
                map.insert(key, value);
            }
            Value::Object(map)
        })
        .boxed()
}

/// What the messages draw their names and ids from.
#[derive(Clone, Debug)]
struct Pools {
    /// (tool name, input schema)
    tools: Vec<(String, Value)>,
    /// Ids of the tasks seeded at the start (ended or live by now).
    task_ids: Vec<String>,
    input_keys: Vec<String>,
    /// `confirm` tasks waiting for their note, each with the key of that question: a task
    /// that ends (answered or cancelled) is replaced by a new one after its case, so refused
    /// `tasks/update` and `tasks/cancel` requests keep meeting tasks they could change.
    live: Live,
}

/// A live task and the key of the question it waits on.
#[derive(Clone, Debug)]
struct Slot {
    task: String,
    key: String,
}

/// The live slots, read when a case is generated.
#[derive(Clone, Debug, Default)]
struct Live(Arc<Mutex<Vec<Slot>>>);

impl Live {
    fn slot(&self, index: prop::sample::Index) -> Slot {
        index.get(&self.0.lock().unwrap()).clone()
    }

    /// The id of a live task.
    fn task(&self) -> BoxedStrategy<String> {
        let live = self.clone();
        any::<prop::sample::Index>()
            .prop_map(move |index| live.slot(index).task)
            .boxed()
    }

    /// The key of a live task's question.
    fn key(&self) -> BoxedStrategy<String> {
        let live = self.clone();
        any::<prop::sample::Index>()
            .prop_map(move |index| live.slot(index).key)
            .boxed()
    }
}

fn request_meta() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        4 => Just(Some(meta(TASKS))),
        3 => Just(Some(meta(PLAIN))),
        1 => Just(None),
        1 => any_json().prop_map(Some),
        1 => prop_oneof![Just("2025-11-25"), Just("1999-01-01"), Just("")]
            .prop_map(|v| {
                let mut m = meta(TASKS);
                m["io.modelcontextprotocol/protocolVersion"] = json!(v);
                Some(m)
            }),
    ]
}

fn task_id(pools: &Pools) -> BoxedStrategy<Value> {
    prop_oneof![
        2 => prop::sample::select(pools.task_ids.clone()).prop_map(Value::from),
        3 => pools.live.task().prop_map(Value::from),
        2 => any::<String>().prop_map(Value::from),
        2 => any_json(),
    ]
    .boxed()
}

fn input_responses(pools: &Pools) -> BoxedStrategy<Value> {
    let key = prop_oneof![
        prop::sample::select(pools.input_keys.clone()),
        pools.live.key(),
        "[a-z0-9-]{1,12}",
    ];
    prop_oneof![
        6 => prop::collection::btree_map(key, answer(), 0..3)
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        1 => any_json(),
    ]
    .boxed()
}

/// One answer to a question: valid or not.
fn answer() -> BoxedStrategy<Value> {
    prop_oneof![
        3 => (
            prop_oneof![Just("accept"), Just("decline"), Just("cancel"), Just("maybe")],
            prop::option::of(any_json()),
        )
            .prop_map(|(action, content)| {
                let mut answer = json!({ "action": action });
                if let Some(content) = content {
                    answer["content"] = content;
                }
                answer
            }),
        1 => Just(json!({ "action": "accept", "content": { "ok": true } })),
        1 => any_json(),
    ]
    .boxed()
}

fn request_state(pools: &Pools) -> BoxedStrategy<Option<Value>> {
    let tools: Vec<String> = pools.tools.iter().map(|(name, _)| name.clone()).collect();
    prop_oneof![
        4 => Just(None),
        1 => any::<String>().prop_map(|s| Some(Value::from(s))),
        1 => (prop::sample::select(tools), input_responses(pools))
            .prop_map(|(tool, answers)| Some(Value::from(json!({ "tool": tool, "answers": answers }).to_string()))),
        1 => any_json().prop_map(Some),
    ]
    .boxed()
}

fn call_params(pools: &Pools) -> BoxedStrategy<Value> {
    let tools: Vec<BoxedStrategy<(Value, Value)>> = pools
        .tools
        .iter()
        .map(|(name, schema)| {
            let defs = schema["$defs"].clone();
            let name = Value::from(name.clone());
            prop_oneof![
                8 => from_schema(schema, &defs, 0),
                1 => any_json(),
                1 => any::<String>().prop_map(Value::from),
            ]
            .prop_map(move |arguments| (name.clone(), arguments))
            .boxed()
        })
        .collect();
    let name_and_arguments = prop_oneof![
        8 => prop::strategy::Union::new(tools),
        1 => (any_json(), any_json()),
    ];
    (
        name_and_arguments,
        prop::option::weighted(0.3, input_responses(pools)),
        request_state(pools),
        request_meta(),
        any::<u8>(),
    )
        .prop_map(|((name, arguments), responses, state, meta, drop)| {
            let mut params = json!({ "name": name, "arguments": arguments });
            if drop % 13 == 0 {
                params.as_object_mut().map(|p| p.remove("name"));
            }
            if drop % 7 == 0 {
                params.as_object_mut().map(|p| p.remove("arguments"));
            }
            if let Some(responses) = responses {
                params["inputResponses"] = responses;
            }
            if let Some(state) = state {
                params["requestState"] = state;
            }
            if let Some(meta) = meta {
                params["_meta"] = meta;
            }
            params
        })
        .boxed()
}

fn task_params(pools: &Pools, update: bool) -> BoxedStrategy<Value> {
    (
        prop::option::weighted(0.9, task_id(pools)),
        prop::option::weighted(if update { 0.9 } else { 0.1 }, input_responses(pools)),
        request_meta(),
    )
        .prop_map(|(task_id, responses, meta)| {
            let mut params = json!({});
            if let Some(task_id) = task_id {
                params["taskId"] = task_id;
            }
            if let Some(responses) = responses {
                params["inputResponses"] = responses;
            }
            if let Some(meta) = meta {
                params["_meta"] = meta;
            }
            params
        })
        .boxed()
}

/// `tasks/update` params that answer the question a live task waits on (valid or not), with
/// any `_meta`: an answer the server refuses must not reach the task.
fn targeted_update(pools: &Pools) -> BoxedStrategy<Value> {
    let live = pools.live.clone();
    (any::<prop::sample::Index>(), answer(), request_meta())
        .prop_map(move |(index, answer, meta)| {
            let slot = live.slot(index);
            let mut params = json!({ "taskId": slot.task, "inputResponses": { slot.key: answer } });
            if let Some(meta) = meta {
                params["_meta"] = meta;
            }
            params
        })
        .boxed()
}

/// `tasks/cancel` params for a live task, with any `_meta`: a cancel the server refuses must
/// not reach the task.
fn targeted_cancel(pools: &Pools) -> BoxedStrategy<Value> {
    (pools.live.task(), request_meta())
        .prop_map(|(task, meta)| {
            let mut params = json!({ "taskId": task });
            if let Some(meta) = meta {
                params["_meta"] = meta;
            }
            params
        })
        .boxed()
}

fn fuzz_cases(pools: &Pools) -> BoxedStrategy<Case> {
    let id = prop_oneof![
        5 => (1_u32..1_000_000).prop_map(Value::from),
        1 => "[a-z0-9-]{1,10}".prop_map(Value::from),
    ];
    let method_params = prop_oneof![
        6 => call_params(pools).prop_map(|p| ("tools/call".to_owned(), Some(p))),
        3 => task_params(pools, false).prop_map(|p| ("tasks/get".to_owned(), Some(p))),
        3 => task_params(pools, true).prop_map(|p| ("tasks/update".to_owned(), Some(p))),
        2 => targeted_update(pools).prop_map(|p| ("tasks/update".to_owned(), Some(p))),
        2 => task_params(pools, false).prop_map(|p| ("tasks/cancel".to_owned(), Some(p))),
        2 => targeted_cancel(pools).prop_map(|p| ("tasks/cancel".to_owned(), Some(p))),
        1 => (
            prop_oneof![Just("tools/call"), Just("tasks/get"), Just("tasks/update"), Just("tasks/cancel"), Just("tasks/result"), Just("tasks/list"), Just("nope/nope")],
            prop::option::of(any_json()),
        )
            .prop_map(|(m, p)| (m.to_owned(), p)),
    ];
    let fuzzed = prop_oneof![
        12 => (id, method_params).prop_map(|(id, (method, params))| {
            let mut message = json!({ "jsonrpc": "2.0", "id": id, "method": method });
            if let Some(params) = params {
                message["params"] = params;
            }
            Message::Json(message)
        }),
        1 => prop::collection::vec(any::<u8>(), 0..64)
            .prop_filter("not blank", |b| !b.iter().all(u8::is_ascii_whitespace) && !b.contains(&b'\n'))
            .prop_map(Message::Bytes),
        1 => any_json()
            .prop_filter("not an object", |v| !v.is_object())
            .prop_map(Message::Json),
    ];
    let valid = valid_call(pools).prop_map(|(message, text)| Case {
        message: Message::Json(message),
        headers: Vec::new(),
        http: Expect::Success(text.clone()),
        stdio: Expect::Success(text),
    });
    prop_oneof![
        14 => fuzzed.prop_map(Case::any),
        3 => valid,
        2 => header_conflict(pools),
        2 => bad_envelope(pools),
    ]
    .boxed()
}

/// JSON-RPC and MCP error codes a server may answer with.
const STANDARD_CODES: [i64; 8] = [
    -32700, -32600, -32601, -32602, -32603, -32020, -32021, -32022,
];

/// The request id of a message, when it has a valid one.
fn valid_id(message: &Message) -> Option<Value> {
    match message {
        Message::Json(value) => value
            .get("id")
            .filter(|id| id.is_u64() || id.is_string())
            .cloned(),
        Message::Bytes(_) => None,
    }
}

/// Checks one answer; `Err` names the broken property.
fn check_answer(message: &Message, answer: &Value) -> Result<Option<i64>, String> {
    if answer["jsonrpc"] != "2.0" {
        return Err(format!("not JSON-RPC 2.0: {answer}"));
    }
    let has_result = answer.get("result").is_some();
    let error = answer.get("error");
    if has_result == error.is_some() {
        return Err(format!("not exactly one of result/error: {answer}"));
    }
    let code = match error {
        None => None,
        Some(error) => {
            let code = error["code"]
                .as_i64()
                .ok_or_else(|| format!("error without code: {answer}"))?;
            if !STANDARD_CODES.contains(&code) {
                return Err(format!("non-standard code {code}: {answer}"));
            }
            if !error["message"].is_string() {
                return Err(format!("error without message: {answer}"));
            }
            Some(code)
        }
    };
    let answered_id = answer.get("id").filter(|id| !id.is_null());
    match (valid_id(message), answered_id) {
        (Some(sent), Some(got)) if &sent != got => {
            return Err(format!("id {got} for request {sent}"));
        }
        (Some(_), None) if !matches!(code, Some(-32700 | -32600)) => {
            return Err(format!("no id in the answer: {answer}"));
        }
        _ => {}
    }
    Ok(code)
}

/// The properties that hold around one message, given the counts before and after.
fn check_effects(
    code: Option<i64>,
    before: (usize, usize),
    after: (usize, usize),
) -> Result<(), String> {
    let Some(code) = code else { return Ok(()) };
    if after.0 != before.0 {
        return Err(format!(
            "a request answered {code} created a task ({} -> {})",
            before.0, after.0
        ));
    }
    if !matches!(code, -32021 | -32603) && after.1 != before.1 {
        return Err(format!("a request answered {code} ran a tool"));
    }
    Ok(())
}

/// One answer, with its HTTP status (`None` on stdio).
struct Answer {
    value: Value,
    status: Option<u16>,
}

/// Checks an answer against what its case expects; `Err` names the broken property.
fn check_expect(expect: &Expect, answer: Option<&Answer>, code: Option<i64>) -> Result<(), String> {
    let shown = || answer.map_or_else(|| "no answer".to_owned(), |a| a.value.to_string());
    match expect {
        Expect::Any if answer.is_none() => Err("no answer to a request".to_owned()),
        Expect::Any => Ok(()),
        Expect::Success(text) => match answer {
            Some(a) if code.is_none() && a.value["result"].to_string().contains(text.as_str()) => {
                Ok(())
            }
            _ => Err(format!(
                "a valid call failed (expected {text:?}): {}",
                shown()
            )),
        },
        Expect::Refused(codes) => match (answer, code) {
            (Some(a), Some(code))
                if codes.contains(&code)
                    && (*codes != HEADER_CODES || a.status.is_none_or(|s| s == 400)) =>
            {
                Ok(())
            }
            _ => Err(format!("not refused with one of {codes:?}: {}", shown())),
        },
        Expect::Nothing if answer.is_none() => Ok(()),
        Expect::Nothing => Err(format!("a notification was answered: {}", shown())),
    }
}

/// How long the counts and tasks must stay unchanged before the server is taken as quiet.
const QUIET: Duration = Duration::from_millis(20);

/// The counts and the known tasks' states once they stayed unchanged for [`QUIET`] (at most
/// 2 s): a run started late (a task spawned after the answer), or a change applied after
/// the answer, is seen.
async fn quiet(fixture: &Fixture, known: &BTreeSet<String>) -> ((usize, usize), Tasks) {
    let step = Duration::from_millis(5);
    let mut last = (fixture.counts(), fixture.tasks(known).await);
    let mut still = Duration::ZERO;
    let started = Instant::now();
    while still < QUIET && started.elapsed() < Duration::from_secs(2) {
        tokio::time::sleep(step).await;
        let now = (fixture.counts(), fixture.tasks(known).await);
        if now == last {
            still += step;
        } else {
            (last, still) = (now, Duration::ZERO);
        }
    }
    last
}

/// A transport to fuzz.
enum Peer {
    Http(Http),
    Stdio(Stdio),
}

impl Peer {
    fn stdio(server: TaskServer) -> Self {
        Self::Stdio(Stdio::framed(server))
    }

    /// Sends one case; returns its answer (`None`: none, for a notification), or `Err` when
    /// there is none where one is due or it is not one JSON-RPC message.
    async fn send(&mut self, case: &Case) -> Result<Option<Answer>, String> {
        let message = &case.message;
        match self {
            Self::Http(http) => {
                let mut headers: Vec<(&str, String)> =
                    vec![("mcp-protocol-version", V2026.to_owned())];
                if let Message::Json(value) = message {
                    if let Some(method) = value["method"].as_str() {
                        headers.push(("mcp-method", method.to_owned()));
                    }
                    let name = value["params"]["name"]
                        .as_str()
                        .or(value["params"]["taskId"].as_str());
                    if let Some(name) =
                        name.filter(|n| n.bytes().all(|b| b.is_ascii_graphic() || b == b' '))
                    {
                        headers.push(("mcp-name", name.to_owned()));
                    }
                }
                for (name, value) in &case.headers {
                    headers.retain(|(header, _)| header != name);
                    if let Some(value) = value {
                        headers.push((name, value.clone()));
                    }
                }
                let mut request = http
                    .client
                    .post(&http.url)
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream");
                for (name, value) in headers {
                    request = request.header(name, value);
                }
                let response = tokio::time::timeout(
                    Duration::from_secs(10),
                    request.body(message.bytes()).send(),
                )
                .await
                .map_err(|_| "no HTTP answer within 10 s".to_owned())?
                .map_err(|e| format!("HTTP request failed: {e}"))?;
                let status = response.status().as_u16();
                let text = response
                    .text()
                    .await
                    .map_err(|e| format!("HTTP body: {e}"))?;
                if text.trim().is_empty() && status == 202 {
                    return Ok(None);
                }
                let answer = parse_body(&text);
                if answer.is_null() {
                    return Err(format!("HTTP {status} without a JSON-RPC body: {text:?}"));
                }
                let code = answer["error"]["code"].as_i64();
                let expected_status: &[u16] = match code {
                    None => &[200],
                    Some(-32601) => &[404, 200],
                    Some(_) => &[200, 400, 413],
                };
                if !expected_status.contains(&status) {
                    return Err(format!("HTTP {status} for {answer}"));
                }
                Ok(Some(Answer {
                    value: answer,
                    status: Some(status),
                }))
            }
            Self::Stdio(stdio) => {
                stdio.try_send_line(&message.bytes()).await?;
                // A notification gets no answer; one sent anyway is read by `alive` in the
                // place of its ping's, and fails it.
                if matches!(case.stdio, Expect::Nothing) {
                    return Ok(None);
                }
                let value = stdio.try_answer().await?;
                Ok(Some(Answer {
                    value,
                    status: None,
                }))
            }
        }
    }

    /// Sends a message that must be answered; returns the answer.
    async fn request(&mut self, message: Message) -> Value {
        self.send(&Case::any(message))
            .await
            .unwrap()
            .expect("an answer")
            .value
    }

    /// The server still answers.
    async fn alive(&mut self) -> Result<(), String> {
        let ping = Message::Json(
            json!({ "jsonrpc": "2.0", "id": 999_999_999_u64, "method": "tools/list",
            "params": { "_meta": meta(PLAIN) } }),
        );
        let answer = self
            .send(&Case::any(ping))
            .await?
            .map(|answer| answer.value)
            .unwrap_or_default();
        if answer["result"]["tools"]
            .as_array()
            .is_none_or(Vec::is_empty)
        {
            return Err(format!("tools/list after the message: {answer}"));
        }
        Ok(())
    }
}

/// How many live `confirm` tasks the cases draw from.
const SLOTS: usize = 3;

/// Starts a `confirm` task (its first question answered before the task exists) and waits
/// until it asks for its note; returns it and the key of the first question.
async fn new_slot(
    peer: &mut Peer,
    fixture: &Fixture,
    known: &mut BTreeSet<String>,
    n: usize,
) -> (Slot, String) {
    let first = peer
        .request(Message::Json(json!({ "jsonrpc": "2.0", "id": 10, "method": "tools/call",
            "params": { "name": "confirm", "arguments": { "name": format!("f{n}") }, "_meta": meta(TASKS) } })))
        .await;
    let first_key = first["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let created = peer
        .request(Message::Json(
            json!({ "jsonrpc": "2.0", "id": 20, "method": "tools/call",
            "params": { "name": "confirm", "arguments": { "name": format!("f{n}") },
                "inputResponses": { first_key.clone(): { "action": "accept", "content": { "ok": true } } },
                "requestState": first["result"]["requestState"],
                "_meta": meta(TASKS) } }),
        ))
        .await;
    let task = created["result"]["taskId"].as_str().unwrap().to_owned();
    known.insert(task.clone());
    let started = Instant::now();
    let key = loop {
        let snapshot = fixture.store.get(&task).await.unwrap().unwrap();
        if let Some(key) = snapshot.input_requests.keys().next() {
            break key.clone();
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "confirm task {task} asked for no note within 5 s: {snapshot:?}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    (Slot { task, key }, first_key)
}

/// Creates tasks to draw ids and input keys from: `confirm` tasks waiting for their note,
/// and a finished `search` task.
async fn seed(peer: &mut Peer, fixture: &Fixture, known: &mut BTreeSet<String>) -> Pools {
    let tools = peer
        .request(Message::Json(json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": { "_meta": meta(PLAIN) } })))
        .await;
    let tools: Vec<(String, Value)> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_owned(),
                t["inputSchema"].clone(),
            )
        })
        .collect();
    let mut task_ids = Vec::new();
    let mut input_keys = Vec::new();
    let mut slots = Vec::new();
    for n in 0..SLOTS {
        let (slot, first_key) = new_slot(peer, fixture, known, n).await;
        task_ids.push(slot.task.clone());
        input_keys.push(first_key);
        input_keys.push(slot.key.clone());
        slots.push(slot);
    }
    let search = peer
        .request(Message::Json(json!({ "jsonrpc": "2.0", "id": 30, "method": "tools/call",
            "params": { "name": "search", "arguments": { "query": "q", "filters": [] }, "_meta": meta(TASKS) } })))
        .await;
    let search = search["result"]["taskId"].as_str().unwrap().to_owned();
    known.insert(search.clone());
    task_ids.push(search);
    Pools {
        tools,
        task_ids,
        input_keys,
        live: Live(Arc::new(Mutex::new(slots))),
    }
}

/// Waits (at most 5 s) until no task is about to change by itself; checks that the tasks the
/// test knows of are every task in the store; then replaces each live slot whose task ended
/// with a new `confirm` task.
async fn settle_and_refill(
    peer: &mut Peer,
    fixture: &Fixture,
    known: &mut BTreeSet<String>,
    live: &Live,
) -> Result<(), String> {
    let started = Instant::now();
    let tasks = loop {
        let tasks = fixture.tasks(known).await;
        if settled(&tasks) {
            break tasks;
        }
        if started.elapsed() > Duration::from_secs(5) {
            return Err(format!("tasks still changing after 5 s: {tasks:?}"));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    if known.len() != fixture.store.len() {
        return Err(format!(
            "the store holds {} tasks, the answers named {}",
            fixture.store.len(),
            known.len()
        ));
    }
    let slots = live.0.lock().unwrap().clone();
    for (n, slot) in slots.into_iter().enumerate() {
        let waiting = tasks[&slot.task].0.as_ref().is_some_and(|task| {
            task.status == TaskStatus::InputRequired && task.input_requests.contains_key(&slot.key)
        });
        if !waiting {
            let (slot, _) = new_slot(peer, fixture, known, n).await;
            live.0.lock().unwrap()[n] = slot;
        }
    }
    Ok(())
}

/// Runs `cases` fuzz cases against one transport; returns how many ran.
fn fuzz(transport: &str, cases: u32, seconds: Option<u64>) -> u64 {
    count_panics();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let fixture = Fixture::new();
    let mut peer = runtime.block_on(async {
        match transport {
            "http" => Peer::Http(Http::start(fixture.server()).await),
            _ => Peer::stdio(fixture.server()),
        }
    });
    let mut known = BTreeSet::new();
    let pools = runtime.block_on(seed(&mut peer, &fixture, &mut known));
    let peer = RefCell::new(peer);
    let known = RefCell::new(known);
    let outcomes = RefCell::new(std::collections::BTreeMap::<String, u64>::new());
    let strategy = fuzz_cases(&pools);
    let panics_before = PANICS.load(Ordering::SeqCst);
    let deadline = seconds.map(|s| Instant::now() + Duration::from_secs(s));
    let mut total = 0_u64;
    loop {
        let mut runner = TestRunner::new(Config {
            cases,
            failure_persistence: None,
            max_shrink_iters: 200,
            // A failing case may wait out its bounds (a task that never settles: 5 s) on
            // every shrink step: the shrinking stops after 30 s.
            max_shrink_time: 30_000,
            ..Config::default()
        });
        let result = runner.run(&strategy, |case| {
            let mut peer = peer.borrow_mut();
            let mut known = known.borrow_mut();
            let outcome: Result<(), String> = runtime.block_on(async {
                // Every case starts with the tasks settled (the previous one ended so).
                let tasks_before = fixture.tasks(&known).await;
                let before = fixture.counts();
                let answer = peer.send(&case).await?;
                let expect = if transport == "http" {
                    &case.http
                } else {
                    &case.stdio
                };
                let code = match &answer {
                    Some(answer) => check_answer(&case.message, &answer.value)?,
                    None => None,
                };
                check_expect(expect, answer.as_ref(), code)?;
                let outcome = match (&answer, code) {
                    (None, _) => "no answer (notification)".to_owned(),
                    (Some(answer), None) => format!(
                        "result {}",
                        answer.value["result"]["resultType"].as_str().unwrap_or("-")
                    ),
                    (Some(_), Some(code)) => format!("error {code}"),
                };
                *outcomes.borrow_mut().entry(outcome).or_default() += 1;
                if let Some(id) = answer
                    .as_ref()
                    .and_then(|answer| answer.value["result"]["taskId"].as_str())
                {
                    known.insert(id.to_owned());
                }
                // A refused request's effects are counted once the server is quiet.
                let refused = code.or(answer.is_none().then_some(-32600));
                if let Some(code) = refused {
                    let (after, tasks_after) = quiet(&fixture, &known).await;
                    check_effects(refused, before, after)?;
                    let changed = changed(&tasks_before, &tasks_after);
                    if !changed.is_empty() {
                        return Err(format!(
                            "a request answered {code} changed tasks:\n{}",
                            changed.join("\n")
                        ));
                    }
                }
                peer.alive().await?;
                if PANICS.load(Ordering::SeqCst) != panics_before {
                    return Err("the server panicked".to_owned());
                }
                settle_and_refill(&mut peer, &fixture, &mut known, &pools.live).await
            });
            outcome.map_err(|e| TestCaseError::fail(format!("{transport}: {e}")))
        });
        if let Err(error) = result {
            panic!("{error}");
        }
        eprintln!("fuzz {transport}: answers so far {:?}", outcomes.borrow());
        total += u64::from(cases);
        match deadline {
            Some(deadline) if Instant::now() < deadline => continue,
            _ => break,
        }
    }
    total
}

/// Cases per batch: `MCP_TASKS_FUZZ_CASES`, default 2,500.
fn case_count() -> u32 {
    std::env::var("MCP_TASKS_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2500)
}

fn long_mode() -> Option<u64> {
    std::env::var("MCP_TASKS_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
}

#[test]
fn fuzz_http() {
    let started = Instant::now();
    let cases = fuzz("http", case_count(), long_mode());
    eprintln!(
        "fuzz http: {cases} cases, no failure, in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn fuzz_stdio() {
    let started = Instant::now();
    let cases = fuzz("stdio", case_count(), long_mode());
    eprintln!(
        "fuzz stdio: {cases} cases, no failure, in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn the_properties_catch_what_they_claim() {
    let message = Message::Json(json!({ "jsonrpc": "2.0", "id": 5, "method": "tasks/get" }));
    assert!(
        check_answer(
            &message,
            &json!({ "jsonrpc": "2.0", "id": 5, "result": {} })
        )
        .is_ok()
    );
    assert!(
        check_answer(
            &message,
            &json!({ "jsonrpc": "2.0", "id": 6, "result": {} })
        )
        .is_err()
    );
    assert!(
        check_answer(
            &message,
            &json!({ "jsonrpc": "2.0", "id": 5, "error": { "code": 1, "message": "x" } })
        )
        .is_err()
    );
    assert!(check_answer(&message, &json!({ "jsonrpc": "2.0", "id": 5, "result": {}, "error": { "code": -32602, "message": "x" } })).is_err());
    assert!(check_effects(Some(-32602), (1, 1), (2, 1)).is_err());
    assert!(check_effects(Some(-32602), (1, 1), (1, 2)).is_err());
    assert!(check_effects(None, (1, 1), (2, 2)).is_ok());
    let ok = |value: Value, status| Answer {
        value,
        status: Some(status),
    };
    let result = ok(
        json!({ "jsonrpc": "2.0", "id": 5, "result": { "t": "7 a" } }),
        200,
    );
    let refused = ok(
        json!({ "jsonrpc": "2.0", "id": 5, "error": { "code": -32020, "message": "x" } }),
        400,
    );
    let success = Expect::Success("7 a".into());
    assert!(check_expect(&success, Some(&result), None).is_ok());
    assert!(check_expect(&success, Some(&refused), Some(-32020)).is_err());
    assert!(check_expect(&Expect::Success("8 b".into()), Some(&result), None).is_err());
    assert!(check_expect(&success, None, None).is_err());
    assert!(check_expect(&Expect::Refused(HEADER_CODES), Some(&refused), Some(-32020)).is_ok());
    assert!(check_expect(&Expect::Refused(HEADER_CODES), Some(&result), None).is_err());
    let refused_200 = ok(refused.value.clone(), 200);
    assert!(
        check_expect(
            &Expect::Refused(HEADER_CODES),
            Some(&refused_200),
            Some(-32020)
        )
        .is_err()
    );
    assert!(
        check_expect(
            &Expect::Refused(ENVELOPE_CODES),
            Some(&refused),
            Some(-32020)
        )
        .is_err()
    );
    assert!(check_expect(&Expect::Nothing, None, None).is_ok());
    assert!(check_expect(&Expect::Nothing, Some(&result), None).is_err());
    assert!(check_expect(&Expect::Any, None, None).is_err());
    assert_eq!(base64("scalars"), "=?base64?c2NhbGFycw==?=");
    assert_eq!(base64("ab"), "=?base64?YWI=?=");
}
