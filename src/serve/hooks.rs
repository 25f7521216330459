//! What the command hands the server: how a request's options become settings, and the
//! work that makes a comparison's page.

use crate::settings::Settings;
use anyhow::Result;

/// How a request's options become settings: `Err` is the command's one-line message.
pub type Parse = dyn Fn(&[String]) -> std::result::Result<Settings, String> + Send + Sync;

/// Work run on the model's thread, making an HTML page (`Hooks::compare`).
pub type Work = Box<dyn FnOnce() -> Result<Vec<u8>> + Send>;

/// How a request's options become a comparison against the server's reference model: `Err`
/// is the command's one-line message.
pub type Compare = dyn Fn(&[String]) -> std::result::Result<Work, String> + Send + Sync;

/// What the command hands over: the option parser, the error line of a failed run, and the
/// command line a request stands for (the server's own model flags added).
pub struct Hooks {
    pub parse: Box<Parse>,
    /// `--compare-with B`: a request's options as `attn-trace compare … --model A --model B
    /// --html`'s page; `None` when the server has no reference model.
    pub compare: Option<Box<Compare>>,
    /// The reference model's `--model` value, shown in "the command for this view".
    pub reference: Option<String>,
    pub error_line: fn(&anyhow::Error) -> String,
    /// The server's model flags, as typed after `serve` (shown in "the command for this view").
    pub model_args: Vec<String>,
}
