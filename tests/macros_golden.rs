//! Golden schemas: the `inputSchema` and `outputSchema` `#[task_tool]` generates for
//! representative tools equal the reviewed files in `tests/golden/`, each is valid JSON Schema
//! 2020-12 (checked against the draft's metaschema), and each accepts and rejects the instances
//! it should. Regenerate with `GOLDEN=overwrite cargo test --test macros_golden` and review
//! the diff.

use std::collections::BTreeMap;

use mcp_tasks::{TaskTool, task_tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Scalars of each JSON type.
#[task_tool]
async fn scalars(name: String, count: u32, ratio: f64, enabled: bool, delta: i64) -> u64 {
    let _ = (name, ratio, enabled, delta);
    u64::from(count)
}

/// Optional, defaulted, described and renamed parameters.
#[task_tool]
async fn options(
    #[arg(description = "What to look for.")] query: String,
    limit: Option<u32>,
    #[arg(default, description = "The page, from zero.")] page: u32,
    #[arg(rename = "maxResults")] max_results: Option<u16>,
) -> Vec<String> {
    let _ = (query, limit, page, max_results);
    Vec::new()
}

/// How urgent.
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Priority {
    Low,
    High,
}

/// What to match.
#[derive(Serialize, Deserialize, JsonSchema)]
struct Filter {
    /// Tags that must all be present.
    tags: Vec<String>,
    /// At least this urgent.
    priority: Option<Priority>,
}

/// One match.
#[derive(Serialize, Deserialize, JsonSchema)]
struct Hit {
    id: u64,
    priority: Priority,
}

/// What `nested` found.
#[derive(Serialize, Deserialize, JsonSchema)]
struct Report {
    /// The matches, best first.
    hits: Vec<Hit>,
    /// Counts per tag.
    counts: BTreeMap<String, u32>,
}

/// Enums, nested structs and lists.
#[task_tool]
async fn nested(filter: Filter, ids: Vec<u64>, priority: Priority) -> Result<Report, String> {
    let _ = (filter, ids, priority);
    Err("unused".into())
}

/// The whole argument object, documented field by field.
#[derive(Deserialize, JsonSchema)]
struct SearchInput {
    /// The search text.
    query: String,
    /// How many results to return.
    #[serde(default = "ten")]
    limit: u32,
    /// Skip results already seen.
    #[serde(default, rename = "skipSeen")]
    skip_seen: bool,
    /// Narrow the search.
    filter: Option<Filter>,
}

fn ten() -> u32 {
    10
}

/// A search with a struct argument.
#[task_tool]
async fn search(#[args] input: SearchInput) -> Priority {
    let _ = (input.query, input.limit, input.skip_seen, input.filter);
    Priority::Low
}

/// No arguments, no output.
#[task_tool]
async fn ping() {}

fn schemas(tool: &impl TaskTool) -> Value {
    let definition = tool.definition();
    let tool = definition.tool();
    json!({
        "inputSchema": Value::Object((*tool.input_schema).clone()),
        "outputSchema": tool.output_schema.as_ref().map(|s| Value::Object((**s).clone())),
    })
}

/// Compares with (or, with `GOLDEN=overwrite`, writes) `tests/golden/<name>.json`, checks both
/// schemas against the 2020-12 metaschema, and returns them.
fn golden(name: &str, tool: &impl TaskTool) -> Value {
    let actual = schemas(tool);
    let path = format!("{}/tests/golden/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let pretty = serde_json::to_string_pretty(&actual).unwrap() + "\n";
    if std::env::var("GOLDEN").as_deref() == Ok("overwrite") {
        std::fs::write(&path, &pretty).unwrap();
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}; run with GOLDEN=overwrite and review"));
    assert_eq!(
        pretty, expected,
        "{name}: the generated schemas differ from {path}"
    );
    for key in ["inputSchema", "outputSchema"] {
        let schema = &actual[key];
        if schema.is_null() {
            continue;
        }
        assert_eq!(
            schema["$schema"],
            json!("https://json-schema.org/draft/2020-12/schema"),
            "{name}.{key}"
        );
        assert_eq!(
            schema["type"],
            json!("object"),
            "{name}.{key}: the root must be an object schema"
        );
        if let Err(error) = jsonschema::draft202012::meta::validate(schema) {
            panic!("{name}.{key} is not valid JSON Schema 2020-12: {error}");
        }
    }
    actual
}

fn check(schema: &Value, valid: &[Value], invalid: &[Value]) {
    let validator = jsonschema::draft202012::new(schema).expect("the schema compiles");
    for instance in valid {
        assert!(
            validator.is_valid(instance),
            "should accept {instance}: {schema}"
        );
    }
    for instance in invalid {
        assert!(
            !validator.is_valid(instance),
            "should reject {instance}: {schema}"
        );
    }
}

#[test]
fn scalars_schema() {
    let s = golden("scalars", &scalars {});
    check(
        &s["inputSchema"],
        &[json!({ "name": "a", "count": 1, "ratio": 0.5, "enabled": true, "delta": -3 })],
        &[
            json!({ "name": "a", "count": -1, "ratio": 0.5, "enabled": true, "delta": 0 }),
            json!({ "name": "a", "count": 1, "ratio": 0.5, "enabled": "yes", "delta": 0 }),
            json!({ "count": 1, "ratio": 0.5, "enabled": true, "delta": 0 }),
        ],
    );
    check(
        &s["outputSchema"],
        &[json!({ "result": 3 })],
        &[json!(3), json!({ "result": "3" })],
    );
}

#[test]
fn options_schema() {
    let s = golden("options", &options {});
    assert_eq!(s["inputSchema"]["required"], json!(["query"]));
    assert_eq!(s["inputSchema"]["properties"]["page"]["default"], json!(0));
    check(
        &s["inputSchema"],
        &[
            json!({ "query": "q" }),
            json!({ "query": "q", "limit": null, "maxResults": 5, "page": 2 }),
        ],
        &[json!({}), json!({ "query": "q", "maxResults": 70000 })],
    );
    check(
        &s["outputSchema"],
        &[json!({ "result": ["a"] })],
        &[json!({ "result": [1] })],
    );
}

#[test]
fn nested_schema() {
    let s = golden("nested", &nested {});
    check(
        &s["inputSchema"],
        &[
            json!({ "filter": { "tags": ["x"], "priority": "high" }, "ids": [1, 2], "priority": "low" }),
        ],
        &[
            json!({ "filter": { "tags": ["x"] }, "ids": [1], "priority": "urgent" }),
            json!({ "filter": { "priority": "low" }, "ids": [], "priority": "low" }),
        ],
    );
    let report = Report {
        hits: vec![Hit {
            id: 1,
            priority: Priority::High,
        }],
        counts: BTreeMap::from([("x".to_owned(), 1)]),
    };
    check(
        &s["outputSchema"],
        &[serde_json::to_value(report).unwrap()],
        &[json!({ "hits": [{ "id": 1 }] })],
    );
}

#[test]
fn struct_argument_schema() {
    let s = golden("search", &search {});
    let input = &s["inputSchema"];
    assert_eq!(
        input["properties"]["query"]["description"],
        json!("The search text.")
    );
    assert_eq!(input["properties"]["limit"]["default"], json!(10));
    assert_eq!(input["required"], json!(["query"]));
    check(
        input,
        &[
            json!({ "query": "q" }),
            json!({ "query": "q", "skipSeen": true, "filter": { "tags": [] } }),
        ],
        &[
            json!({ "limit": 3 }),
            json!({ "query": "q", "skipSeen": "no" }),
        ],
    );
    check(
        &s["outputSchema"],
        &[json!({ "result": "low" })],
        &[json!({ "result": "medium" })],
    );
}

#[test]
fn no_arguments_no_output_schema() {
    let s = golden("ping", &ping {});
    assert_eq!(s["inputSchema"]["properties"], json!({}));
    assert!(s["outputSchema"].is_null());
    check(
        &s["inputSchema"],
        &[json!({}), json!({ "extra": 1 })],
        &[json!(1)],
    );
}
