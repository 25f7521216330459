//! The page's predictions (`--html` of a model with a language-model head): what the model
//! said, above how it attended. The next-token (or masked-word) table the terminal prints,
//! a row per position with its top-k tokens, each labelled as the tables label tokens and
//! with its probability as they print it (`·Paris 0.77`); and with `--generate`, each
//! generated token with its probability and its runner-ups (the generation view shows them
//! only on hover). Everything comes from the trace (`Trace::predictions`, the generation's
//! candidates); a model without a head has no predictions and the page no such section.

use super::predictions::shown;
use super::text::esc;
use crate::trace::{Prediction, Trace};
use std::fmt::Write as _;

/// The section, its element ids ending in `sfx` as the rest of the page's; empty without
/// predictions.
pub fn section(trace: &Trace, sfx: &str) -> String {
    let Some(rows) = &trace.predictions else { return String::new() };
    let mut s = String::new();
    let k = rows.first().map_or(0, |r| r.len());
    let masked = trace.config.parts.masked_lm;
    let (h2, what) = if masked {
        ("Masked-word predictions", "the most likely fillers of each [MASK] position")
    } else {
        ("Next-token predictions", "the most likely next tokens after each position")
    };
    let _ = writeln!(s, "<section id=\"predictions{sfx}\" class=\"predictions\">\n<h2>{h2}</h2>");
    let _ = writeln!(s, "<p class=\"rule\">Top {k} per position: {what}, each with its probability.</p>");
    s.push_str("<table class=\"predictions\"><thead><tr><th>pos</th><th>token</th>");
    for r in 1..=k {
        let _ = write!(s, "<th>{r}</th>");
    }
    s.push_str("</tr></thead><tbody>\n");
    for i in shown(trace) {
        let _ = write!(s, "<tr><th>{i}</th><th>{}</th>", esc(&trace.label(i)));
        for p in &rows[i] {
            let _ = write!(s, "<td>{}</td>", esc(&item(p)));
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody></table>\n");
    generated(&mut s, trace);
    s.push_str("</section>\n");
    s
}

/// `--generate`: a row per generated token, its probability and its runner-ups.
fn generated(s: &mut String, trace: &Trace) {
    let Some(g) = &trace.generation else { return };
    let _ = writeln!(
        s,
        "<h3>Generated tokens</h3>\n<p class=\"rule\">{} tokens after the {}-token prompt: each with the \
         probability the step that chose it gave it, then the runner-ups.</p>",
        g.tokens.len(),
        g.prompt_tokens
    );
    s.push_str("<table class=\"predictions\"><thead><tr><th>pos</th><th>token</th><th>prob</th>");
    s.push_str("<th>runner-up tokens</th></tr></thead><tbody>\n");
    for t in &g.tokens {
        let _ = write!(
            s,
            "<tr><th>{}</th><th>{}</th><td>{:.3}</td><td>",
            t.position,
            esc(&label(&t.chosen)),
            t.chosen.prob
        );
        let others: Vec<String> = t.candidates.iter().filter(|c| c.id != t.chosen.id).map(|c| esc(&item(c))).collect();
        s.push_str(&others.join("&nbsp; "));
        s.push_str("</td></tr>\n");
    }
    s.push_str("</tbody></table>\n");
}

/// A predicted token's label, whole (the page has room), else `#id`.
fn label(p: &Prediction) -> String {
    p.label().unwrap_or_else(|| format!("#{}", p.id))
}

/// A prediction as the terminal's tables print it: its label and its probability to two
/// decimals.
fn item(p: &Prediction) -> String {
    format!("{} {:.2}", label(p), p.prob)
}
