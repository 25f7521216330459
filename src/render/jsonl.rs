//! `--format jsonl`: JSON Lines. The first line is `{"schema_version", "input", "config"}`;
//! every further line is one step object, exactly as in the JSON document's `steps`
//! (render/json.rs writes both). The output stage streams these lines while the model runs
//! (`output::stream`); this file only formats them.

use super::json;
use crate::trace::{Step, Trace};
use std::io::{self, Write};

/// The first line: what was traced, without steps.
pub fn header(trace: &Trace) -> io::Result<String> {
    let input = json::input_object(trace);
    Ok(format!(
        "{{\"schema_version\": {}, \"input\": {}, \"config\": {}}}\n",
        crate::trace::schema::SCHEMA_VERSION,
        serde_json::to_string(&input)?,
        serde_json::to_string(&trace.config_json())?
    ))
}

/// An already computed trace as JSON Lines.
pub fn write(trace: &Trace, w: &mut dyn Write) -> io::Result<()> {
    w.write_all(header(trace)?.as_bytes())?;
    for step in &trace.steps {
        write_line(step, w)?;
    }
    Ok(())
}

/// One step as one line.
pub fn write_line(step: &Step, w: &mut dyn Write) -> io::Result<()> {
    json::write_step(step, w)?;
    w.write_all(b"\n")
}
