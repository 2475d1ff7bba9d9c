//! The default tool version's digest: FNV-1a over fields, JSON with sorted keys.

use std::hash::Hasher as _;

/// 64-bit FNV-1a (the `fnv` crate, which the macro's code digest uses too), each field
/// followed by its length so that fields cannot run together.
pub(super) struct Fnv1a(fnv::FnvHasher);

impl Fnv1a {
    pub(super) fn new() -> Self {
        Self(fnv::FnvHasher::default())
    }

    pub(super) fn field(&mut self, bytes: &[u8]) {
        self.0.write(bytes);
        self.0.write(&(bytes.len() as u64).to_le_bytes());
    }

    pub(super) fn finish(&self) -> u64 {
        self.0.finish()
    }
}

/// `value` as JSON with every object's keys sorted, whatever order the map keeps.
pub(super) fn canonical_json(value: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                canonical_json(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_json(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}
