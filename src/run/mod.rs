//! The run's wing: what a run does between its settings and its output, stage by stage (issue
//! 49; the pipelines beside lib.rs move in here).

pub mod set;
