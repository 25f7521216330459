//! The analyses: what a run asks of the forward pass beyond recording it. Each is a set of
//! hooks ([`crate::hook::Hook`]) registered by step id on the pass's port, outside the model:
//! the model computes and names its steps, and knows none of them (as TransformerLens's
//! `run_with_hooks` and llama.cpp's adapters, which live outside the model's graph).
//!
//! One file or folder per analysis; adding one is docs/ARCHITECTURE.md's "Adding an
//! analysis".

pub mod ablate;
pub mod experts;
pub mod interventions;
pub mod knockout;
pub mod patch;
pub mod set;
pub mod steer;
