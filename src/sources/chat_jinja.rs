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
//! first and fall back to a fixed date. A template's work is bounded (MiniJinja's fuel), as
//! it comes from a model file.

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{context, Environment, Error, ErrorKind, Value};
use std::fmt::Write;
use std::sync::{Arc, Mutex};

/// Instructions (and 64-byte units of output) a template may spend: chat templates take a
/// few thousand; a template that loops for ever stops here.
const FUEL: u64 = 5_000_000;

/// Why a template did not render.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// It called `raise_exception(message)`.
    Raised(String),
    /// It does not parse, or failed while rendering: MiniJinja's message.
    Failed(String),
}

/// Renders `source` for `messages` (role, content) with the generation prompt, and the
/// special tokens `tokens` (name, text) as variables, as `apply_chat_template(conversation,
/// add_generation_prompt=True, tokenize=False)` does.
pub fn render(source: &str, messages: &[(&str, &str)], tokens: &[(&str, String)]) -> Result<String, Failure> {
    let raised = Arc::new(Mutex::new(None::<String>));
    let env = environment(raised.clone());
    let failed = |e: Error| match raised.lock().ok().and_then(|mut r| r.take()) {
        Some(message) => Failure::Raised(message),
        None => Failure::Failed(message(&e)),
    };
    let template = env.template_from_named_str("chat_template", source).map_err(failed)?;
    let messages: Value =
        messages.iter().map(|&(role, content)| context! { role => role, content => content }).collect();
    let token =
        |name: &str| tokens.iter().find(|(n, _)| *n == name).map_or(Value::UNDEFINED, |(_, t)| Value::from(t.as_str()));
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

/// transformers' environment, as far as MiniJinja has its parts.
fn environment(raised: Arc<Mutex<Option<String>>>) -> Environment<'static> {
    let mut env = Environment::new();
    let syntax = minijinja::syntax::SyntaxConfig::builder().trim_blocks(true).lstrip_blocks(true).build();
    if let Ok(syntax) = syntax {
        env.set_syntax(syntax);
    }
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    env.set_fuel(Some(FUEL));
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
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
    env.add_filter("tojson", tojson);
    env
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

/// transformers' `tojson(x, ensure_ascii=False, indent=None, separators=None,
/// sort_keys=False)`: `json.dumps` with those arguments.
fn tojson(value: &Value, kwargs: Kwargs) -> Result<String, Error> {
    let ensure_ascii: Option<bool> = kwargs.get("ensure_ascii")?;
    let indent: Option<Value> = kwargs.get("indent")?;
    let separators: Option<Value> = kwargs.get("separators")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    kwargs.assert_all_used()?;
    let indent = match indent {
        Some(v) if v.is_none() => None,
        Some(v) => match (v.as_str(), v.as_usize()) {
            (Some(s), _) => Some(s.to_string()),
            (None, Some(n)) => Some(" ".repeat(n)),
            _ => return Err(Error::new(ErrorKind::InvalidOperation, "tojson: indent must be a number or a string")),
        },
        None => None,
    };
    // Python's defaults: ", " and ": ", or "," between items when indenting.
    let (item, key) = match separators.filter(|s| !s.is_none()) {
        Some(s) => {
            let part = |i| s.get_item_by_index(i).ok().and_then(|v| v.as_str().map(str::to_string));
            match (part(0), part(1)) {
                (Some(a), Some(b)) => (a, b),
                _ => return Err(Error::new(ErrorKind::InvalidOperation, "tojson: separators must be two strings")),
            }
        }
        None => (if indent.is_some() { "," } else { ", " }.to_string(), ": ".to_string()),
    };
    let style =
        Style { ensure_ascii: ensure_ascii.unwrap_or(false), indent, item, key, sort: sort_keys.unwrap_or(false) };
    let mut out = String::new();
    style.write(value, 0, &mut out)?;
    Ok(out)
}

/// How `json.dumps` was asked to write.
struct Style {
    ensure_ascii: bool,
    indent: Option<String>,
    item: String,
    key: String,
    sort: bool,
}

impl Style {
    fn write(&self, v: &Value, depth: usize, out: &mut String) -> Result<(), Error> {
        match v.kind() {
            ValueKind::Undefined | ValueKind::None => out.push_str("null"),
            ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
            ValueKind::Number => out.push_str(&number(v)),
            ValueKind::String => self.string(v.as_str().unwrap_or_default(), out),
            ValueKind::Map => {
                let mut keys: Vec<Value> = v.try_iter()?.collect();
                if self.sort {
                    keys.sort();
                }
                let items = keys.into_iter().map(|k| (Some(k.clone()), v.get_item(&k).unwrap_or_default()));
                self.container(('{', '}'), items.collect(), depth, out)?;
            }
            ValueKind::Seq | ValueKind::Iterable => {
                let items = v.try_iter()?.map(|x| (None, x)).collect();
                self.container(('[', ']'), items, depth, out)?;
            }
            _ => {
                let what = format!("tojson: a {} cannot be written as JSON", v.kind());
                return Err(Error::new(ErrorKind::InvalidOperation, what));
            }
        }
        Ok(())
    }

    /// A list (keys None) or a dict, as `json.dumps` lays it out.
    fn container(
        &self,
        (open, close): (char, char),
        items: Vec<(Option<Value>, Value)>,
        depth: usize,
        out: &mut String,
    ) -> Result<(), Error> {
        out.push(open);
        if items.is_empty() {
            out.push(close);
            return Ok(());
        }
        let newline = |out: &mut String, d: usize| {
            if let Some(ind) = &self.indent {
                out.push('\n');
                out.push_str(&ind.repeat(d));
            }
        };
        for (i, (k, x)) in items.iter().enumerate() {
            if i > 0 {
                out.push_str(&self.item);
            }
            newline(out, depth + 1);
            if let Some(k) = k {
                // Python writes a non-string key as its JSON text, quoted.
                match k.as_str() {
                    Some(s) => self.string(s, out),
                    None => self.string(&dict_key(k), out),
                }
                out.push_str(&self.key);
            }
            self.write(x, depth + 1, out)?;
        }
        newline(out, depth);
        out.push(close);
        Ok(())
    }

    /// A JSON string as Python writes it: `\"`, `\\`, `\n`, `\r`, `\t`, `\b`, `\f`, other
    /// control characters as `\u00XX`; with `ensure_ascii` every non-ASCII character as
    /// `\uXXXX` (a surrogate pair above U+FFFF).
    fn string(&self, s: &str, out: &mut String) {
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                c if (c as u32) < 0x20 || (self.ensure_ascii && !c.is_ascii()) => {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units) {
                        let _ = write!(out, "\\u{u:04x}");
                    }
                }
                c => out.push(c),
            }
        }
        out.push('"');
    }
}

/// A number as Python's `json.dumps` writes it: integers as they are, floats by `repr`
/// (`1.0`, `0.1`, `1e-05`, `1e+16`: the shortest digits, an exponent outside [1e-4, 1e16)).
fn number(v: &Value) -> String {
    if v.is_integer() {
        return v.to_string();
    }
    let f = f64::try_from(v.clone()).unwrap_or(f64::NAN);
    let a = f.abs();
    if f.is_nan() {
        "NaN".into()
    } else if f.is_infinite() {
        if f > 0.0 { "Infinity" } else { "-Infinity" }.into()
    } else if a == 0.0 || (1e-4..1e16).contains(&a) {
        let s = f.to_string();
        if s.contains('.') {
            s
        } else {
            s + ".0"
        }
    } else {
        let s = format!("{f:e}");
        let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
        let (sign, digits) = e.strip_prefix('-').map_or(("+", e), |d| ("-", d));
        format!("{m}e{sign}{digits:0>2}")
    }
}

/// A dict key that is not a string, as `json.dumps` turns it into one.
fn dict_key(k: &Value) -> String {
    match k.kind() {
        ValueKind::None | ValueKind::Undefined => "null".into(),
        ValueKind::Bool => (if k.is_true() { "true" } else { "false" }).into(),
        ValueKind::Number => number(k),
        _ => k.to_string(),
    }
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
        let Failure::Failed(m) =
            one("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}").unwrap_err()
        else {
            panic!("out of fuel")
        };
        assert!(m.contains("fuel"), "{m}");
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
