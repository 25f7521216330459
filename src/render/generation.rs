//! A generation (`--generate`): the text it wrote, each token with its probability, the
//! runner-up tokens and the earlier tokens its step attended to most, as a table; and the
//! document's `generation` object, whose decode steps hold step objects exactly as `steps`
//! does, ids prefixed `gen.{t}.` (docs/OUTPUT.md, "Generation").

use super::numbers::{f32_json, f64_json};
use super::predictions::prediction_json;
use super::table;
use super::text::{cut, printable, wrap_words};
use crate::config::Strategy;
use crate::trace::generation::Generation;
use crate::trace::{Prediction, Trace};
use crate::views::generation::TokenSources;
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
    for line in wrap_words(&format!("{}⟦{}⟧", printable(prompt), printable(&g.text)), width, "  ") {
        writeln!(w, "  {line}")?;
    }
    if let Some(b) = &g.baseline {
        write_baseline(g, b, width, w)?;
    }
    let labels = crate::views::generation::labels(trace);
    let mut t = table::new_table();
    t.set_header(vec![
        "pos",
        "token",
        "prob",
        "runner-up tokens",
        "looked at most (mean over layers and heads; not the first token)",
    ]);
    let room = width.saturating_sub(6 + 14 + 8 + 4) / 2;
    for (i, tok) in g.tokens.iter().enumerate() {
        let others: Vec<&Prediction> = tok.candidates.iter().filter(|c| c.id != tok.chosen.id).collect();
        let runner = fit(others.iter().map(|p| format!("{} {:.2}", super::predictions::label(p), p.prob)), room);
        let looked = sources.and_then(|s| s.get(i)).map_or(String::new(), |s| {
            fit(s.overall.iter().map(|&(k, v)| format!("{}@{k} {v:.2}", cut(&labels[k], 12))), room)
        });
        t.add_row(vec![
            tok.position.to_string(),
            super::predictions::label(&tok.chosen),
            format!("{:.3}", tok.chosen.prob),
            runner,
            looked,
        ]);
    }
    table::emit(&t, w)
}

/// `--baseline`'s lines: the text without the interventions and where the two part.
fn write_baseline(
    g: &Generation,
    b: &crate::trace::generation::Baseline,
    width: usize,
    w: &mut dyn Write,
) -> io::Result<()> {
    writeln!(w, "without the interventions:")?;
    for line in wrap_words(&format!("⟦{}⟧", printable(&b.text)), width, "  ") {
        writeln!(w, "  {line}")?;
    }
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

/// Items joined by two spaces, as many as fit in `room` characters.
fn fit(items: impl Iterator<Item = String>, room: usize) -> String {
    let mut cell = String::new();
    for item in items {
        let sep = if cell.is_empty() { "" } else { "  " };
        if !cell.is_empty() && cell.chars().count() + sep.len() + item.chars().count() > room {
            break;
        }
        cell.push_str(sep);
        cell.push_str(&item);
    }
    cell
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
