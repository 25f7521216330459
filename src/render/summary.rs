//! The default table view of a real model: instead of layers × heads × a dozen full tables,
//! one table per layer with a row per head, from [`crate::views::summary`]: the head's three
//! strongest links between ordinary tokens and its mean weight on the markers; for a mixture
//! of experts, a second table per layer: the experts each token went to, with their weights.
//! `--steps` brings back the full tables; JSON always holds every number.

use super::table;
use super::text::{cut, fill, header, line, wrap_parts};
use crate::trace::Trace;
use crate::views::stacks::{Aligned, Stacks};
use crate::views::summary::{HeadLinks, LayerLinks, Routing};
use comfy_table::CellAlignment;
use std::io::{self, Write};

/// An encoder–decoder's links are of the attention `--stack` names, labelled by its tokens
/// (`stacks.seen`), and followed by the alignment table.
pub fn write(
    (trace, stacks): (&Trace, Option<&Stacks>),
    summary: &[LayerLinks],
    width: usize,
    w: &mut dyn Write,
) -> io::Result<()> {
    table::write_header(trace, width, w)?;
    table::write_tokens(trace, width, w)?;
    let shown = trace;
    let trace = stacks.map_or(trace, |s| &s.seen);
    // Positions disambiguate repeated words ("my(0)" and "my(4)").
    let label = |i: usize| format!("{}({i})", cut(&trace.label(i), 10));
    let key = |i: usize| format!("{}({i})", cut(&trace.key_label(i), 10));
    // The links column gets what the head and markers columns leave of the width.
    let room = table::room(&["head".len(), "markers".len()], width, 8);
    for LayerLinks { layer, heads, marker, routing } in summary {
        writeln!(w)?;
        let title =
            [format!("layer {layer}"), "strongest links (query → key)".into(), format!("mean weight on {marker}")];
        for line in wrap_parts(&title, width) {
            writeln!(w, "{line}")?;
        }
        let mut t = table::new_table();
        // BERT's column keeps its name; a decoder's says which token it measures.
        t.set_header(vec![
            "head".to_string(),
            header("strongest links between words", room),
            (if *marker == "markers" { "markers" } else { "pos 0" }).to_string(),
        ]);
        for HeadLinks { head: h, links: top, on_markers } in heads {
            let links: Vec<String> = top.iter().map(|&(q, k, v)| format!("{}→{} {v:.2}", label(q), key(k))).collect();
            t.add_row(vec![h.to_string(), line(&links, room), format!("{on_markers:.2}")]);
        }
        if let Some(col) = t.column_mut(2) {
            col.set_cell_alignment(CellAlignment::Right);
        }
        table::emit(&t, width, w)?;
        if let Some(routing) = routing {
            write_routing(*layer, routing, &label, width, w)?;
        }
    }
    if let Some(s) = stacks {
        write_alignment(shown, &s.alignment, width, w)?;
    }
    write_hint(false, w)
}

/// The closing lines of a default view (no `--steps`): where every number is, and how to get
/// the other tables. A real model's summary points to the full tables; a toy model's default
/// view, which is every table already (`Views::default_tables`), to fewer: its example names
/// head 0, which every model has.
pub fn write_hint(every_table_shown: bool, w: &mut dyn Write) -> io::Result<()> {
    let (tables, example) = if every_table_shown {
        ("Fewer tables: --steps weights, or e.g.", "--steps weights --layer 0 --head 0")
    } else {
        ("Full tables: --steps all, or e.g.", "--steps weights --layer 0 --head 1")
    };
    // Short lines, so the hint fits the narrowest --width (40).
    writeln!(w, "\nEvery number: --format json.\n{tables}\n  {example}")
}

/// An encoder–decoder's alignment: each decoder token's strongest source tokens by the
/// cross-attention's weights, averaged over layers and heads.
fn write_alignment(trace: &Trace, rows: &[Aligned], width: usize, w: &mut dyn Write) -> io::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(w)?;
    let title = [
        "alignment".into(),
        "each decoder token's strongest source tokens (cross-attention, mean over layers and heads)".to_string(),
    ];
    for line in wrap_parts(&title, width) {
        writeln!(w, "{line}")?;
    }
    let tokens: Vec<String> =
        rows.iter().map(|a| format!("{}({})", cut(&trace.label(a.position), 10), a.position)).collect();
    let token_w = tokens.iter().map(|t| t.chars().count()).max().unwrap_or(0).max("decoder token".len());
    let room = table::room(&[token_w], width, 8);
    let mut t = table::new_table();
    t.set_header(vec!["decoder token".to_string(), header("source tokens (mean weight)", room)]);
    for (a, token) in rows.iter().zip(tokens) {
        let sources = a.sources.iter().map(|&(k, v)| format!("{}({k}) {v:.2}", cut(&trace.key_label(k), 10)));
        t.add_row(vec![token, fill(sources, room)]);
    }
    table::emit(&t, width, w)
}

/// The alignment as JSON: per decoder position, its strongest source positions with their
/// mean cross-attention weight, strongest first.
pub fn alignment_json(rows: &[Aligned]) -> String {
    let rows: Vec<String> = rows
        .iter()
        .map(|a| {
            let sources: Vec<String> = a
                .sources
                .iter()
                .map(|&(k, w)| format!("{{\"position\": {k}, \"weight\": {}}}", super::numbers::f32_json(w)))
                .collect();
            format!("{{\"position\": {}, \"sources\": [{}]}}", a.position, sources.join(", "))
        })
        .collect();
    format!("[{}]", rows.join(", "))
}

/// One layer's routing: per position, `expert:weight` for each expert the token went to, most
/// probable first, as many as the width holds.
fn write_routing(
    layer: usize,
    routing: &Routing,
    label: &dyn Fn(usize) -> String,
    width: usize,
    w: &mut dyn Write,
) -> io::Result<()> {
    writeln!(w)?;
    let title = [format!("layer {layer}"), "experts each token went to (expert:weight, most probable first)".into()];
    for line in wrap_parts(&title, width) {
        writeln!(w, "{line}")?;
    }
    let tokens: Vec<String> = (0..routing.len()).map(label).collect();
    let room = table::room(&[tokens.iter().map(|t| t.chars().count()).max().unwrap_or(0).max(5)], width, 8);
    let mut t = table::new_table();
    t.set_header(vec!["token", "experts"]);
    for (experts, token) in routing.iter().zip(tokens) {
        let items: Vec<String> = experts.iter().map(|&(e, weight)| format!("{e}:{weight:.2}")).collect();
        t.add_row(vec![token, line(&items, room)]);
    }
    table::emit(&t, width, w)
}
