//! The Trace: the ordered list of named tensors that one run computed.
//!
//! The trace is the only thing that sits between the model and the renderers: model code
//! records into it (through a [`Recorder`]) and never prints; renderers read it and never do
//! tensor math. The step catalogue ([`steps`]) and the JSON Schema ([`schema`]) live here
//! too, since they describe this data. Step ids
//! are API (see docs/TRACE.md and the step table of docs/OUTPUT.md): `layers.0.attn.weights`,
//! with the layer and the in-layer name also kept apart so nobody parses strings.

pub mod aliases;
pub mod attribute;
pub mod generate;
mod ids;
pub mod label;
pub mod record;
mod recorded;
pub mod rows;
pub mod schema;
mod selection;
mod split;
mod step;
pub mod steps;
mod tokens;

pub use record::{Recorder, SinkFn};
pub use recorded::Trace;
pub use selection::Selection;
pub use split::{split_id, stack_of};
pub(crate) use step::narrow_heads;
pub use step::{Dim, Step, Values};
pub use tokens::{Chat, KeyTokens, Prediction, Tracked};
