//! A generation (`--generate`): the text it wrote, each token with its probability, the
//! runner-up tokens and the earlier tokens its step attended to most, as a table; and the
//! document's `generation` object, whose decode steps hold step objects exactly as `steps`
//! does, ids prefixed `gen.{t}.` (docs/OUTPUT.md, "Generation").

use super::numbers::{f32_json, f64_json};
use super::predictions::prediction_json;
use super::table;
use super::text::{cut, fill, header, printable, wrap_words};
use crate::config::Strategy;
use crate::trace::generate::Generation;
use crate::trace::Trace;
use crate::views::generate::TokenSources;
use std::io::{self, Write};

/// The table: the prompt and what was generated, then one row per generated token.
pub fn write(trace: &Trace, sources: Option<&[TokenSources]>, width: usize, w: &mut dyn Write) -> io::Result<()> {
    let Some(g) = &trace.generation else { return Ok(()) };
    writeln!(w)?;
    let how = match g.strategy {
        Strategy::Greedy => "greedy".to_string(),
        Strategy::Sample { temperature, top_p, top_k, seed } => {
            format!("sampled: temperature {temperature}, top-p {top_p}, top-k {top_k}, seed {seed}")
        }
    };
    let stop = match g.stop {
        "eos" => "stopped at the end-of-sequence token",
        "positions" => "stopped at the model's last position",
        _ => "stopped at the length asked for",
    };
    let title =
        format!("generated {} tokens after the {}-token prompt ({how}; {stop}):", g.tokens.len(), g.prompt_tokens);
    for line in wrap_words(&title, width, "") {
        writeln!(w, "{line}")?;
    }
    let prompt = trace.sentence.as_deref().unwrap_or_default();
    indented(&format!("{}⟦{}⟧", printable(prompt), printable(&g.text)), width, w)?;
    if let Some(b) = &g.baseline {
        write_baseline(g, b, width, w)?;
    }
    if sources.is_some() {
        let rule = "looked at most: the earlier tokens (label@position) its step's attention weighed most, mean \
                    over layers and heads, not the first token";
        for line in wrap_words(rule, width, "  ") {
            writeln!(w, "{line}")?;
        }
    }
    write_table(trace, sources, width, w)
}

/// One row per generated token: its position, label and probability, every runner-up and
/// (with `sources`) the tokens its step looked at most, each cell on as many lines as the
/// width needs; where the two lists would get less than [`NARROW`] columns each, they are
/// two tables, one after the other.
fn write_table(trace: &Trace, sources: Option<&[TokenSources]>, width: usize, w: &mut dyn Write) -> io::Result<()> {
    let Some(g) = &trace.generation else { return Ok(()) };
    let labels = crate::views::generate::labels(trace);
    let chosen: Vec<String> = g.tokens.iter().map(|t| super::predictions::label(&t.chosen)).collect();
    let pos_w = g.tokens.last().map_or(1, |t| t.position.to_string().len()).max("pos".len());
    let token_w = chosen.iter().map(|c| c.chars().count()).max().unwrap_or(0).max("token".len());
    let fixed = [pos_w, token_w, "0.000".len()];
    // What `n` lists side by side each get of what the other columns leave.
    let room = |n: usize| (table::room(&fixed, width, 0) + table::CELL_COST).saturating_sub(n * table::CELL_COST) / n;
    let parts: Vec<Vec<usize>> = match sources {
        None => vec![vec![0]],
        Some(_) if room(2) >= NARROW => vec![vec![0, 1]],
        Some(_) => vec![vec![0], vec![1]],
    };
    for (n, part) in parts.into_iter().enumerate() {
        if n > 0 {
            writeln!(w)?;
        }
        let room = room(part.len()).max(8);
        let names = ["runner-up tokens", "looked at most"];
        let mut t = table::new_table();
        let mut header_row = vec!["pos".to_string(), "token".to_string(), "prob".to_string()];
        header_row.extend(part.iter().map(|&c| header(names[c], room)));
        t.set_header(header_row);
        for (i, (tok, label)) in g.tokens.iter().zip(&chosen).enumerate() {
            let mut row = vec![tok.position.to_string(), label.clone(), format!("{:.3}", tok.chosen.prob)];
            for &c in &part {
                row.push(if c == 0 {
                    let others = tok.candidates.iter().filter(|c| c.id != tok.chosen.id);
                    fill(others.map(|p| super::predictions::item(p, room)), room)
                } else {
                    let looked = sources.and_then(|s| s.get(i)).map_or(&[][..], |s| &s.overall[..]);
                    fill(looked.iter().map(|&(k, v)| source(&labels[k], k, v, room)), room)
                });
            }
            t.add_row(row);
        }
        table::emit(&t, width, w)?;
    }
    Ok(())
}

/// The fewest columns a list of runner-ups or sources gets beside the other (`·France@3 0.08`).
const NARROW: usize = 14;

/// A source as a cell shows it, `·France@3 0.08`, its label cut shorter where `room` is too
/// narrow for the whole, so that the position and the weight always show.
fn source(label: &str, k: usize, v: f32, room: usize) -> String {
    let tail = format!("@{k} {v:.2}");
    format!("{}{tail}", cut(label, room.saturating_sub(tail.chars().count()).clamp(4, 12)))
}

/// `text` wrapped under a two-space indent (its later lines under four), within `width`.
fn indented(text: &str, width: usize, w: &mut dyn Write) -> io::Result<()> {
    for line in wrap_words(text, width.saturating_sub(2), "  ") {
        writeln!(w, "  {line}")?;
    }
    Ok(())
}

/// `--baseline`'s lines: the text without the interventions and where the two part.
fn write_baseline(
    g: &Generation,
    b: &crate::trace::generate::Baseline,
    width: usize,
    w: &mut dyn Write,
) -> io::Result<()> {
    writeln!(w, "without the interventions:")?;
    indented(&format!("⟦{}⟧", printable(&b.text)), width, w)?;
    let line = match b.parted_at {
        Some(i) => format!(
            "they part at generated token {} (position {}): {} instead of {}, to which the intervened run gave \
             probability {}",
            i + 1,
            g.prompt_tokens + i,
            g.tokens.get(i).map_or_else(|| "(none)".to_string(), |t| super::predictions::label(&t.chosen)),
            b.tokens.get(i).map_or_else(|| "(none)".to_string(), super::predictions::label),
            b.prob_there.map_or("?".to_string(), |p| format!("{p:.4}")),
        ),
        None => "the two generations agree on every token".to_string(),
    };
    for l in wrap_words(&line, width, "  ") {
        writeln!(w, "{l}")?;
    }
    Ok(())
}

/// The `generation` object: see docs/OUTPUT.md, "Generation".
pub fn to_json(trace: &Trace, sources: Option<&[TokenSources]>) -> Option<String> {
    to_json_with(trace, sources, true)
}

/// The `generation` object, with its decode steps' values (`steps`) only when `steps` is set
/// (the Python API hands them over as arrays instead).
pub fn to_json_with(trace: &Trace, sources: Option<&[TokenSources]>, steps: bool) -> Option<String> {
    let g = trace.generation.as_ref()?;
    let mut out = String::from("{");
    out.push_str(&format!("\"prompt_tokens\": {}, \"stop\": \"{}\", ", g.prompt_tokens, g.stop));
    out.push_str(&format!("\"strategy\": {}, ", strategy_json(&g.strategy)));
    out.push_str(&format!("\"text\": {},\n", serde_json::to_string(&g.text).ok()?));
    let tokens: Vec<String> = g
        .tokens
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let chosen = prediction_json(&t.chosen);
            let cands: Vec<String> = t.candidates.iter().map(prediction_json).collect();
            let looked = sources.and_then(|s| s.get(i)).map_or("null".to_string(), sources_json);
            format!(
                "    {{\"position\": {}, {}, \"candidates\": [{}], \"sources\": {looked}}}",
                t.position,
                &chosen[1..chosen.len() - 1],
                cands.join(", ")
            )
        })
        .collect();
    out.push_str(&format!("   \"tokens\": [\n{}\n   ],\n", tokens.join(",\n")));
    if let Some(b) = &g.baseline {
        let toks: Vec<String> = b.tokens.iter().map(prediction_json).collect();
        out.push_str(&format!(
            "   \"baseline\": {{\"text\": {}, \"tokens\": [{}], \"parted_at\": {}, \"prob_there\": {}}},\n",
            serde_json::to_string(&b.text).ok()?,
            toks.join(", "),
            b.parted_at.map_or("null".to_string(), |i| i.to_string()),
            b.prob_there.map_or("null".to_string(), f32_json),
        ));
    }
    out.push_str("   \"steps\": [");
    for (j, d) in g.steps.iter().enumerate().filter(|_| steps) {
        out.push_str(if j == 0 { "\n" } else { ",\n" });
        out.push_str(&format!("    {{\"step\": {}, \"position\": {}, \"steps\": [", d.step, d.position));
        for (k, s) in d.steps.iter().enumerate() {
            let mut buf = Vec::new();
            super::json::write_step(s, &mut buf).ok()?;
            out.push_str(if k == 0 { "\n      " } else { ",\n      " });
            out.push_str(std::str::from_utf8(&buf).ok()?);
        }
        out.push_str("]}");
    }
    out.push_str("\n   ]}");
    Some(out)
}

fn strategy_json(s: &Strategy) -> String {
    match *s {
        Strategy::Greedy => "{\"sample\": false}".to_string(),
        Strategy::Sample { temperature, top_p, top_k, seed } => format!(
            "{{\"sample\": true, \"temperature\": {}, \"top_p\": {}, \"top_k\": {top_k}, \"seed\": {seed}}}",
            f64_json(temperature),
            f64_json(top_p)
        ),
    }
}

/// A token's sources: `{"overall": [[pos, weight], …], "layers": [{"layer", "top"}, …]}`.
fn sources_json(s: &TokenSources) -> String {
    let pairs = |v: &[(usize, f32)]| -> String {
        let items: Vec<String> = v.iter().map(|&(k, x)| format!("[{k}, {}]", f32_json(x))).collect();
        format!("[{}]", items.join(", "))
    };
    let layers: Vec<String> =
        s.layers.iter().map(|l| format!("{{\"layer\": {}, \"top\": {}}}", l.layer, pairs(&l.top))).collect();
    format!("{{\"overall\": {}, \"layers\": [{}]}}", pairs(&s.overall), layers.join(", "))
}
