//! A chat template rendered as transformers renders it: `apply_chat_template` compiles the
//! template with `_compile_jinja_template` (transformers/utils/chat_template_utils.py, the
//! same in 4.46 and 4.51) in a sandboxed Jinja2 environment with `trim_blocks=True`,
//! `lstrip_blocks=True` and the `loopcontrols` extension, two globals, `raise_exception(msg)`
//! and `strftime_now(format)`, and its own `tojson` filter (Python's `json.dumps`, not
//! Jinja's HTML-safe one), then renders it with `messages`, `tools=None`, `documents=None`,
//! `add_generation_prompt` and the tokenizer's special tokens (`bos_token`, `eos_token`…;
//! a token the tokenizer lacks is not passed at all, so it is undefined, not None).
//!
//! MiniJinja stands in for Jinja2, with what HF templates use of Python: string and dict
//! methods (`.strip()`, `.startswith()`, `.items()`…, minijinja-contrib's pycompat) and
//! Jinja2's printing of `None`, `True` and `False`. `strftime_now` is left undefined, so that
//! a trace never depends on the date: templates that call it test `strftime_now is defined`
//! first and fall back to a fixed date.
//!
//! A template is code from a stranger (a GGUF file, a downloaded folder), so what it may do is
//! bounded: no loader (`{% include %}`, `{% import %}` and `{% extends %}` are syntax errors)
//! and no global that reads the environment or the files (MiniJinja's `debug()` is removed, as
//! is `pprint`, whose output is built before it is paid for); a budget of work, MiniJinja's
//! fuel ([`budget`]), that every instruction and every byte made or read draws on, extended
//! here to the work MiniJinja leaves unpaid (`str.format`'s widths, the `lower` and `upper`
//! tests); MiniJinja's recursion limit (500 levels of macros and calls); and a thread of its
//! own with a stack deep enough for any value the budget can nest (printing, comparing or
//! dropping a nested list recurses once per level). What it renders is checked by the caller
//! ([`chat`](super::chat)).

use minijinja::value::ValueKind;
use minijinja::{context, Environment, Error, ErrorKind, State, Value};
use std::fmt::Write;
use std::sync::{Arc, Mutex};

/// The budget every template starts with, in MiniJinja's fuel (an instruction, or 64 bytes of
/// text made or read): real chat templates spend under 200 on a short conversation; a
/// template that loops or builds text without end stops here.
const FUEL: u64 = 50_000;

/// Bytes of the template's inputs (messages and special tokens) that add one fuel to the
/// budget: four units a byte, enough to copy, strip and print every message a few times.
const BYTES_PER_FUEL: u64 = 16;

/// The stack of the thread a template runs on. The budget can nest a list about 35,000
/// levels deep (3.6 fuel a level, through a chain of `batch` filters), and printing one
/// takes about 500 bytes of stack a level (more in a debug build): far more than a thread's
/// usual 8 MiB, and only reserved, not used, by a template that nests nothing.
const STACK: usize = 128 << 20;

/// Why a template did not render.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// It called `raise_exception(message)`.
    Raised(String),
    /// It spent its whole budget (the fuel it had).
    Exhausted(u64),
    /// It does not parse, or failed while rendering: MiniJinja's message.
    Failed(String),
}

/// The fuel a template gets for `inputs` bytes of messages and special tokens.
pub fn budget(inputs: usize) -> u64 {
    FUEL + inputs as u64 / BYTES_PER_FUEL
}

/// Renders `source` for `messages` (role, content) with the generation prompt, and the
/// special tokens `tokens` (name, text) as variables, as `apply_chat_template(conversation,
/// add_generation_prompt=True, tokenize=False)` does, on a thread of its own ([`STACK`]).
pub fn render(source: &str, messages: &[(&str, &str)], tokens: &[(&str, String)]) -> Result<String, Failure> {
    let own = |pairs: &mut dyn Iterator<Item = (&str, &str)>| -> Vec<(String, String)> {
        pairs.map(|(a, b)| (a.to_string(), b.to_string())).collect()
    };
    let messages = own(&mut messages.iter().copied());
    let tokens = own(&mut tokens.iter().map(|(n, t)| (*n, t.as_str())));
    let source = source.to_string();
    let worker = std::thread::Builder::new()
        .name("chat template".into())
        .stack_size(STACK)
        .spawn(move || render_here(&source, &messages, &tokens))
        .map_err(|e| Failure::Failed(format!("its thread could not start: {e}")))?;
    worker.join().unwrap_or_else(|_| Err(Failure::Failed("the template engine failed".into())))
}

/// [`render`] on the calling thread.
fn render_here(source: &str, messages: &[(String, String)], tokens: &[(String, String)]) -> Result<String, Failure> {
    let inputs = messages.iter().map(|(r, c)| r.len() + c.len()).sum::<usize>()
        + tokens.iter().map(|t| t.1.len()).sum::<usize>();
    let fuel = budget(inputs);
    let raised = Arc::new(Mutex::new(None::<String>));
    let env = environment(raised.clone(), fuel);
    let failed = |e: Error| match raised.lock().ok().and_then(|mut r| r.take()) {
        Some(message) => Failure::Raised(message),
        None if e.kind() == ErrorKind::OutOfFuel => Failure::Exhausted(fuel),
        None => Failure::Failed(message(&e)),
    };
    let template = env.template_from_named_str("chat_template", source).map_err(failed)?;
    let messages: Value =
        messages.iter().map(|(role, content)| context! { role => role, content => content }).collect();
    let token =
        |name: &str| tokens.iter().find(|(n, _)| n == name).map_or(Value::UNDEFINED, |(_, t)| Value::from(t.as_str()));
    let ctx = context! {
        messages => messages,
        tools => (),
        documents => (),
        add_generation_prompt => true,
        bos_token => token("bos_token"),
        eos_token => token("eos_token"),
        unk_token => token("unk_token"),
        pad_token => token("pad_token"),
        sep_token => token("sep_token"),
        cls_token => token("cls_token"),
        mask_token => token("mask_token"),
    };
    template.render(ctx).map_err(failed)
}

/// transformers' environment, as far as MiniJinja has its parts, with `fuel` to spend.
fn environment(raised: Arc<Mutex<Option<String>>>, fuel: u64) -> Environment<'static> {
    let mut env = Environment::new();
    let syntax = minijinja::syntax::SyntaxConfig::builder().trim_blocks(true).lstrip_blocks(true).build();
    if let Ok(syntax) = syntax {
        env.set_syntax(syntax);
    }
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    env.set_fuel(Some(fuel));
    env.set_unknown_method_callback(method);
    env.set_formatter(|out, state, value| match value.kind() {
        ValueKind::None => out.write_str("None").map_err(Error::from),
        ValueKind::Bool => out.write_str(if value.is_true() { "True" } else { "False" }).map_err(Error::from),
        _ => minijinja::escape_formatter(out, state, value),
    });
    env.add_function("raise_exception", move |message: String| -> Result<Value, Error> {
        if let Ok(mut r) = raised.lock() {
            *r = Some(message.clone());
        }
        Err(Error::new(ErrorKind::InvalidOperation, message))
    });
    env.add_filter("tojson", super::chat_json::tojson);
    // Jinja2's `trim` is Python's `str.strip(chars)`.
    env.add_filter("trim", |s: &str, chars: Option<&str>| match chars {
        Some(set) => s.trim_matches(|c| set.contains(c)).to_string(),
        None => s.trim_matches(python_space).to_string(),
    });
    // Not Jinja2's: `debug()` prints the engine's state, `pprint` builds its text unpaid.
    env.remove_global("debug");
    env.remove_filter("pprint");
    // MiniJinja's own read every character without paying for it.
    env.add_test("lower", |state: &State, v: &Value| paid(state, v).map(|()| minijinja::tests::is_lower(v)));
    env.add_test("upper", |state: &State, v: &Value| paid(state, v).map(|()| minijinja::tests::is_upper(v)));
    env
}

/// Pays for reading a string: one fuel per 64 bytes, as MiniJinja's filters pay.
fn paid(state: &State, v: &Value) -> Result<(), Error> {
    state.consume_fuel(v.as_str().map_or(0, str::len) as u64 / 64)
}

/// Python's string and dict methods (minijinja-contrib's pycompat), with `str.format` paying
/// first for the widths and precisions it may pad to, which pycompat would otherwise build
/// before paying (`'{:>999999999}'.format(1)` is a gigabyte).
fn method(state: &mut State, value: &Value, name: &str, args: &[Value]) -> Result<Value, Error> {
    if let Some(text) = value.as_str() {
        if name == "format" {
            state.consume_fuel(padding(text, args) / 64)?;
        }
        if let Some(done) = python_text(text, name, args) {
            return Ok(done);
        }
    }
    minijinja_contrib::pycompat::unknown_method_callback(state, value, name, args)
}

/// Python's white space (`str.isspace`): Rust's, and the four separators U+001C to U+001F,
/// which `str.strip()` and `str.split()` remove and Rust's `trim` keeps.
fn python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// The string methods whose Python meaning pycompat's Rust one misses, called without the
/// arguments that make them agree: `strip`, `lstrip`, `rstrip` and `split` on Python's white
/// space, `splitlines` on Python's line breaks. None for every other call.
fn python_text(s: &str, name: &str, args: &[Value]) -> Option<Value> {
    let bare = args.iter().all(Value::is_none);
    match (name, bare) {
        ("strip", true) => Some(Value::from(s.trim_matches(python_space))),
        ("lstrip", true) => Some(Value::from(s.trim_start_matches(python_space))),
        ("rstrip", true) => Some(Value::from(s.trim_end_matches(python_space))),
        ("split", true) => Some(s.split(python_space).filter(|w| !w.is_empty()).map(Value::from).collect()),
        ("splitlines", _) => {
            let keep = args.first().is_some_and(Value::is_true);
            Some(python_lines(s, keep).into_iter().map(Value::from).collect())
        }
        _ => None,
    }
}

/// `str.splitlines(keepends)`: lines ended by `\n`, `\r`, `\r\n`, `\v`, `\f`, U+001C–U+001E,
/// U+0085, U+2028 or U+2029.
fn python_lines(s: &str, keep: bool) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if !matches!(c, '\n' | '\r' | '\u{b}' | '\u{c}' | '\u{1c}'..='\u{1e}' | '\u{85}' | '\u{2028}' | '\u{2029}') {
            continue;
        }
        let mut end = i + c.len_utf8();
        if c == '\r' && chars.peek().is_some_and(|&(_, n)| n == '\n') {
            chars.next();
            end += 1;
        }
        lines.push(&s[start..if keep { end } else { i }]);
        start = end;
    }
    if start < s.len() {
        lines.push(&s[start..]);
    }
    lines
}

/// At least the bytes `text.format(*args)` may pad: the numbers inside its replacement fields
/// (widths, precisions, and field indices, which are small), and, when a field's spec holds
/// a nested field (`{:{}}`), every integer argument, which may be its width.
fn padding(text: &str, args: &[Value]) -> u64 {
    let (mut total, mut run, mut depth, mut nested) = (0u64, 0u64, 0usize, false);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            // `{{` and `}}` outside a field are literal braces.
            '{' | '}' if depth == 0 && chars.peek() == Some(&c) => {
                chars.next();
            }
            '{' => {
                nested |= depth > 0;
                depth += 1;
            }
            '}' => depth = depth.saturating_sub(1),
            '0'..='9' if depth > 0 => run = run.saturating_mul(10).saturating_add(u64::from(c as u8 - b'0')),
            _ => {}
        }
        if !c.is_ascii_digit() {
            total = total.saturating_add(std::mem::take(&mut run));
        }
    }
    total = total.saturating_add(run);
    if nested {
        let widths = args.iter().filter_map(|a| i64::try_from(a.clone()).ok()).map(i64::unsigned_abs);
        total = widths.fold(total, u64::saturating_add);
    }
    total
}

/// MiniJinja's message on one line: what went wrong and where (`(in chat_template:3)`).
fn message(e: &Error) -> String {
    let mut s = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        let _ = write!(s, ": {inner}");
        source = inner.source();
    }
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(source: &str) -> Result<String, Failure> {
        render(source, &[("user", "Hi")], &[("bos_token", "<s>".into())])
    }

    #[test]
    fn blocks_trim_their_line_and_missing_tokens_are_undefined() {
        let t = "{% for m in messages %}\n  {{ bos_token }}[{{ m.role }}] {{ m['content'].strip() }}\n{% endfor %}";
        // lstrip_blocks strips before block tags only: the line's own indent stays.
        assert_eq!(one(t).unwrap(), "  <s>[user] Hi\n");
        assert_eq!(one("{{ eos_token }}|{{ eos_token is defined }}|{{ none }}").unwrap(), "|False|None");
        assert_eq!(one("{{ tools is none }} {{ add_generation_prompt }}").unwrap(), "True True");
    }

    #[test]
    fn raise_exception_and_errors_are_told_apart() {
        let raised = one("{{ raise_exception('Roles must alternate') }}").unwrap_err();
        assert_eq!(raised, Failure::Raised("Roles must alternate".into()));
        let Failure::Failed(m) = one("{% if %}").unwrap_err() else { panic!("a syntax error") };
        assert!(m.contains("syntax error") && !m.contains('\n'), "{m}");
        let endless = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}";
        assert_eq!(one(endless).unwrap_err(), Failure::Exhausted(budget(4 + 2 + 3)));
    }

    #[test]
    fn python_white_space_and_line_breaks() {
        assert_eq!(
            one("[{{ '\x1c a \x1f\u{3000}'.strip() }}|{{ ' \x1db'|trim }}|{{ 'x\x1ey'.split()|join(',') }}]").unwrap(),
            "[a|b|x,y]"
        );
        assert_eq!(python_lines("a\r\nb\x0bc\u{2028}d\n", false), ["a", "b", "c", "d"]);
        assert_eq!(python_lines("a\r\nb\rc", true), ["a\r\n", "b\r", "c"]);
    }

    #[test]
    fn format_pays_for_the_padding_it_may_write() {
        assert_eq!(padding("{:>10}|{0:.3f}|{{99999}}", &[]), 13);
        assert_eq!(padding("{:{}}", &[Value::from(1), Value::from(-70)]), 71);
        assert_eq!(padding("plain 12345 text", &[Value::from(9)]), 0);
    }

    #[test]
    fn tojson_is_pythons_json_dumps() {
        let t = r#"{{ {"b": [1, 2.5, none, true], "a": "<é>\n"} | tojson }}"#;
        assert_eq!(one(t).unwrap(), r#"{"b": [1, 2.5, null, true], "a": "<é>\n"}"#);
        let t = r#"{{ {"b": 1, "a": []} | tojson(indent=2, sort_keys=true) }}"#;
        assert_eq!(one(t).unwrap(), "{\n  \"a\": [],\n  \"b\": 1\n}");
        assert_eq!(one(r#"{{ "é😀" | tojson(ensure_ascii=true) }}"#).unwrap(), r#""\u00e9\ud83d\ude00""#);
        assert_eq!(one(r#"{{ [1.0, 1e20, 0.00001] | tojson(separators=[",", ":"]) }}"#).unwrap(), "[1.0,1e+20,1e-05]");
    }
}
