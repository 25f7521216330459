//! Renderers: one file per output format. Each reads a [`Trace`] and writes bytes; none does
//! tensor math, and none depends on the terminal, so the same command gives the same bytes.

pub mod json;
pub mod summary;
pub mod table;

use crate::cli::Format;
use crate::settings::Output;
use crate::trace::Trace;
use std::io::Write;

pub fn render(trace: &Trace, out: &Output, w: &mut dyn Write) -> std::io::Result<()> {
    match out.format {
        Format::Table if out.summary => summary::write(trace, out.width, w),
        Format::Table => table::write(trace, out.precision, out.width, w),
        Format::Json => json::write(trace, w),
    }
}
