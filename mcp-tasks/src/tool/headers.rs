//! `x-mcp-header` (SEP-2243): the arguments a client mirrors into `Mcp-Param-{Name}` HTTP
//! headers, so that a load balancer or gateway can route a `tools/call` without reading its
//! body.
//!
//! A tool declares one by annotating a property of its `inputSchema`; `#[task_tool]` does it
//! for `#[arg(header = "Region")]`. When a [`Toolkit`](crate::Toolkit) registers a tool it
//! holds the definition to the rules a client applies before it uses one (a client drops a
//! tool whose annotations break them), and refuses it with a
//! [`DefinitionError`] naming the property otherwise:
//!
//! 1. an annotation sits on a property reached from the root through `properties` alone (not
//!    on the root, not inside `$defs`, `items`, `anyOf`, ...);
//! 2. its value is a non-empty string of HTTP token characters (RFC 9110 `tchar`);
//! 3. no two annotations of one tool name the same header, without regard to case;
//! 4. the property's `type` is `"string"`, `"integer"` or `"boolean"`: not `number`, not a
//!    list of types, not missing.
//!
//! The server side of the header is rmcp's Streamable HTTP transport, at the seam where it
//! checks `Mcp-Method` and `Mcp-Name`: for a `tools/call` it reads the tool's schema through
//! `ServerHandler::get_tool` and answers a missing header, one that differs from the argument
//! (after decoding `=?base64?..?=`), or one with characters a header value may not hold with
//! HTTP 400 and `-32020` naming the header.

// For maintainers: docs/protocol.md C35 (the annotation rules a client applies), C34 (names
// compare without case), C32-C33 (what the server refuses).

use serde_json::Value;

use super::DefinitionError;

/// The annotation's key in a property schema.
pub const ANNOTATION: &str = "x-mcp-header";

/// The prefix of the header an annotation names: `Mcp-Param-Region` for `"Region"`.
pub const PREFIX: &str = "Mcp-Param-";

/// Whether `name` can follow [`PREFIX`]: a non-empty HTTP token (RFC 9110 §5.6.2 `tchar`s).
#[must_use]
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c))
}

/// Checks the `x-mcp-header` annotations of an input schema against the rules of the
/// [module docs](self).
///
/// # Errors
/// The first rule broken, naming the property (its path, dotted) and the header.
pub(crate) fn check(input_schema: &serde_json::Map<String, Value>) -> Result<(), DefinitionError> {
    if input_schema.contains_key(ANNOTATION) {
        return Err(DefinitionError::HeaderOutsideProperties {
            location: "the schema root".to_owned(),
        });
    }
    walk_properties(input_schema, &mut Vec::new(), &mut Vec::new())?;
    off_chain(input_schema, "", true)
}

/// The annotations along `properties` chains, checked one by one.
fn walk_properties(
    schema: &serde_json::Map<String, Value>,
    path: &mut Vec<String>,
    seen: &mut Vec<(String, String)>,
) -> Result<(), DefinitionError> {
    let Some(Value::Object(properties)) = schema.get("properties") else {
        return Ok(());
    };
    for (name, property) in properties {
        let Value::Object(property) = property else {
            continue;
        };
        path.push(name.clone());
        let dotted = path.join(".");
        if let Some(annotation) = property.get(ANNOTATION) {
            let Some(header) = annotation.as_str().filter(|h| is_valid_name(h)) else {
                return Err(DefinitionError::InvalidHeaderName {
                    property: dotted,
                    header: annotation.to_string(),
                });
            };
            let header = header.to_owned();
            let folded = header.to_ascii_lowercase();
            if let Some((first, _)) = seen.iter().find(|(_, h)| *h == folded) {
                return Err(DefinitionError::DuplicateHeader {
                    property: dotted,
                    other: first.clone(),
                    header,
                });
            }
            match property.get("type") {
                Some(Value::String(t))
                    if matches!(t.as_str(), "string" | "integer" | "boolean") => {}
                found => {
                    return Err(DefinitionError::HeaderNotPrimitive {
                        property: dotted,
                        header,
                        found: found.map_or_else(|| "no `type`".to_owned(), Value::to_string),
                    });
                }
            }
            seen.push((dotted, folded));
        }
        walk_properties(property, path, seen)?;
        path.pop();
    }
    Ok(())
}

/// An annotation anywhere but on a `properties` chain from the root.
fn off_chain(
    schema: &serde_json::Map<String, Value>,
    at: &str,
    on_chain: bool,
) -> Result<(), DefinitionError> {
    for (key, value) in schema {
        let here = if at.is_empty() {
            key.clone()
        } else {
            format!("{at}/{key}")
        };
        match key.as_str() {
            ANNOTATION if !on_chain => {
                return Err(DefinitionError::HeaderOutsideProperties {
                    location: at.to_owned(),
                });
            }
            // Instance data and property names, not schemas.
            "default" | "const" | "enum" | "examples" | "dependentRequired" => {}
            "properties" => map_off_chain(value, &here, on_chain)?,
            "$defs" | "definitions" | "dependencies" | "dependentSchemas" | "patternProperties" => {
                map_off_chain(value, &here, false)?;
            }
            _ => subschema_off_chain(value, &here)?,
        }
    }
    Ok(())
}

fn map_off_chain(map: &Value, at: &str, on_chain: bool) -> Result<(), DefinitionError> {
    if let Value::Object(map) = map {
        for (name, schema) in map {
            if let Value::Object(schema) = schema {
                off_chain(schema, &format!("{at}/{name}"), on_chain)?;
            }
        }
    }
    Ok(())
}

fn subschema_off_chain(value: &Value, at: &str) -> Result<(), DefinitionError> {
    match value {
        Value::Object(schema) => off_chain(schema, at, false),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, item)| subschema_off_chain(item, &format!("{at}/{i}"))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn checked(schema: Value) -> Result<(), DefinitionError> {
        check(schema.as_object().expect("an object"))
    }

    fn with(properties: Value) -> Value {
        json!({ "type": "object", "properties": properties })
    }

    #[test]
    fn valid_annotations() {
        assert_eq!(
            checked(with(json!({
                "region": { "type": "string", "x-mcp-header": "Region" },
                "count": { "type": "integer", "x-mcp-header": "Count" },
                "flag": { "type": "boolean", "x-mcp-header": "Flag" },
                "plain": { "type": "number" },
                "nested": { "type": "object", "properties": {
                    "id": { "type": "string", "x-mcp-header": "Id" }
                }},
                "choice": { "type": "string", "enum": ["x-mcp-header"] },
            }))),
            Ok(())
        );
    }

    #[test]
    fn names_must_be_tokens() {
        for bad in [
            json!(""),
            json!("Bad Name"),
            json!("Région"),
            json!("a:b"),
            json!(3),
        ] {
            let error = checked(with(
                json!({ "r": { "type": "string", "x-mcp-header": bad } }),
            ))
            .expect_err("refused");
            assert_eq!(
                error,
                DefinitionError::InvalidHeaderName {
                    property: "r".into(),
                    header: bad.to_string()
                }
            );
        }
    }

    #[test]
    fn duplicates_compare_without_case() {
        let error = checked(with(json!({
            "a": { "type": "string", "x-mcp-header": "Region" },
            "b": { "type": "string", "x-mcp-header": "REGION" },
        })))
        .expect_err("refused");
        assert_eq!(
            error,
            DefinitionError::DuplicateHeader {
                property: "b".into(),
                other: "a".into(),
                header: "REGION".into()
            }
        );
        assert_eq!(
            error.to_string(),
            "the properties `a` and `b` are both sent as the header `Mcp-Param-REGION` (header \
             names compare without case)"
        );
    }

    #[test]
    fn only_primitive_non_number_types() {
        for (schema, found) in [
            (json!({ "type": "number" }), "\"number\""),
            (json!({ "type": "array" }), "\"array\""),
            (
                json!({ "type": ["string", "null"] }),
                "[\"string\",\"null\"]",
            ),
            (json!({ "$ref": "#/$defs/R" }), "no `type`"),
        ] {
            let mut schema = schema;
            schema["x-mcp-header"] = json!("R");
            let error = checked(with(json!({ "r": schema }))).expect_err("refused");
            assert_eq!(
                error,
                DefinitionError::HeaderNotPrimitive {
                    property: "r".into(),
                    header: "R".into(),
                    found: found.into()
                }
            );
        }
    }

    #[test]
    fn only_on_properties_chains() {
        let root = json!({ "type": "object", "x-mcp-header": "R" });
        assert_eq!(
            checked(root),
            Err(DefinitionError::HeaderOutsideProperties {
                location: "the schema root".into()
            })
        );
        let items = with(json!({
            "list": { "type": "array", "items": { "type": "string", "x-mcp-header": "Item" } }
        }));
        assert_eq!(
            checked(items),
            Err(DefinitionError::HeaderOutsideProperties {
                location: "properties/list/items".into()
            })
        );
        let defs = json!({
            "type": "object",
            "$defs": { "R": { "type": "string", "x-mcp-header": "R" } }
        });
        assert_eq!(
            checked(defs),
            Err(DefinitionError::HeaderOutsideProperties {
                location: "$defs/R".into()
            })
        );
    }
}
