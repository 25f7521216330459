//! `attn-trace schema`: the JSON Schema (draft 2020-12) of the trace document, kept beside
//! this file as `schema.json` so that it reads as JSON and is reviewed as JSON.
//!
//! The schema is versioned with the document: its `$id` ends in `schema_version:N`, its
//! `version` field is the same number, and it requires `"schema_version": N` (N is
//! [`SCHEMA_VERSION`]). A change of a
//! step name or field changes all three and gets a CHANGELOG.md entry. The `jsonl` format
//! is the same steps, one per line, after a first line with `schema_version`, `input` and
//! `config`.

use clap::Parser;
use std::io::{self, Write};

/// The JSON document's `schema_version`: bumped when a step is renamed or a field changes
/// meaning (CHANGELOG.md records each version).
pub const SCHEMA_VERSION: u32 = 2;

/// The schema's text, exactly as `attn-trace schema` prints it.
pub const SCHEMA: &str = include_str!("schema.json");

/// Print the JSON Schema (draft 2020-12) of the trace document that --format json writes.
#[derive(Debug, Clone, Parser)]
#[command(name = "attn-trace schema", version, max_term_width = 100)]
pub struct SchemaCli {}

pub fn write(w: &mut dyn Write) -> io::Result<()> {
    w.write_all(SCHEMA.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_is_json_and_tied_to_schema_version() {
        let s: serde_json::Value = serde_json::from_str(SCHEMA).unwrap();
        let v = SCHEMA_VERSION;
        assert_eq!(s["version"], v);
        assert_eq!(s["properties"]["schema_version"]["const"], v);
        assert!(s["$id"].as_str().unwrap().ends_with(&format!("schema_version:{v}")));
        assert_eq!(s["$schema"], "https://json-schema.org/draft/2020-12/schema");
    }

    /// The schema's list of step names is the catalogue's, in the same order.
    #[test]
    fn schema_names_are_the_catalogue() {
        let s: serde_json::Value = serde_json::from_str(SCHEMA).unwrap();
        let mut found = None;
        find_name_enum(&s, &mut found);
        let names: Vec<String> =
            found.expect("schema.json has a step-name enum").iter().map(|v| v.as_str().unwrap().to_string()).collect();
        let mut want: Vec<String> = crate::trace::steps::CATALOGUE.iter().map(|d| d.name.to_string()).collect();
        let mut got = names.clone();
        want.sort();
        got.sort();
        assert_eq!(got, want);
    }

    fn find_name_enum<'a>(v: &'a serde_json::Value, out: &mut Option<&'a Vec<serde_json::Value>>) {
        match v {
            serde_json::Value::Object(m) => {
                if let (Some(serde_json::Value::Array(e)), true) = (m.get("enum"), m.values().len() > 0) {
                    if e.iter().any(|x| x == "attn.weights") {
                        *out = Some(e);
                    }
                }
                m.values().for_each(|x| find_name_enum(x, out));
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| find_name_enum(x, out)),
            _ => {}
        }
    }
}
