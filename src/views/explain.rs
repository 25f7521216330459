//! Notes for what would otherwise surprise someone learning with the tool (issue 47): each is
//! said only when the trace shows it, and is worked out from the trace itself.
//! - The toy's `embed.position` rows equal its `embed.token` rows when both tables are drawn
//!   right after `torch.manual_seed(seed)`, as seed notebook 000 re-seeds before each.
//! - `--format heatmap` draws attention maps only: a step named with `--steps` that it cannot
//!   draw (`embed.sum`) is said, with what was drawn instead.

use super::Views;
use crate::config::InitConfig;
use crate::settings::{Format, Output};
use crate::trace::{Selection, Trace};

/// The notes for a finished trace (its steps as shown), its views, what `--steps` selected
/// (`show`) and how it is shown. They explain the screen (tables, a heatmap), so they are said
/// after it (`Views::screen_notes`), not before a later refusal, and the JSON document's and
/// the page's notes do not depend on `--format`.
pub fn notes(trace: &Trace, views: &Views, show: &Selection, out: &Output) -> Vec<String> {
    match out.format {
        Format::Heatmap => undrawn(trace, views, show).into_iter().collect(),
        Format::Table => same_embedding_rows(trace).into_iter().collect(),
        Format::Json | Format::Jsonl => Vec::new(),
    }
}

/// How many leading rows of the shown `embed.position` equal (bit for bit) those of the shown
/// `embed.token`, when both tables were drawn after a re-seed; the note saying why, if any do.
fn same_embedding_rows(trace: &Trace) -> Option<String> {
    let InitConfig::Torch { seed, reseed, .. } = &trace.config.init else { return None };
    if !(reseed.contains(&"token") && reseed.contains(&"position")) {
        return None;
    }
    let step = |id: &str| trace.steps.iter().find(|s| s.id == id && s.shape.len() == 2);
    let (token, position) = (step("embed.token")?, step("embed.position")?);
    let (tv, pv) = (token.f32s()?, position.f32s()?);
    let width = token.shape[1];
    if token.shape != position.shape || width == 0 {
        return None;
    }
    let same = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
    let rows = tv.chunks(width).zip(pv.chunks(width)).take_while(|(a, b)| same(a, b)).count();
    let which = match rows {
        0 => return None,
        1 => "row 0".to_string(),
        n => format!("rows 0–{}", n - 1),
    };
    Some(format!(
        "embed.position {which} equal embed.token {which}: as in the notebook, torch.manual_seed({seed}) \
         runs again before each table, so both start from the same random draws (docs/TUTORIAL.md; \
         --reseed token,layers draws the positions on from the same stream instead)"
    ))
}

/// The steps `--steps` named that a heatmap does not draw, and what it drew instead; nothing
/// when `--steps` was not given (the heatmap then records only the weights).
fn undrawn(trace: &Trace, views: &Views, show: &Selection) -> Option<String> {
    show.steps.as_ref()?;
    let drawn = |name: &str| name.ends_with("attn.weights") || name.starts_with("attribution.");
    let mut names: Vec<&str> = Vec::new();
    for s in trace.steps.iter().filter(|s| !drawn(&s.name)) {
        if !names.contains(&s.id.as_str()) {
            names.push(&s.id);
        }
    }
    let first = names.first()?;
    let them = match names.len() {
        1 => first.to_string(),
        n if n <= 3 => names.join(", "),
        n => format!("{} and {} more", names[..2].join(", "), n - 2),
    };
    let maps = views.maps.as_ref().map_or(&[][..], |m| &m.maps[..]);
    let mut layers: Vec<usize> = maps.iter().map(|m| m.layer).collect();
    layers.dedup();
    let layers: Vec<String> = layers.iter().map(usize::to_string).collect();
    let of = format!("of layer{} {}", if layers.len() > 1 { "s" } else { "" }, layers.join(", "));
    let drew = match maps.len() {
        0 => "no attention map".to_string(),
        1 => format!("1 attention map {of}"),
        n => format!("{n} attention maps {of}"),
    };
    let (layer, head) = maps.first().map_or((0, 0), |m| (m.layer, m.head.unwrap_or(0)));
    Some(format!(
        "--format heatmap draws attention maps, not {them}: it drew {drew} instead \
         (one head's map: --steps weights --layer {layer} --head {head}; {first} as numbers: \
         leave out --format heatmap)"
    ))
}
