//! The JSON document (schema_version 1), one per run:
//!
//! ```text
//! {"schema_version": 1,
//!  "input":  {"sentence": "...", "tokens": [...], "token_ids": [...]},
//!  "config": {every setting that shaped the numbers},
//!  "steps":  [{"id": "layers.0.attn.weights", "layer": 0, "name": "attn.weights",
//!              "dims": ["head", "query_pos", "key_pos"], "shape": [2, 8, 8],
//!              "values": [[[...]]]}, ...]}
//! ```
//!
//! Values are nested arrays in `shape`; each f32 is written as the shortest decimal that
//! reads back to the same f32 (zmij, the Schubfach-based successor of ryu). Numbers JSON cannot hold are written as the strings
//! `"nan"`, `"inf"` and `"-inf"` (a causally masked score is `"-inf"`, and the mask is also its
//! own boolean step `attn.mask`). Global steps have `"layer": null`; a step narrowed by
//! `--head` carries `"heads": [h]`. One step per line, so `grep` and `jq -c` both work.

use crate::trace::schema::SCHEMA_VERSION;
use crate::trace::{Step, Trace, Values};
use std::io::{self, Write};

pub fn write(trace: &Trace, w: &mut dyn Write) -> io::Result<()> {
    write_with(trace, &[], w)
}

/// The document's `input` object (also the first line of `--format jsonl`): the sentence,
/// its tokens and ids, a real model's token types, the tokens' decoded texts and `--chat`'s
/// conversation.
pub fn input_object(trace: &Trace) -> serde_json::Value {
    if let Some(doc) = seq2seq_input(trace) {
        return doc;
    }
    let mut input = serde_json::json!({
        "sentence": trace.sentence,
        "tokens": trace.tokens,
        "token_ids": trace.token_ids,
    });
    if let Some(types) = &trace.token_type_ids {
        input["token_type_ids"] = serde_json::json!(types);
    }
    // What each token spells (sources/token_text.rs), beside the exact token strings.
    if let Some(texts) = &trace.texts {
        input["texts"] = serde_json::json!(texts);
    }
    // `--chat`: the turns, and the template's text that the tokens are of.
    if let Some(c) = &trace.chat {
        input["chat"] = serde_json::json!({"system": c.system, "user": c.user, "rendered": c.rendered});
    }
    input
}

/// An encoder–decoder's `input`: the sentence's (the encoder's) tokens, ids and texts as a
/// one-stack model's, and `target`, the decoder's: `--target` as given and the tokens the
/// decoder ran on (its start token, then the target's shifted right).
fn seq2seq_input(trace: &Trace) -> Option<serde_json::Value> {
    let s = trace.config.parts.seq2seq.as_ref()?;
    let source = trace.keys.as_ref()?;
    let mut input = serde_json::json!({
        "sentence": trace.sentence,
        "tokens": source.tokens,
        "token_ids": source.ids,
        "target": {"text": s.target, "tokens": trace.tokens, "token_ids": trace.token_ids},
    });
    if let (Some(a), Some(b)) = (&source.texts, &trace.texts) {
        (input["texts"], input["target"]["texts"]) = (serde_json::json!(a), serde_json::json!(b));
    }
    Some(input)
}

/// The document with optional top-level objects after `steps` (the views' `"focus"` and
/// `"views"`; see render/focus.rs and render/views.rs), each given as its JSON text.
pub fn write_with(trace: &Trace, extra: &[(&str, String)], w: &mut dyn Write) -> io::Result<()> {
    let input = input_object(trace);
    writeln!(w, "{{")?;
    writeln!(w, "  \"schema_version\": {SCHEMA_VERSION},")?;
    writeln!(w, "  \"input\": {},", serde_json::to_string(&input)?)?;
    writeln!(w, "  \"config\": {},", serde_json::to_string(&trace.config_json())?)?;
    writeln!(w, "  \"steps\": [")?;
    for (i, step) in trace.steps.iter().enumerate() {
        write!(w, "    ")?;
        write_step(step, w)?;
        writeln!(w, "{}", if i + 1 < trace.steps.len() { "," } else { "" })?;
    }
    writeln!(w, "  ]{}", if extra.is_empty() { "" } else { "," })?;
    for (i, (key, text)) in extra.iter().enumerate() {
        writeln!(w, "  {}: {text}{}", serde_json::to_string(key)?, if i + 1 < extra.len() { "," } else { "" })?;
    }
    writeln!(w, "}}")
}

/// One step object, as in `steps` (and as each line of `--format jsonl`).
pub fn write_step(step: &Step, w: &mut dyn Write) -> io::Result<()> {
    let layer = step.layer.map_or("null".to_string(), |l| l.to_string());
    write!(
        w,
        "{{\"id\": {}, \"layer\": {layer}, \"name\": {}, \"dims\": {}, \"shape\": {}, ",
        serde_json::to_string(&step.id)?,
        serde_json::to_string(&step.name)?,
        serde_json::to_string(&step.dims)?,
        serde_json::to_string(&step.shape)?,
    )?;
    if let Some(h) = &step.heads {
        write!(w, "\"heads\": {}, ", serde_json::to_string(h)?)?;
    }
    write!(w, "\"values\": ")?;
    if let Values::F32(v) = &step.values {
        write_f32_nested(w, &step.shape, v)?;
        return write!(w, "}}");
    }
    let mut buf = zmij::Buffer::new();
    let mut item = |w: &mut dyn Write, i: usize| -> io::Result<()> {
        match &step.values {
            Values::F32(v) => write_f32(w, v[i], &mut buf),
            Values::Bool(v) => write!(w, "{}", v[i]),
            Values::Int(v) => write!(w, "{}", v[i]),
            Values::Str(v) => write!(w, "{}", serde_json::to_string(&v[i])?),
        }
    };
    nested(w, &step.shape, 0, &mut 0, &mut item)?;
    write!(w, "}}")
}

/// Writes the values of `shape[depth..]` as nested arrays, advancing `next` through them.
fn nested(
    w: &mut dyn Write,
    shape: &[usize],
    depth: usize,
    next: &mut usize,
    item: &mut dyn FnMut(&mut dyn Write, usize) -> io::Result<()>,
) -> io::Result<()> {
    if depth == shape.len() {
        item(w, *next)?;
        *next += 1;
        return Ok(());
    }
    write!(w, "[")?;
    for i in 0..shape[depth] {
        if i > 0 {
            write!(w, ",")?;
        }
        nested(w, shape, depth + 1, next, item)?;
    }
    write!(w, "]")
}

/// The hot path (a real model's trace is hundreds of MB of floats): the innermost rows are
/// formatted into a byte buffer and handed to the writer in large pieces, instead of a
/// dynamic call and a `write` per number. Output is identical to the general path.
pub fn write_f32_nested(w: &mut dyn Write, shape: &[usize], values: &[f32]) -> io::Result<()> {
    let Some((&last, outer)) = shape.split_last() else {
        let mut out = Vec::new();
        push_f32(&mut out, values[0], &mut zmij::Buffer::new());
        return w.write_all(&out);
    };
    let rows: usize = outer.iter().product();
    if rows == 0 {
        let mut out = vec![b'['; outer.len()];
        out.extend(std::iter::repeat_n(b']', outer.len()));
        return w.write_all(&out);
    }
    // Large tensors are formatted on every core: a row's bytes depend only on its index, so
    // chunks of rows formatted apart and written in order give the same bytes.
    // available_parallelism reads cgroup files on Linux: ask once, and only for big tensors.
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let threads = if values.len() < PARALLEL_FROM {
        1
    } else {
        *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()).min(8))
    };
    if threads < 2 {
        let mut out = Vec::with_capacity(1 << 16);
        return format_rows(w, &mut out, outer, last, values, 0..rows, true);
    }
    let per = rows.div_ceil(threads);
    let parts: io::Result<Vec<Vec<u8>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| (t * per).min(rows)..((t + 1) * per).min(rows))
            .map(|range| {
                scope.spawn(move || {
                    // Room for the longest numbers, so the buffer never grows (a copy and
                    // fresh pages); the pages it leaves untouched cost nothing.
                    let mut out = Vec::with_capacity(range.len() * (last * (MAX_F32_LEN + 1) + 2 * outer.len() + 2));
                    // Writing into a Vec cannot fail.
                    let _ = format_rows(&mut std::io::sink(), &mut out, outer, last, values, range, false);
                    out
                })
            })
            .collect();
        // A formatting thread cannot fail short of a bug; if one did, fail rather than write
        // a document with a hole in it.
        handles.into_iter().map(|h| h.join().map_err(|_| io::Error::other("a JSON formatting thread failed"))).collect()
    });
    for part in parts? {
        w.write_all(&part)?;
    }
    Ok(())
}

/// Tensors with at least this many values (~300 KB of JSON) are formatted in parallel; a
/// thread costs tens of microseconds, formatting 32 Ki values about a millisecond.
const PARALLEL_FROM: usize = 1 << 15;

/// Formats rows `range` into `out`; with `flush`, hands `out` to `w` every 64 KiB.
fn format_rows(
    w: &mut dyn Write,
    out: &mut Vec<u8>,
    outer: &[usize],
    last: usize,
    values: &[f32],
    range: std::ops::Range<usize>,
    flush: bool,
) -> io::Result<()> {
    let mut fmt = zmij::Buffer::new();
    for r in range {
        // Open the brackets of every dimension that starts at this row.
        let mut opens = 0;
        let mut span = 1;
        for &d in outer.iter().rev() {
            if r % (span * d) == 0 {
                opens += 1;
                span *= d;
            } else {
                break;
            }
        }
        if r > 0 {
            out.push(b',');
        }
        out.extend(std::iter::repeat_n(b'[', opens + 1));
        for (i, &x) in values[r * last..(r + 1) * last].iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            push_f32(out, x, &mut fmt);
        }
        // Close the row and every dimension that ends with it.
        let mut closes = 0;
        let mut span = 1;
        for &d in outer.iter().rev() {
            if (r + 1) % (span * d) == 0 {
                closes += 1;
                span *= d;
            } else {
                break;
            }
        }
        out.extend(std::iter::repeat_n(b']', closes + 1));
        if flush && out.len() > 1 << 16 {
            w.write_all(out)?;
            out.clear();
        }
    }
    if flush {
        w.write_all(out)?;
    }
    Ok(())
}

/// A bound on the text [`push_f32`] writes: a sign, `0.`, at most 5 zeros (zmij switches to
/// exponent notation below 1e-6) and at most 9 significant digits; exponent notation
/// (`-1.2345678e-38`) and the non-finite strings are shorter.
const MAX_F32_LEN: usize = 17;

fn push_f32(out: &mut Vec<u8>, v: f32, fmt: &mut zmij::Buffer) {
    if v.is_nan() {
        out.extend_from_slice(b"\"nan\"");
    } else if v.is_infinite() {
        out.extend_from_slice(if v > 0.0 { b"\"inf\"" } else { b"\"-inf\"" });
    } else {
        out.extend_from_slice(fmt.format_finite(v).as_bytes());
    }
}

/// The one documented way to write an f32: shortest round-trip decimal, or a string for
/// NaN and the infinities.
pub fn write_f32(w: &mut dyn Write, v: f32, buf: &mut zmij::Buffer) -> io::Result<()> {
    if v.is_nan() {
        w.write_all(b"\"nan\"")
    } else if v.is_infinite() {
        w.write_all(if v > 0.0 { b"\"inf\"" } else { b"\"-inf\"" })
    } else {
        w.write_all(buf.format_finite(v).as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_f32_arrays_follow_the_shape() {
        // The last shape is large enough to take the parallel path.
        for shape in [vec![2usize, 3, 2], vec![1, 1, 4], vec![3], vec![2, 2, 1, 2], vec![3, 301, 300]] {
            let n: usize = shape.iter().product();
            let v: Vec<f32> = (0..n).map(|i| i as f32 - 1.5).collect();
            let mut out = Vec::new();
            write_f32_nested(&mut out, &shape, &v).unwrap();
            let parsed: serde_json::Value = serde_json::from_slice(&out).unwrap();
            // Rebuild the expected nesting from the shape, innermost dimension first.
            let mut expect: Vec<serde_json::Value> = v.iter().map(|&x| serde_json::json!(x)).collect();
            for &d in shape.iter().rev() {
                expect = expect.chunks(d).map(|c| serde_json::Value::Array(c.to_vec())).collect();
            }
            assert_eq!(parsed, expect[0], "{shape:?}");
        }
    }

    #[test]
    fn floats_and_non_finite() {
        let mut out = Vec::new();
        let mut buf = zmij::Buffer::new();
        for v in [0.1f32, -1.0, f32::NEG_INFINITY, f32::NAN, 1e-7] {
            write_f32(&mut out, v, &mut buf).unwrap();
            out.push(b' ');
        }
        assert_eq!(String::from_utf8(out).unwrap(), "0.1 -1.0 \"-inf\" \"nan\" 1e-7 ");
    }
}
