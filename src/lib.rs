//! attn-trace traces a transformer step by step and records every intermediate tensor, named
//! and labelled by token: the token ids, token and position embeddings, per-head queries,
//! keys and values, raw and scaled scores, softmax weights, context vectors, the
//! concatenated heads, the output projection, Add & Norm, the feed-forward network and the
//! second Add & Norm, for every layer, then the output.
//!
//! The pipeline, one stage per module, data flowing one way (docs/ARCHITECTURE.md):
//!
//! [`cli`] (what was typed) → [`settings`] (checked, plain data) → [`sources`] (the input
//! text, the model's configuration and its parameters) → [`model`] (the forward pass,
//! recorded into a [`trace::Trace`]) → [`views`] (everything derived from the trace) →
//! [`render`] (one file per format) and [`export`] (trace files) → [`output`] (the only
//! place that writes). [`config`] (the model description) and [`trace`] (the data, the step
//! catalogue, the schema) are the vocabulary every stage shares. [`diff`] is a sub-command
//! built on the same trace and export modules. `run` is a run's home: one staged
//! `Run` (open → params → record → derive → finish) that every entry calls. [`command`]
//! is the whole command as a function of its arguments, shared by the binary and the Python
//! wheel.

pub mod analysis;
pub mod cli;
pub mod command;
pub mod compare;
pub mod config;
pub mod diff;
pub mod error;
pub mod export;
pub mod hook;
pub mod model;
pub mod output;
pub mod params;
pub mod render;
mod run;
mod serve;
pub mod settings;
pub mod sources;
pub mod strict_json;
pub mod torch_rng;
pub mod trace;
pub mod views;

// The library's pipeline, at the paths it always had (the Python crate, tests and benchmarks).
pub use command::run;
pub use run::{compute, finish, prepare, trace, Finished, Traced};
