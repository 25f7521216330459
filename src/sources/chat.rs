//! `--chat`: the sentence as one user turn (after a `--system` turn) of the model's chat
//! template, rendered with the assistant's generation prompt as transformers'
//! `apply_chat_template(conversation, add_generation_prompt=True)` renders it
//! ([`chat_jinja`](super::chat_jinja)).
//!
//! The template is the model's own, where transformers (and llama.cpp) look for it:
//! - a folder's `chat_template.jinja`, which transformers (4.49 on) reads before anything in
//!   tokenizer_config.json, else tokenizer_config.json's `chat_template`: a string, or a
//!   list of `{name, template}` of which "default" is used, as transformers does without tools;
//! - a GGUF file's `tokenizer.chat_template` (llama.cpp's converter copies it there);
//! - or `--chat-template FILE` instead.
//!
//! The special tokens it sees are the tokenizer's: tokenizer_config.json's (then
//! special_tokens_map.json's) `bos_token`, `eos_token`…, or a GGUF's token ids. The caller
//! tokenizes the rendered text without the tokenizer's own special tokens
//! (`add_special_tokens=False`, as `apply_chat_template(tokenize=True)` does), so the only
//! BOS is the one the template writes.

use super::chat_jinja::{self, Failure};
use crate::error::usage;
use crate::settings::limits::human;
use crate::settings::Chat;
use anyhow::Result;
use candle_core::quantized::gguf_file::Content;
use std::path::Path;

/// The largest template read: real ones are a few KiB (tool-calling ones up to ~30 KiB); a
/// larger "template" is the wrong file, or an attempt to fill memory.
const MAX_TEMPLATE: usize = 1 << 20;

/// The most text a template is given (the messages and special tokens): four times the
/// longest context window a model has today, and a bound on the work a template may do with
/// it (its budget grows with it, `chat_jinja::budget`).
const MAX_INPUTS: usize = 1 << 20;

/// What a template may add to twice its inputs: its own text (at most [`MAX_TEMPLATE`]), once.
/// Twice allows a template that repeats a message; more is a template that makes text.
const MAX_ADDED: usize = 1 << 20;

/// The special tokens a template may use, as transformers' `special_tokens_map` names them.
const TOKENS: [&str; 7] = ["bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token"];

/// A chat template and the special tokens it is rendered with.
#[derive(Debug, Clone)]
pub struct Template {
    source: String,
    /// Where it came from, for messages: `tokenizer_config.json's chat_template`.
    whence: String,
    /// (name, text) of the tokenizer's special tokens; a token it lacks is left out.
    tokens: Vec<(&'static str, String)>,
}

impl Template {
    /// A template from its text, where it came from, and the special tokens (name, text).
    pub fn new(source: String, whence: String, tokens: Vec<(&'static str, String)>) -> Template {
        Template { source, whence, tokens }
    }

    /// Renders the conversation: a system turn if given, then `user`, then the generation
    /// prompt.
    pub fn render(&self, system: Option<&str>, user: &str) -> Result<String> {
        self.check_source()?;
        let mut messages = Vec::new();
        if let Some(s) = system {
            messages.push(("system", s));
        }
        messages.push(("user", user));
        let inputs = messages.iter().map(|(r, c)| r.len() + c.len()).sum::<usize>()
            + self.tokens.iter().map(|(_, t)| t.len()).sum::<usize>();
        if inputs > MAX_INPUTS {
            return Err(usage(
                "--chat",
                format!(
                    "the conversation and special tokens are {}, more than the {} a chat template is given",
                    size(inputs),
                    size(MAX_INPUTS)
                ),
                "shorten the sentence, or drop --chat to trace the text as it is",
            ));
        }
        let rendered = chat_jinja::render(&self.source, &messages, &self.tokens).map_err(|f| self.failure(f))?;
        self.check_rendered(&rendered, inputs)?;
        Ok(rendered)
    }

    /// An empty or oversized template (the GGUF's or tokenizer_config.json's string; a file's
    /// size is checked as it is read) is refused before it runs.
    fn check_source(&self) -> Result<()> {
        let fix = "pass a template with --chat-template FILE, or drop --chat";
        if self.source.trim().is_empty() {
            return Err(usage("--chat", format!("the chat template ({}) is empty", self.whence), fix));
        }
        if self.source.len() > MAX_TEMPLATE {
            let why = format!(
                "the chat template ({}) is {}, more than the {} a chat template may be",
                self.whence,
                size(self.source.len()),
                size(MAX_TEMPLATE)
            );
            return Err(usage("--chat", why, fix));
        }
        Ok(())
    }

    /// The one-line refusal of a template that did not render.
    fn failure(&self, f: Failure) -> anyhow::Error {
        let whence = &self.whence;
        let fix = "fix the template, or pass another with --chat-template FILE";
        match f {
            Failure::Raised(m) => usage(
                "--chat",
                format!("the chat template ({whence}) refused the conversation: {}", one_line(&m)),
                "change the conversation (a model without a system turn takes no --system), or pass \
                 another template with --chat-template FILE",
            ),
            Failure::Exhausted(fuel) => usage(
                "--chat",
                format!(
                    "the chat template ({whence}) ran out of its budget of {fuel} steps (an instruction, or 64 \
                     bytes of text, each): it loops or makes text without end"
                ),
                fix,
            ),
            Failure::Failed(m) => {
                usage("--chat", format!("the chat template ({whence}) does not render: {}", one_line(&m)), fix)
            }
        }
    }

    /// A rendered prompt is the conversation with the template's text around it: nothing (or
    /// only white space) means the template dropped the conversation, and more than
    /// [`MAX_ADDED`] beyond twice its inputs means it made text of its own.
    fn check_rendered(&self, rendered: &str, inputs: usize) -> Result<()> {
        let whence = &self.whence;
        let fix = "fix the template, or pass another with --chat-template FILE";
        if rendered.trim().is_empty() {
            let what = if rendered.is_empty() { "nothing" } else { "only white space" };
            return Err(usage("--chat", format!("the chat template ({whence}) rendered {what}"), fix));
        }
        let most = 2 * inputs + MAX_ADDED;
        if rendered.len() > most {
            let why = format!(
                "the chat template ({whence}) rendered {}, more than twice the conversation and {} (at most {} here)",
                size(rendered.len()),
                size(MAX_ADDED),
                size(most)
            );
            return Err(usage("--chat", why, fix));
        }
        Ok(())
    }

    /// The conversation of `--chat` with the sentence as the user's turn, rendered.
    pub fn turn(&self, chat: &Chat, sentence: &str) -> Result<crate::trace::Chat> {
        let rendered = self.render(chat.system.as_deref(), sentence)?;
        Ok(crate::trace::Chat { system: chat.system.clone(), user: sentence.to_string(), rendered })
    }
}

/// The template of a Hugging Face model folder (or `--chat-template`'s), with the special
/// tokens of its tokenizer_config.json and special_tokens_map.json.
pub fn from_folder(dir: &Path, chat: &Chat, what: &str) -> Result<Template> {
    let config = read_json(&dir.join("tokenizer_config.json"), what)?;
    let map = read_json(&dir.join("special_tokens_map.json"), what)?;
    let mut tokens = Vec::new();
    for name in TOKENS {
        // tokenizer_config.json's value wins, as transformers keeps it over the map's.
        let text = [&config, &map].into_iter().find_map(|v| token_text(&v[name]));
        tokens.extend(text.map(|t| (name, t)));
    }
    if let Some(file) = &chat.template {
        return Ok(Template::new(read_template(file)?, format!("--chat-template {}", file.display()), tokens));
    }
    let jinja = dir.join("chat_template.jinja");
    // As transformers looks for it: a regular file (a link to one) or nothing.
    if jinja.is_file() {
        let what = format!("--chat: {}", jinja.display());
        let source = read_capped(&jinja, &what, "restore the model's chat_template.jinja")?;
        return Ok(Template::new(source, "chat_template.jinja".into(), tokens));
    }
    let (source, whence) = config_template(&config["chat_template"], what)?.ok_or_else(|| {
        usage(
            "--chat",
            format!(
                "{what} has no chat template (looked for chat_template.jinja, and chat_template in \
                 tokenizer_config.json)"
            ),
            "pass a template with --chat-template FILE, or drop --chat",
        )
    })?;
    Ok(Template::new(source, whence, tokens))
}

/// tokenizer_config.json's `chat_template`: a string, or named templates of which
/// "default" is used (transformers' `get_chat_template` without tools); absent is `None`.
fn config_template(v: &serde_json::Value, what: &str) -> Result<Option<(String, String)>> {
    let key = "tokenizer_config.json's chat_template";
    let bad = |why: String| usage(format!("--chat: {what}"), format!("{key} {why}"), "pass --chat-template FILE");
    match v {
        serde_json::Value::Null => Ok(None),
        serde_json::Value::String(s) => Ok(Some((s.clone(), key.to_string()))),
        serde_json::Value::Array(named) => {
            let mut names = Vec::new();
            for t in named {
                let (Some(name), Some(text)) = (t["name"].as_str(), t["template"].as_str()) else {
                    return Err(bad("is a list whose items are not all {\"name\", \"template\"}".into()));
                };
                if name == "default" {
                    return Ok(Some((text.to_string(), format!("{key} \"default\""))));
                }
                names.push(crate::error::quote(name));
            }
            Err(bad(format!("names no \"default\" template (it has {})", names.join(", "))))
        }
        _ => Err(bad("is neither a string nor a list of {\"name\", \"template\"}".into())),
    }
}

/// The template of a GGUF file (or `--chat-template`'s), with the special tokens of its
/// token ids.
pub fn from_gguf(content: &Content, chat: &Chat, what: &str) -> Result<Template> {
    let meta = |k: &str| content.metadata.get(k);
    let vocab = meta("tokenizer.ggml.tokens").and_then(|v| v.to_vec().ok());
    let id = |k: &str| meta(&format!("tokenizer.ggml.{k}_token_id")).and_then(|v| v.to_u32().ok());
    let mut tokens = Vec::new();
    for (name, key) in [("bos_token", "bos"), ("eos_token", "eos"), ("unk_token", "unknown"), ("pad_token", "padding")]
    {
        let text = id(key).and_then(|i| vocab?.get(i as usize)?.to_string().ok().cloned());
        tokens.extend(text.map(|t| (name, t)));
    }
    if let Some(file) = &chat.template {
        return Ok(Template::new(read_template(file)?, format!("--chat-template {}", file.display()), tokens));
    }
    let key = "tokenizer.chat_template";
    let source = match meta(key) {
        None => Err(usage(
            "--chat",
            format!("{what} has no chat template (its GGUF metadata has no {key})"),
            "pass a template with --chat-template FILE, or drop --chat",
        )),
        Some(v) => v.to_string().cloned().map_err(|_| {
            usage(format!("--chat: {what}"), format!("the GGUF's {key} is not a string"), "pass --chat-template FILE")
        }),
    }?;
    Ok(Template::new(source, format!("the GGUF's {key}"), tokens))
}

/// `--chat-template FILE`'s text.
fn read_template(file: &Path) -> Result<String> {
    let what = format!("--chat-template {}", file.display());
    read_capped(file, &what, "pass a readable file holding a Jinja template")
}

/// A template file's text: at most [`MAX_TEMPLATE`] bytes of UTF-8, read as every input file
/// is (`input_file`: a device or folder is refused, a named pipe no one writes is empty, a
/// process substitution `<(…)` is read, a link is followed).
fn read_capped(path: &Path, what: &str, fix: &str) -> Result<String> {
    super::input_file::text(what, path, fix, MAX_TEMPLATE as u64)
}

/// A JSON file of the folder, or `null` when it is absent; one that is there is read as every
/// input file is (a device or folder is refused, at most 64 MiB).
fn read_json(path: &Path, what: &str) -> Result<serde_json::Value> {
    let name = path.file_name().map_or(String::new(), |n| n.to_string_lossy().into_owned());
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(serde_json::Value::Null);
    }
    let what = format!("--chat: {what}: {name}");
    let bytes = super::input_file::bytes(&what, path, &format!("restore {name}"), super::input_file::CONFIG)?;
    crate::strict_json::parse(&bytes)
        .map_err(|e| usage(&what, format!("not valid JSON: {e}"), format!("restore {name}")))
}

/// A byte count as messages write sizes (`1.0 MiB`).
fn size(bytes: usize) -> String {
    human(bytes as u128)
}

/// A special token as tokenizer_config.json writes it: its text, or `{"content": text, …}`.
fn token_text(v: &serde_json::Value) -> Option<String> {
    v.as_str().or_else(|| v["content"].as_str()).map(str::to_string)
}

/// A template's message on one line of at most 300 characters, control characters escaped.
fn one_line(s: &str) -> String {
    // As render::text::printable shows them (`\n`, `\u{1b}`): a message goes to a terminal.
    let shown: String =
        s.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect();
    if shown.chars().count() <= 300 {
        shown
    } else {
        shown.chars().take(299).chain(std::iter::once('…')).collect()
    }
}
