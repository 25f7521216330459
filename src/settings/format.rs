//! `--format` as the stages after settings see it: clap's [`cli::Format`] is what was typed,
//! converted once by `Settings::from_cli`, so that views, renderers and the output stage never
//! read the command line.

use crate::cli;

/// How stdout shows the trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One titled table per step and head, rows labelled by token.
    Table,
    /// One JSON document: schema_version, input, config, steps.
    Json,
    /// JSON Lines: a header line, then one step per line, written as each step is computed.
    Jsonl,
    /// Each head's attention weights as a coloured grid.
    Heatmap,
}

impl From<cli::Format> for Format {
    fn from(f: cli::Format) -> Self {
        match f {
            cli::Format::Table => Format::Table,
            cli::Format::Json => Format::Json,
            cli::Format::Jsonl => Format::Jsonl,
            cli::Format::Heatmap => Format::Heatmap,
        }
    }
}
