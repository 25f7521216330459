//! transformers' `tojson` filter for chat templates (transformers/utils/chat_template_utils.py):
//! Python's `json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)`
//! with the keyword arguments a template may pass, not Jinja's HTML-safe `tojson`. A value
//! nested deeper than [`MAX_DEPTH`] is refused rather than written: Python's `json.dumps`
//! raises `RecursionError` near 1,000 levels, and a template-built value can be nested as
//! deep as its budget allows, which would otherwise recurse down the thread's stack. The text
//! is paid for (MiniJinja's fuel) as it is written, before each indentation is: an `indent` of
//! 10**9 stops at the budget, not after a gigabyte.

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Error, ErrorKind, State, Value};
use std::cell::Cell;
use std::fmt::Write;

/// Levels of lists and dicts `tojson` writes: a tool's JSON schema is a few levels deep.
const MAX_DEPTH: usize = 512;

/// transformers' `tojson(x, ensure_ascii=False, indent=None, separators=None,
/// sort_keys=False)`: `json.dumps` with those arguments.
pub(super) fn tojson(state: &State, value: &Value, kwargs: Kwargs) -> Result<String, Error> {
    let ensure_ascii: Option<bool> = kwargs.get("ensure_ascii")?;
    let indent: Option<Value> = kwargs.get("indent")?;
    let separators: Option<Value> = kwargs.get("separators")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    kwargs.assert_all_used()?;
    let indent = match indent {
        Some(v) if v.is_none() => None,
        Some(v) => match (v.as_str(), v.as_usize()) {
            (Some(s), _) => Some(s.to_string()),
            (None, Some(n)) => {
                state.consume_fuel(n as u64 / 64)?;
                Some(" ".repeat(n))
            }
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
    let pay = |fuel: u64| state.consume_fuel(fuel);
    let style = Style {
        ensure_ascii: ensure_ascii.unwrap_or(false),
        indent,
        item,
        key,
        sort: sort_keys.unwrap_or(false),
        pay: &pay,
        paid: Cell::new(0),
    };
    let mut out = String::new();
    style.write(value, 0, &mut out)?;
    Ok(out)
}

/// How `json.dumps` was asked to write, and what has been paid for.
struct Style<'a> {
    ensure_ascii: bool,
    indent: Option<String>,
    item: String,
    key: String,
    sort: bool,
    /// Spends fuel (one per 64 bytes).
    pay: &'a dyn Fn(u64) -> Result<(), Error>,
    /// Bytes of output paid for so far.
    paid: Cell<usize>,
}

impl Style<'_> {
    /// Pays for the output up to `total` bytes.
    fn pay_to(&self, total: usize) -> Result<(), Error> {
        let owed = total.saturating_sub(self.paid.get()) / 64;
        if owed > 0 {
            (self.pay)(owed as u64)?;
            self.paid.set(self.paid.get() + owed * 64);
        }
        Ok(())
    }

    fn write(&self, v: &Value, depth: usize, out: &mut String) -> Result<(), Error> {
        self.pay_to(out.len())?;
        if depth > MAX_DEPTH {
            let why = format!("tojson: the value is nested deeper than {MAX_DEPTH} levels");
            return Err(Error::new(ErrorKind::InvalidOperation, why));
        }
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
        let newline = |out: &mut String, d: usize| -> Result<(), Error> {
            if let Some(ind) = &self.indent {
                self.pay_to(out.len() + 1 + ind.len() * d)?;
                out.push('\n');
                out.push_str(&ind.repeat(d));
            }
            Ok(())
        };
        for (i, (k, x)) in items.iter().enumerate() {
            if i > 0 {
                out.push_str(&self.item);
            }
            newline(out, depth + 1)?;
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
        newline(out, depth)?;
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
