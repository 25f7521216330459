//! The `--focus` walkthrough as text (after the table or heatmap output) and as the JSON
//! document's `"focus"` object. Per head: the query; a table with each key's raw score q·k,
//! the scaled score, the mask term (with --causal), the score minus the row max, its exp and
//! the weight; the sum of the exps; and the context vector as the weighted sum of the value
//! rows, term by term. `--explain` writes the dot products and sums out with their numbers,
//! as seed notebook 003 does by hand. All numbers come from [`Focus`]; nothing is computed.
//!
//! JSON (`"focus"`, one head per line; f32s from the trace as shortest round-trip decimals,
//! derived f64s likewise, `"-inf"` for a masked score):
//! `{"token", "position", "layer", "scale", "key_tokens", "heads": [{"head", "query",
//! "keys", "products", "raw_scores", "scaled", "mask"?, "scores", "max_score", "shifted",
//! "exp", "exp_sum", "weights", "values", "weighted_values", "context", "top_key",
//! "top_terms"}]}`: `top_key` is the key with the largest score, `top_terms` the dimensions
//! of its q·k, largest term first.

use super::numbers::{f32_json, f64_json};
use super::table;
use super::text::wrap_words;
use super::text::{cut, wrap_parts};
use crate::settings::Output;
use crate::trace::steps;
use crate::views::focus::{Focus, FocusHead};
use comfy_table::CellAlignment;
use std::io::{self, Write};

/// A number at the output's precision; −inf for a masked score.
fn num(x: f64, p: usize) -> String {
    super::numbers::fixed(x, p)
}

/// "a×b", with a negative factor in brackets so the signs read.
fn mul(a: f64, b: f64, p: usize) -> String {
    let f = |x: f64| if x < 0.0 { format!("({})", num(x, p)) } else { num(x, p) };
    format!("{}×{}", f(a), f(b))
}

pub fn write(f: &Focus, out: &Output, w: &mut dyn Write) -> io::Result<()> {
    if let Some(r) = &f.pieces {
        let pieces: Vec<&str> = f.labels[r.clone()].iter().map(String::as_str).collect();
        let others: Vec<String> = (r.start + 1..r.end).map(|p| p.to_string()).collect();
        writeln!(w)?;
        lines(
            &format!(
                "The tokenizer splits this word into {} pieces, {} (positions {}–{}): this walks \
                 through the first, {:?}. --focus {} for the others; --merge-pieces shows \
                 attention between whole words.",
                r.len(),
                pieces.join(" "),
                r.start,
                r.end - 1,
                f.labels[f.position],
                others.join(", ")
            ),
            out,
            w,
        )?;
    }
    for h in &f.heads {
        write_head(f, h, out, w)?;
    }
    if let (Some(n), Some(h)) = (f.chosen_from, f.heads.first()) {
        let peak = h.weights.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        writeln!(w)?;
        lines(
            &format!(
                "Head {} of {n} is shown: its largest weight from {:?}, {}, is the highest of \
                 the {n} heads. --head N shows head N, --head 0-{} every head.",
                h.head,
                f.labels[f.position],
                num(peak as f64, out.precision),
                n - 1
            ),
            out,
            w,
        )?;
    }
    Ok(())
}

/// Writes `text` wrapped to the width: a numbered step continues under its words, a sum
/// (indented) further in.
fn lines(text: &str, out: &Output, w: &mut dyn Write) -> io::Result<()> {
    let indent = if text.starts_with(' ') { "      " } else { "   " };
    for line in wrap_words(text, out.width, indent) {
        writeln!(w, "{line}")?;
    }
    Ok(())
}

fn write_head(f: &Focus, h: &FocusHead, out: &Output, w: &mut dyn Write) -> io::Result<()> {
    let (p, i, l, n) = (out.precision, f.position, f.layer, f.keys.len());
    let key = |j: usize| format!("{j} {}", cut(&f.labels[j], 10));
    let vec = |v: &[f32]| v.iter().map(|&x| num(x as f64, p)).collect::<Vec<_>>().join(", ");
    writeln!(w)?;
    // Debug quoting shows control characters escaped; a huge token is cut (JSON has it whole).
    let shown = &f.labels[i];
    let token: String =
        if shown.chars().count() > 40 { shown.chars().take(39).chain(['…']).collect() } else { shown.clone() };
    let title = [format!("focus {token:?} (position {i})"), steps::layer_id(l, "attn"), format!("head {}", h.head)];
    for line in wrap_parts(&title, out.width) {
        writeln!(w, "{line}")?;
    }
    // With rotary positions, q and k are the rotated rows (q_rot, k_rot) that the scores use.
    let q_name = if f.rotated { "q_rot" } else { "q" };
    lines(&format!("query q = row {i} of layers.{l}.attn.{q_name} = [{}]", vec(&h.query)), out, w)?;
    lines(&format!("1. raw scores: q·k_j for every key j (layers.{l}.attn.raw_scores)"), out, w)?;
    if out.views.explain {
        for j in 0..n {
            let terms: Vec<String> =
                h.query.iter().zip(&h.keys[j]).map(|(&a, &b)| mul(a as f64, b as f64, p)).collect();
            lines(&format!("   q·k_{j} = {} = {}", terms.join(" + "), num(h.raw_scores[j] as f64, p)), out, w)?;
        }
        why_top(h, &key, out, w)?;
    }
    lines(&format!("2. scaled: × {} ({})", num(f.scale, p.max(4)), scale_note(f, h)), out, w)?;
    match &h.masked {
        None => lines("3. mask: none, every key is visible", out, w)?,
        Some(m) => {
            let hidden: Vec<String> = (0..n).filter(|&j| m[j]).map(|j| j.to_string()).collect();
            let which = if hidden.is_empty() { "none".to_string() } else { hidden.join(", ") };
            lines(&format!("3. mask (--causal): + −inf for the keys after position {i} (hidden: {which})"), out, w)?;
        }
    }
    lines(
        &format!(
            "4. softmax: subtract the row max {} from every score first (exp of a large score \
             overflows; the shift cancels in the ratio), take exp, divide by their sum",
            num(h.max_score as f64, p)
        ),
        out,
        w,
    )?;
    write_softmax(h, &key, out, w)?;
    lines(
        &format!("5. context: Σ_j weight_j · v_j, the terms and their sum (row {i} of layers.{l}.attn.context)"),
        out,
        w,
    )?;
    write_context(h, &key, out, w)?;
    if out.views.explain {
        for d in 0..h.context.len() {
            let terms: Vec<String> = (0..n).map(|j| mul(h.weights[j] as f64, h.values[j][d] as f64, p)).collect();
            lines(&format!("   c[{d}] = {} = {}", terms.join(" + "), num(h.context[d] as f64, p)), out, w)?;
        }
    }
    Ok(())
}

/// Which terms of q·k make the largest score: the top key's products, largest first (the
/// first five, then the rest summed).
fn why_top(h: &FocusHead, key: &dyn Fn(usize) -> String, out: &Output, w: &mut dyn Write) -> io::Result<()> {
    let (p, j) = (out.precision, h.top_key);
    let terms = &h.products[j];
    let shown: Vec<String> = h
        .top_terms
        .iter()
        .take(5)
        .map(|&d| format!("[{d}] {} = {}", mul(h.query[d] as f64, h.keys[j][d] as f64, p), num(terms[d], p)))
        .collect();
    let rest: Vec<usize> = h.top_terms.iter().skip(5).copied().collect();
    let tail = if rest.is_empty() {
        String::new()
    } else {
        format!("; the other {} sum to {}", rest.len(), num(rest.iter().map(|&d| terms[d]).sum(), p))
    };
    lines(
        &format!(
            "   why key {} scores highest (q·k = {}): its terms q[d]×k[d], largest first: {}{tail}",
            key(j).split_once(' ').map_or(key(j), |(pos, word)| format!("{pos} ({word})")),
            num(h.raw_scores[j] as f64, p),
            shown.join(", ")
        ),
        out,
        w,
    )
}

/// Step 4's table: per key the score at each stage, the exp and the weight, then the sums;
/// with --explain, the sum of exps and one weight written out.
fn write_softmax(h: &FocusHead, key: &dyn Fn(usize) -> String, out: &Output, w: &mut dyn Write) -> io::Result<()> {
    let (p, n) = (out.precision, h.weights.len());
    // The softmax table: one row per key, then the sums.
    let f = |v: &[f64]| -> Vec<String> { v.iter().map(|&x| num(x, p)).collect() };
    let f32s = |v: &[f32]| -> Vec<String> { v.iter().map(|&x| num(x as f64, p)).collect() };
    let mut cols = vec![("q·k_j", f32s(&h.raw_scores)), ("× scale", f32s(&h.scaled))];
    if h.masked.is_some() {
        cols.push(("+ mask", f32s(&h.scores)));
    }
    cols.extend([("− max", f(&h.shifted)), ("exp", f(&h.exps)), ("weight", f32s(&h.weights))]);
    let wsum: f64 = h.weights.iter().map(|&x| x as f64).sum();
    let last = cols.len() - 1;
    for (i, (_, cells)) in cols.iter_mut().enumerate() {
        cells.push(match i {
            _ if i == last => num(wsum, p),
            _ if i + 1 == last => num(h.exp_sum, p),
            _ => String::new(),
        });
    }
    let mut labels: Vec<String> = (0..n).map(key).collect();
    labels.push("sum".into());
    columns("key j", &labels, &cols, out.width, w)?;
    if out.views.explain {
        let exps: Vec<String> = h.exps.iter().map(|&e| num(e, p)).collect();
        lines(&format!("   Σ exp = {} = {}", exps.join(" + "), num(h.exp_sum, p)), out, w)?;
        let j = h.weights.iter().enumerate().fold(0, |b, (j, &x)| if x > h.weights[b] { j } else { b });
        lines(
            &format!(
                "   e.g. weight_{j} = {} / {} = {}",
                num(h.exps[j], p),
                num(h.exp_sum, p),
                num(h.weights[j] as f64, p)
            ),
            out,
            w,
        )?;
    }
    Ok(())
}

/// Says where the scale comes from: 1/√d_k unless --scale set another.
fn scale_note(f: &Focus, h: &FocusHead) -> String {
    let d_k = h.query.len();
    if (f.scale - 1.0 / (d_k as f64).sqrt()).abs() < 1e-12 {
        format!("= 1/√d_k = 1/√{d_k}")
    } else {
        "--scale".to_string()
    }
}

/// The terms w_j·v_j[d] in key rows and value columns, then the context vector.
fn write_context(h: &FocusHead, key: &dyn Fn(usize) -> String, out: &Output, w: &mut dyn Write) -> io::Result<()> {
    let (p, n) = (out.precision, h.values.len());
    let mut cols = vec![("weight".to_string(), h.weights.iter().map(|&x| num(x as f64, p)).collect::<Vec<_>>())];
    cols[0].1.push(String::new());
    for (d, &c) in h.context.iter().enumerate() {
        let mut cells: Vec<String> = h.weighted.iter().map(|row| num(row[d], p)).collect();
        cells.push(num(c as f64, p));
        cols.push((format!("w·v[{d}]"), cells));
    }
    let mut labels: Vec<String> = (0..n).map(key).collect();
    labels.push("= context".into());
    columns("key j", &labels, &cols, out.width, w)
}

/// Writes labelled columns as tables, as many columns to a table as fit `width`.
fn columns<S: AsRef<str>>(
    corner: &str,
    labels: &[String],
    cols: &[(S, Vec<String>)],
    width: usize,
    w: &mut dyn Write,
) -> io::Result<()> {
    let col_w: Vec<usize> = cols
        .iter()
        .map(|(h, c)| c.iter().map(|x| x.chars().count()).chain([h.as_ref().chars().count()]).max().unwrap_or(1))
        .collect();
    let label_w = labels.iter().map(|l| l.chars().count()).chain([corner.len()]).max().unwrap_or(1);
    let mut start = 0;
    while start < cols.len() {
        // Each column costs its width, a space either side and the rule before it.
        let mut end = start + 1;
        let mut used = label_w + 1 + col_w[start] + 3;
        while end < cols.len() && used + col_w[end] + 3 <= width {
            used += col_w[end] + 3;
            end += 1;
        }
        let mut t = table::new_table();
        let mut header = vec![corner.to_string()];
        header.extend(cols[start..end].iter().map(|(h, _)| h.as_ref().to_string()));
        t.set_header(header);
        for (r, label) in labels.iter().enumerate() {
            let mut row = vec![label.clone()];
            row.extend(cols[start..end].iter().map(|(_, c)| c[r].clone()));
            t.add_row(row);
        }
        align(&mut t, end - start + 1);
        table::emit(&t, width, w)?;
        start = end;
    }
    Ok(())
}

fn align(t: &mut comfy_table::Table, cols: usize) {
    if let Some(c) = t.column_mut(0) {
        c.set_padding((0, 1));
    }
    for c in 1..cols {
        if let Some(col) = t.column_mut(c) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// The `"focus"` object of the JSON document.
pub fn to_json(f: &Focus) -> String {
    let mut heads = Vec::new();
    for h in &f.heads {
        let mut o = format!("{{\"head\": {}, \"query\": {}", h.head, f32s(&h.query));
        o += &format!(", \"keys\": {}, \"products\": {}", rows(&h.keys, f32s), rows(&h.products, f64s));
        o += &format!(", \"raw_scores\": {}, \"scaled\": {}", f32s(&h.raw_scores), f32s(&h.scaled));
        if let Some(m) = &h.masked {
            o += &format!(", \"mask\": {}", serde_json::to_string(m).unwrap_or_default());
        }
        o += &format!(", \"scores\": {}, \"max_score\": {}", f32s(&h.scores), f32_json(h.max_score));
        o += &format!(", \"shifted\": {}, \"exp\": {}", f64s(&h.shifted), f64s(&h.exps));
        o += &format!(", \"exp_sum\": {}, \"weights\": {}", f64_json(h.exp_sum), f32s(&h.weights));
        o += &format!(", \"values\": {}, \"weighted_values\": {}", rows(&h.values, f32s), rows(&h.weighted, f64s));
        o += &format!(", \"context\": {}", f32s(&h.context));
        o += &format!(", \"top_key\": {}, \"top_terms\": {:?}}}", h.top_key, h.top_terms);
        heads.push(o);
    }
    format!(
        "{{\"token\": {}, \"position\": {}, \"layer\": {}, \"scale\": {}, \"key_tokens\": {}, \"heads\": [\n    {}\n  ]}}",
        serde_json::to_string(&f.token).unwrap_or_default(),
        f.position,
        f.layer,
        f64_json(f.scale),
        serde_json::to_string(&f.keys).unwrap_or_default(),
        heads.join(",\n    ")
    )
}

fn rows<T>(v: &[Vec<T>], each: fn(&[T]) -> String) -> String {
    format!("[{}]", v.iter().map(|r| each(r)).collect::<Vec<_>>().join(","))
}

fn f32s(v: &[f32]) -> String {
    format!("[{}]", v.iter().map(|&x| f32_json(x)).collect::<Vec<_>>().join(","))
}

fn f64s(v: &[f64]) -> String {
    format!("[{}]", v.iter().map(|&x| f64_json(x)).collect::<Vec<_>>().join(","))
}
