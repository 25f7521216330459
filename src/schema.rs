//! `attn-trace schema`: the JSON Schema (draft 2020-12) of the trace document, kept beside
//! this file as `schema.json` so that it reads as JSON and is reviewed as JSON.
//!
//! The schema is versioned with the document: its `$id` ends in `schema_version:1`, its
//! `version` field is the same number, and it requires `"schema_version": 1`. A change of a
//! step name or field changes all three and gets a CHANGELOG.md entry. The `jsonl` format
//! is the same steps, one per line, after a first line with `schema_version`, `input` and
//! `config`.

use clap::Parser;
use std::io::{self, Write};

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
        let v = crate::render::json::SCHEMA_VERSION;
        assert_eq!(s["version"], v);
        assert_eq!(s["properties"]["schema_version"]["const"], v);
        assert!(s["$id"].as_str().unwrap().ends_with(&format!("schema_version:{v}")));
        assert_eq!(s["$schema"], "https://json-schema.org/draft/2020-12/schema");
    }
}
