//! The analyses' tables and JSON: the logit lens (layers down, positions across), per-head
//! statistics (a row per layer and head) and attention rollout (the last layer's matrix in
//! tables; every layer's in JSON). The numbers come from the model (lens) and
//! `views::analysis`; this file only lays them out.

use super::numbers::f64_json;
use super::table;
use super::text::{blocks, cut, wrap_parts, wrap_words};
use crate::analysis::patch::{Method, Metric, Sweep, What};
use crate::trace::Trace;
use crate::views::analysis::{HeadStats, ROLLOUT_RULE};
use crate::views::Views;
use std::io::{self, Write};

fn title(parts: &[String], width: usize, w: &mut dyn Write) -> io::Result<()> {
    writeln!(w)?;
    for line in wrap_parts(parts, width) {
        writeln!(w, "{line}")?;
    }
    Ok(())
}

/// Per-head statistics, one row per layer and head; the statistics' columns split into
/// blocks (each with the layer and head) where they do not fit the width together; then the
/// heads ranked.
pub fn write_stats(stats: &[HeadStats], precision: usize, width: usize, w: &mut dyn Write) -> io::Result<()> {
    let p = precision;
    let induction = stats.iter().any(|s| s.induction.is_some());
    let mut names = vec!["entropy", "distance", "first tok", "prev tok"];
    if induction {
        names.push("induction");
    }
    let rows: Vec<Vec<String>> = stats
        .iter()
        .map(|s| {
            let mut row = vec![
                format!("{:.p$}", s.entropy),
                format!("{:.p$}", s.mean_distance),
                format!("{:.p$}", s.first_token),
                s.previous_token.map_or("—".to_string(), |x| format!("{x:.p$}")),
            ];
            row.extend(s.induction.map(|x| format!("{x:.p$}")));
            row
        })
        .collect();
    let col_w: Vec<usize> = (0..names.len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).chain([names[c].len()]).max().unwrap_or(1))
        .collect();
    // The layer and head columns come first in every block: " layer │ head " before the rule.
    let keys = " layer ┆ head ".chars().count();
    let parts = table::column_blocks(&col_w, keys - 1, width);
    for (i, &(start, end)) in parts.iter().enumerate() {
        let mut t = vec!["per-head statistics".to_string(), "means over queries (docs/INTERVENTIONS.md)".to_string()];
        if parts.len() > 1 {
            t.push(format!("part {} of {}", i + 1, parts.len()));
        }
        title(&t, width, w)?;
        let mut tab = table::new_table();
        tab.set_header([&["layer", "head"][..], &names[start..end]].concat());
        for (s, row) in stats.iter().zip(&rows) {
            tab.add_row([vec![s.layer.to_string(), s.head.to_string()], row[start..end].to_vec()].concat());
        }
        table::emit(&tab, width, w)?;
    }
    write_stats_ranked(stats, p, width, w)
}

/// The heads with the highest induction (else previous-token) score, ranked.
fn write_stats_ranked(stats: &[HeadStats], p: usize, width: usize, w: &mut dyn Write) -> io::Result<()> {
    let Some(r) = crate::views::analysis::ranked(stats) else { return Ok(()) };
    let shown = r.heads.len().min(super::attribute::TOP);
    writeln!(
        w,
        "
top {shown} of {} heads by {}, largest first",
        r.heads.len(),
        r.said
    )?;
    let mut t = table::new_table();
    t.set_header(vec!["rank", "layer", "head", r.by]);
    for (i, (layer, head, x)) in r.heads.iter().take(shown).enumerate() {
        t.add_row(vec![(i + 1).to_string(), layer.to_string(), head.to_string(), format!("{x:.p$}")]);
    }
    table::emit(&t, width, w)
}

/// The rollout after the last layer.
pub fn write_rollout(
    trace: &Trace,
    rollout: &[(usize, Vec<f64>)],
    precision: usize,
    width: usize,
    w: &mut dyn Write,
) -> io::Result<()> {
    let Some((layer, values)) = rollout.last() else { return Ok(()) };
    let n = trace.tokens.len();
    writeln!(w)?;
    for line in wrap_words(&format!("view: {ROLLOUT_RULE}."), width, "  ") {
        writeln!(w, "{line}")?;
    }
    let labels: Vec<String> = trace.labels().iter().map(|t| cut(t, 12)).collect();
    let rows: Vec<String> = (0..n).map(|i| format!("{i} {}", labels[i])).collect();
    let cells: Vec<String> = values.iter().map(|v| format!("{v:.precision$}")).collect();
    let col_w = cells.iter().chain(&labels).map(|c| c.chars().count()).max().unwrap_or(1);
    for (start, end) in blocks(n, col_w + 3, table::label_cost(&rows, "q \\ k"), width) {
        let mut t = vec![format!("rollout to layer {layer}")];
        if start > 0 || end < n {
            t.push(format!("columns {start}–{} of {n}", end - 1));
        }
        t.push(format!("[query_pos × key_pos = {n} × {n}]"));
        title(&t, width, w)?;
        table::emit(&table::matrix_block("q \\ k", &rows, &labels, &cells, start..end), width, w)?;
    }
    Ok(())
}

/// `stats`: `[{"layer", "head", "entropy", "mean_distance", "first_token", "previous_token"}]`.
pub fn stats_json(stats: &[HeadStats]) -> String {
    let items: Vec<String> = stats
        .iter()
        .map(|s| {
            format!(
                "{{\"layer\": {}, \"head\": {}, \"entropy\": {}, \"mean_distance\": {}, \"first_token\": {}, \"previous_token\": {}{}}}",
                s.layer,
                s.head,
                f64_json(s.entropy),
                f64_json(s.mean_distance),
                f64_json(s.first_token),
                s.previous_token.map_or("null".to_string(), f64_json),
                s.induction.map_or(String::new(), |x| format!(", \"induction\": {}", f64_json(x)))
            )
        })
        .collect();
    format!("[{}]", items.join(", "))
}

/// `rollout`: `{"rule", "layers": [{"layer", "values": [[…]]}]}`.
pub fn rollout_json(rollout: &[(usize, Vec<f64>)]) -> String {
    let layers: Vec<String> = rollout
        .iter()
        .map(|(l, v)| {
            let n = (v.len() as f64).sqrt() as usize;
            let rows: Vec<String> = v
                .chunks(n.max(1))
                .map(|r| format!("[{}]", r.iter().map(|&x| f64_json(x)).collect::<Vec<_>>().join(", ")))
                .collect();
            format!("{{\"layer\": {l}, \"values\": [{}]}}", rows.join(", "))
        })
        .collect();
    format!(
        "{{\"rule\": {}, \"layers\": [{}]}}",
        serde_json::to_string(ROLLOUT_RULE).unwrap_or_default(),
        layers.join(", ")
    )
}

/// The patching sweep: a matrix of effects, layers down, heads (or positions) across.
pub fn write_patching(
    trace: &Trace,
    views: &Views,
    precision: usize,
    width: usize,
    w: &mut dyn Write,
) -> io::Result<()> {
    let Some((sweep, _)) = &views.patching else { return Ok(()) };
    let corrupted = views.corrupted_labels.as_slice();
    let rows = crate::views::patch::lines(sweep);
    let count = sweep.rows.len().checked_div(rows.len()).unwrap_or(0);
    let cols: Vec<String> = match sweep.what {
        What::Heads => (0..count).map(|h| format!("head {h}")).collect(),
        _ => (0..count).map(|p| format!("{p} {}", cut(&trace.label(p), 8))).collect(),
    };
    // An undefined effect (the runs do not differ on the metric; see the note) is a dash.
    let cells: Vec<String> =
        sweep.rows.iter().map(|r| r.effect.map_or("—".to_string(), |e| format!("{e:.precision$}"))).collect();
    writeln!(w)?;
    let what = match sweep.what {
        What::Heads => "each head's context".to_string(),
        What::Resid => "each position of each layer's output".to_string(),
        What::Step(step) if sweep.what.per_head() => format!("each head's {step} at each position of each layer"),
        What::Step(step) => format!("each position of each layer's {step}"),
    };
    // The corrupted sentence's token labels.
    let corrupted: Vec<String> = corrupted.iter().map(|t| cut(t, 12)).collect();
    let metric = metric_text(trace, &sweep.metric, views.metric_labels.as_ref());
    let path = crate::views::patch::path_title(sweep.receivers.as_deref().unwrap_or(""));
    let (name, runs) = match sweep.method {
        Method::Exact => (
            "activation patching",
            format!("layer runs {} of {} without reuse", sweep.layer_runs, sweep.layer_runs_without_reuse),
        ),
        Method::Attribution => (
            crate::views::patch::ATTRIBUTION_TITLE,
            format!(
                "each effect estimated as (clean − corrupted activation) · ∂metric/∂activation at the corrupted run, \
                 from {} layer runs and one backward pass in place of {} layer runs",
                sweep.layer_runs, sweep.layer_runs_without_reuse
            ),
        ),
        Method::Path => (path.as_str(), format!("layer runs {}", sweep.layer_runs)),
    };
    let how = match sweep.method {
        Method::Path => format!(
            "each earlier head's output taken from the corrupted run ({}) only along its direct path into the \
             receivers, in the clean run; effect = (patched − clean) / (corrupted − clean)",
            corrupted.join(" ")
        ),
        _ => format!(
            "{what} copied from the clean run into the corrupted one ({}); effect = (patched − corrupted) / (clean − \
             corrupted)",
            corrupted.join(" ")
        ),
    };
    let text =
        format!("{name}: {how}, metric {metric}: clean {:.4}, corrupted {:.4}; {runs}", sweep.clean, sweep.corrupted,);
    for line in wrap_words(&text, width, "  ") {
        writeln!(w, "{line}")?;
    }
    let col_w = cells.iter().chain(&cols).map(|c| c.chars().count()).max().unwrap_or(1);
    for (start, end) in blocks(count, col_w + 3, table::label_cost(&rows, ""), width) {
        let mut t = vec![match sweep.method {
            Method::Exact => "patching effect".to_string(),
            Method::Attribution => crate::views::patch::ATTRIBUTION_TITLE.to_string(),
            Method::Path => path.clone(),
        }];
        if start > 0 || end < count {
            t.push(format!("columns {start}–{} of {count}", end - 1));
        }
        title(&t, width, w)?;
        table::emit(&table::matrix_block("", &rows, &cols, &cells, start..end), width, w)?;
    }
    write_patch_ranked(trace, (sweep.what, &views.patch_ranked), (precision, width), w)
}

/// The metric in words: the answers by their labels (`logit[·Paris] − logit[·Rome]`), the
/// position by its number and label; ids only where the tokenizer gave no label.
fn metric_text(trace: &Trace, metric: &Metric, labels: Option<&(String, String)>) -> String {
    match metric {
        &Metric::LogitDiff { a, b, position } => {
            let (a, b) = labels.cloned().unwrap_or_else(|| (format!("#{a}"), format!("#{b}")));
            let at =
                trace.tokens.get(position).map_or(String::new(), |_| format!(" ({})", cut(&trace.label(position), 12)));
            format!("logit[{a}] − logit[{b}] at position {position}{at}")
        }
        Metric::OutputDistance => "‖output − clean output‖".to_string(),
    }
}

/// The cells of the sweep that matter most, ranked (JSON's `rows` has every cell).
fn write_patch_ranked(
    trace: &Trace,
    (what, ranked): (What, &[crate::views::patch::Cell]),
    (p, width): (usize, usize),
    w: &mut dyn Write,
) -> io::Result<()> {
    if ranked.is_empty() {
        return Ok(());
    }
    let shown = ranked.len().min(super::attribute::TOP);
    let unit = match what {
        What::Heads => "heads",
        _ if what.per_head() => "heads at positions",
        _ => "positions",
    };
    writeln!(w, "\ntop {shown} of {} {unit} by |effect|, largest first", ranked.len())?;
    let mut t = table::new_table();
    let index = if what == What::Heads { "head" } else { "position" };
    let header = if what.per_head() {
        vec!["rank", "layer", "head", index, "effect"]
    } else {
        vec!["rank", "layer", index, "effect"]
    };
    t.set_header(header);
    for (i, c) in ranked.iter().take(shown).enumerate() {
        let at = match what {
            What::Heads => c.index.to_string(),
            _ => format!("{} {}", c.index, cut(&trace.label(c.index), 12)),
        };
        let mut row = vec![(i + 1).to_string(), c.layer.to_string()];
        row.extend(c.head.map(|h| h.to_string()));
        row.extend([at, format!("{:.p$}", c.effect)]);
        t.add_row(row);
    }
    table::emit(&t, width, w)
}

/// `patching`: `{"method": "exact" | "attribution" | "path", ("receivers": with "path",) "what", "metric": {"kind": "logit_diff", "a", "b", "position"} | {"kind":
/// "output_distance"}, "corrupted_tokens", "clean_metric", "corrupted_metric", "layer_runs",
/// "rows": [{"layer", "head" | "position", "metric", "effect"}]}`; `effect` is null when the
/// clean and corrupted metrics are equal (0/0). A `--patch-step` sweep's "what" is its step,
/// and a per-head step's rows have both "head" and "position".
pub fn patching_json(patching: &(Sweep, Vec<String>)) -> String {
    let (s, corrupted) = patching;
    let key = match s.what {
        What::Heads => "head",
        _ => "position",
    };
    let rows: Vec<String> = s
        .rows
        .iter()
        .map(|r| {
            format!(
                "{{\"layer\": {}, {}\"{key}\": {}, \"metric\": {}, \"effect\": {}}}",
                r.layer,
                r.head.map_or(String::new(), |h| format!("\"head\": {h}, ")),
                r.index,
                f64_json(r.metric),
                r.effect.map_or("null".to_string(), f64_json)
            )
        })
        .collect();
    let metric = match s.metric {
        Metric::LogitDiff { a, b, position } => {
            format!("{{\"kind\": \"logit_diff\", \"a\": {a}, \"b\": {b}, \"position\": {position}}}")
        }
        Metric::OutputDistance => "{\"kind\": \"output_distance\"}".to_string(),
    };
    let (method, receivers) = match s.method {
        Method::Exact => ("exact", String::new()),
        Method::Attribution => ("attribution", String::new()),
        Method::Path => {
            ("path", format!(", \"receivers\": {}", serde_json::to_string(&s.receivers).unwrap_or_default()))
        }
    };
    format!(
        "{{\"method\": \"{method}\"{receivers}, \"what\": \"{}\", \"metric\": {metric}, \"corrupted_tokens\": {}, \"clean_metric\": {}, \"corrupted_metric\": {}, \"layer_runs\": {}, \"layer_runs_without_reuse\": {}, \"rows\": [{}]}}",
        match s.what {
            What::Heads => "heads",
            What::Resid => "resid",
            What::Step(step) => step,
        },
        serde_json::to_string(corrupted).unwrap_or_default(),
        f64_json(s.clean),
        f64_json(s.corrupted),
        s.layer_runs,
        s.layer_runs_without_reuse,
        rows.join(", ")
    )
}
