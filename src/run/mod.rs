//! A run, in one place: every entry (the command line, a batch, the jsonl stream, `compare`,
//! `serve` and the Python API) goes through the stages of one [`Run`] (`staged.rs`):
//!
//! open (`open.rs`: the sources, the plan, the refusals that need no parameter) → params
//! (`params.rs`, with `--steer`'s measuring pass in `steer.rs`) → record (`record.rs`: one
//! pass, or a generation (`generate.rs`)) → derive (`derive.rs`: the trace named, the late
//! `--attribute` pass (`explain.rs`), the views, `--patch`'s sweep (`patch.rs`), the notes) →
//! finish (`finish.rs`: the files and `--check` (`check.rs`)). `entry.rs` calls the stages in
//! order for each entry; `command.rs` is the command line's (`stream.rs` for `--format jsonl`,
//! `batch.rs` for a batch, `arithmetic.rs` for the note that llama.cpp's arithmetic predicts
//! otherwise). `pass.rs` holds every call into the model's passes (with `patch.rs`'s sweep).
//! One noun per feature: the files are named by their flag's word.

mod arithmetic;
mod batch;
mod check;
mod command;
mod derive;
mod entry;
mod explain;
mod finish;
mod generate;
mod open;
mod params;
mod pass;
mod patch;
mod record;
mod set;
mod staged;
mod steer;
mod stream;

pub use command::command;
pub(crate) use entry::computed;
pub use entry::{compute, finish, trace, Traced};
pub use finish::Finished;
pub use open::prepare;
pub(crate) use pass::{hooks, lockstep, recorder};
