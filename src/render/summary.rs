//! The default table view of a real model: instead of layers × heads × a dozen full tables,
//! one table per layer with a row per head: the head's three strongest links between
//! ordinary tokens (query → key, weight), leaving out a token's attention to itself and the
//! [CLS]/[SEP]-style markers, and the mean weight the head puts on those markers (BERT heads
//! often park attention there, which would otherwise fill every "strongest" list).
//! `--steps` brings back the full tables; JSON always holds every number.

use super::table;
use crate::trace::{Step, Trace};
use comfy_table::CellAlignment;
use std::io::{self, Write};

/// Links shown per head.
const TOP: usize = 3;

fn is_marker(token: &str) -> bool {
    token.len() > 2
        && token.starts_with('[')
        && token.ends_with(']')
        && token[1..token.len() - 1].chars().all(|c| c.is_ascii_uppercase())
}

pub fn write(trace: &Trace, width: usize, w: &mut dyn Write) -> io::Result<()> {
    table::write_header(trace, width, w)?;
    table::write_tokens(trace, width, w)?;
    let markers: Vec<bool> = trace.tokens.iter().map(|t| is_marker(t)).collect();
    // Positions disambiguate repeated words ("my(0)" and "my(4)").
    let label = |i: usize| format!("{}({i})", table::cut(&trace.tokens[i], 10));
    // The links column gets what the head and markers columns leave of the width.
    let room = width.saturating_sub(6 + 10 + 3);
    for step in trace.steps.iter().filter(|s| s.name == "attn.weights") {
        let layer = step.layer.unwrap_or(0);
        writeln!(w)?;
        let title = [format!("layer {layer}"), "strongest links (query → key)".into(), "mean weight on markers".into()];
        for line in table::wrap_parts(&title, width) {
            writeln!(w, "{line}")?;
        }
        let mut t = table::new_table();
        t.set_header(vec!["head", "strongest links between words", "markers"]);
        for (h, top, on_markers) in heads(step, &markers) {
            let mut links = String::new();
            for &(q, k, v) in &top {
                let link = format!("{}→{} {v:.2}", label(q), label(k));
                let sep = if links.is_empty() { "" } else { "  " };
                if links.chars().count() + sep.len() + link.chars().count() > room {
                    break;
                }
                links.push_str(sep);
                links.push_str(&link);
            }
            t.add_row(vec![h.to_string(), links, format!("{on_markers:.2}")]);
        }
        if let Some(col) = t.column_mut(2) {
            col.set_cell_alignment(CellAlignment::Right);
        }
        table::emit(&t, w)?;
    }
    // Short lines, so the hint fits the narrowest --width (40).
    writeln!(
        w,
        "\nEvery number: --format json.\nFull tables: --steps all, or e.g.\n  --steps weights --layer 0 --head 1"
    )?;
    Ok(())
}

/// A head's strongest links as (query, key, weight).
type Links = Vec<(usize, usize, f32)>;

/// For each head of an `attn.weights` step: (head number, top links, mean weight on markers).
fn heads(step: &Step, markers: &[bool]) -> Vec<(usize, Links, f32)> {
    let Some(v) = step.f32s() else { return Vec::new() };
    let (groups, n) = (step.shape[0], step.shape[1]);
    let ordinary: Vec<usize> = (0..n).filter(|&i| !markers.get(i).copied().unwrap_or(false)).collect();
    (0..groups)
        .map(|g| {
            let m = &v[g * n * n..(g + 1) * n * n];
            let mut links: Vec<(usize, usize, f32)> = ordinary
                .iter()
                .flat_map(|&q| ordinary.iter().filter(move |&&k| k != q).map(move |&k| (q, k, m[q * n + k])))
                .collect();
            // Largest first; ties by position, so the choice is the same on every machine.
            links.sort_by(|a, b| b.2.total_cmp(&a.2).then((a.0, a.1).cmp(&(b.0, b.1))));
            links.truncate(TOP);
            let on_markers =
                (0..n).map(|q| (0..n).filter(|&k| markers[k]).map(|k| m[q * n + k]).sum::<f32>()).sum::<f32>()
                    / n as f32;
            let h = step.heads.as_ref().map_or(g, |hs| hs[g]);
            (h, links, on_markers)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn markers() {
        assert!(super::is_marker("[CLS]") && super::is_marker("[SEP]"));
        assert!(!super::is_marker("[x]") && !super::is_marker("shoes") && !super::is_marker("[]"));
    }
}
