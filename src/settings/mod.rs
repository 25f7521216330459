//! Checked settings: what the command line asks for, validated, as plain data.
//!
//! [`Settings::from_cli`] is a pure function of the typed flags ([`Cli`](crate::cli::Cli)) and
//! the environment ([`Env`](crate::cli::Env)): it reads no file, tokenizes nothing, allocates
//! no tensor and prints nothing, so every flag-only mistake is refused before anything is opened.
//! What can only be checked against the model (a layer number, a focus word, a step id's layer)
//! is checked by [`plan::Plan::new`] once the sources stage knows the model's sizes and tokens
//! (pure too).

pub mod analysis;
mod answer;
pub mod attribute;
pub mod chat;
mod check;
mod format;
pub mod generate;
pub mod limits;
mod model;
mod numbers;
pub mod outputs;
pub mod plan;
pub mod recipe;
mod reduce;
mod run;
mod saves;
pub mod shape;
pub mod stacks;
pub mod views;

pub use analysis::Analysis;
pub use chat::Chat;
pub use check::use_color;
pub use format::Format;
pub(crate) use numbers::{index_list, nonzero};
pub use recipe::{Given, Recipe, Weights};
pub use run::{ModelChoice, Output, Select, Settings, Text, Toy, ToyTokenizer, VocabOrder};
pub use shape::Shape;
