//! The model configuration: every setting that shapes the numbers.
//!
//! It is written into the JSON document's `config` object, so its field names are API, and
//! it is what the PyTorch oracle (fixtures/oracle) reads back to recompute a trace.

pub mod flops;
mod generate;
mod interventions;
mod kinds;
mod model;
mod moe;
mod parts;
mod run;
mod seq2seq;
pub mod tiles;
pub use flops::{forward_flops, Flops};
pub use generate::{Generate, Strategy};
pub use interventions::{AblateMode, Interventions, Knockout, SetStep, Steer};
pub use kinds::{Activation, InitConfig, Norm, Positions, RealModel, TensorTypes};
pub use model::{ModelConfig, Parts, Seq2Seq};
pub use moe::Experts;
pub use parts::{Arithmetic, LmHead, LongRope, Padding, Rope};
pub use run::RunConfig;
pub use seq2seq::RelBias;
