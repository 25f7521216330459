//! `--chat`, `--system` and `--chat-template`: the sentence as one user turn of a language
//! model's chat template. Clap ties `--system` and `--chat-template` to `--chat`; what can be
//! refused from the flags alone is refused here (the toy model has no template, and
//! `--induction` replaces the sentence); an encoder and a model without a template are
//! refused by the sources, which read the model.

use crate::cli::Cli;
use crate::error::usage;
use anyhow::Result;
use std::path::PathBuf;

/// `--chat`: the sentence is the user's turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Chat {
    /// `--system TEXT`: a system turn first (an empty text is a turn too).
    pub system: Option<String>,
    /// `--chat-template FILE`: this template instead of the model's own.
    pub template: Option<PathBuf>,
}

/// `--chat` and its companions, checked against the other flags.
pub fn options(cli: &Cli) -> Result<Option<Chat>> {
    if !cli.chat {
        return Ok(None);
    }
    if cli.model.is_none() {
        return Err(usage(
            "--chat",
            "it renders a language model's chat template; the toy model has none",
            "pass --model with a language model, or drop --chat",
        ));
    }
    for (flag, given, why) in [
        ("--induction", cli.induction.is_some(), "it replaces the sentence by random tokens"),
        ("--patch", cli.patch.is_some(), "its corrupted sentence would not go through the chat template"),
    ] {
        if given {
            return Err(usage(format!("--chat with {flag}"), why, format!("drop --chat or {flag}")));
        }
    }
    Ok(Some(Chat { system: cli.system.clone(), template: cli.chat_template.clone() }))
}
