//! The [`Run`] itself: what passes from stage to stage. Each stage is a file of its own that
//! adds its methods (`open.rs`, `params.rs`, `record.rs`, `derive.rs`, `patch.rs`); this one
//! imports none of them, so that they import it without a cycle.

use crate::settings::{plan::Plan, Settings};
use crate::sources::{Loaded, Source};

/// One run of the settings' pipeline, between its stages: what the sources gave and the plan.
/// The parameters, the recorder and the trace pass from stage to stage as values.
pub struct Run<'s> {
    pub settings: &'s Settings,
    pub loaded: Loaded,
    pub plan: Plan,
    /// Until the parameters are made (`Run::params`).
    pub(super) source: Option<Source>,
}
