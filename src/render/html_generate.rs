//! The page's generation view (`--generate` with `--html`): the prompt and the generated
//! text as a line of token spans, the generated ones marked, each titled with its
//! probability and runner-ups; a layer menu and a head menu (each with its mean), the page's
//! shared 0–1 scale toggle and a toggle that leaves the first token (an attention sink) out
//! of the scale; and a layer × head grid of strips, one per head, each the head's row. Hovering
//! or clicking a generated token colours every token before it by the attention row of the
//! step that chose it (`views::generate::rows`); html_generate.js draws it all from the
//! section's `gen-data` block, which holds every row as the JSON document writes its weights.

use super::colour::VIRIDIS;
use super::numbers::f32_json;
use super::text::esc;
use crate::trace::Trace;
use crate::views::generate::{labels, GenerationRows, TokenRows};
use std::fmt::Write as _;

/// The section, its element ids ending in `sfx` as the rest of the page's.
pub fn section(trace: &Trace, rows: &GenerationRows, precision: usize, sfx: &str) -> String {
    let Some(g) = &trace.generation else { return String::new() };
    let mut s = String::new();
    let _ = writeln!(s, "<section id=\"generation{sfx}\" class=\"generation\">\n<h2>Generation</h2>");
    let _ = writeln!(
        s,
        "<p class=\"rule\">{} tokens generated after the {}-token prompt (underlined). Hover one to colour every \
         token before it by the attention of the step that chose it; click it to keep it while you hover the \
         others for their weights. The grid beside draws that step's row for every layer and head (click a strip \
         to show it).</p>",
        g.tokens.len(),
        g.prompt_tokens
    );
    let _ = writeln!(s, "<div class=\"controls\"><label>Layer <select id=\"gen-layer{sfx}\"></select></label>");
    let _ = writeln!(s, "<label>Head <select id=\"gen-head{sfx}\"></select></label>");
    let _ = writeln!(s, "<label><input type=\"checkbox\" id=\"gen-shared{sfx}\"> shared 0–1 colour scale</label>");
    let _ = writeln!(
        s,
        "<label><input type=\"checkbox\" id=\"gen-sink{sfx}\"> scale without the first token</label></div>"
    );
    let _ = writeln!(s, "<p class=\"rule\" id=\"gen-scale-rule{sfx}\"></p>");
    let _ =
        write!(s, "<div class=\"gen-view\">\n<div class=\"gen-left\">\n<p id=\"gen-text{sfx}\" class=\"gen-text\">");
    tokens(&mut s, trace, precision);
    let _ = writeln!(s, "</p>\n<div id=\"gen-tip{sfx}\" class=\"tip\">Hover a token to see its weight.</div>\n</div>");
    let _ = writeln!(s, "<div id=\"gen-grid{sfx}\" class=\"gen-grid\"></div>\n</div>");
    // As the maps' block: `<` escaped, so that no token's text closes the script.
    let data = data_json(rows, g.prompt_tokens, precision).replace('<', "\\u003c");
    let _ = writeln!(s, "<script id=\"gen-data{sfx}\" type=\"application/json\">{data}</script>\n</section>");
    s
}

/// The prompt's and the generated tokens' spans; a generated one is titled with its
/// position, probability and runner-ups, and can take the keyboard's focus.
fn tokens(s: &mut String, trace: &Trace, precision: usize) {
    let Some(g) = &trace.generation else { return };
    let labels = labels(trace);
    for (k, label) in labels.iter().enumerate().take(g.prompt_tokens) {
        let _ = write!(s, "<span class=\"tok\" data-pos=\"{k}\">{}</span>", esc(label));
    }
    for (i, t) in g.tokens.iter().enumerate() {
        let p = |x: f32| format!("{x:.precision$}");
        let others: Vec<String> = t
            .candidates
            .iter()
            .filter(|c| c.id != t.chosen.id)
            .map(|c| format!("{} {}", c.label().unwrap_or_else(|| format!("#{}", c.id)), p(c.prob)))
            .collect();
        let mut title =
            format!("generated token {} at position {}, probability {}", i + 1, t.position, p(t.chosen.prob));
        if !others.is_empty() {
            let _ = write!(title, "; runner-ups: {}", others.join(", "));
        }
        let label = labels.get(g.prompt_tokens + i).map_or("", String::as_str);
        let _ = write!(
            s,
            "<span class=\"tok gen\" data-pos=\"{}\" data-gen=\"{i}\" tabindex=\"0\" title=\"{}\">{}</span>",
            g.prompt_tokens + i,
            esc(&title),
            esc(label)
        );
    }
}

/// What the script draws from: the recorded layers and heads, the scale's colours, and per
/// generated token (null when its step's weights are missing) `heads` (`[layer][head]`
/// rows), `mean_heads` (`[layer]`) and `mean`; token i's rows have `prompt + i` weights.
fn data_json(rows: &GenerationRows, prompt: usize, precision: usize) -> String {
    let colors: Vec<String> = VIRIDIS.iter().map(|c| format!("[{},{},{}]", c[0], c[1], c[2])).collect();
    let list = |v: &[usize]| v.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
    let tokens: Vec<String> = rows.tokens.iter().map(|t| t.as_ref().map_or("null".to_string(), token_json)).collect();
    format!(
        "{{\"precision\":{precision},\"prompt\":{prompt},\"layers\":[{}],\"heads\":[{}],\"colors\":[{}],\"tokens\":[\n{}]}}",
        list(&rows.layers),
        list(&rows.heads),
        colors.join(","),
        tokens.join(",\n")
    )
}

fn token_json(t: &TokenRows) -> String {
    let row = |r: &[f32]| format!("[{}]", r.iter().map(|&v| f32_json(v)).collect::<Vec<_>>().join(","));
    let rows = |rs: &[Vec<f32>]| format!("[{}]", rs.iter().map(|r| row(r)).collect::<Vec<_>>().join(","));
    let heads: Vec<String> = t.heads.iter().map(|l| rows(l)).collect();
    format!("{{\"heads\":[{}],\"mean_heads\":{},\"mean\":{}}}", heads.join(","), rows(&t.mean_heads), row(&t.mean))
}
