//! The plan: the settings checked against the model the sources stage opened (its sizes and
//! tokens), still before any tensor is computed. It decides which steps the model records
//! (`record`) and which the output shows (`show`): views read steps that `--steps` may not
//! show (the focus walkthrough reads q, k, v…), so the two can differ. [`patching`] checks
//! `--patch` and `--metric` against the model and what its tokenizer made of them.

use super::views::{resolve, resolve_for};
use super::{Format, Settings};
use crate::config::{Interventions, Knockout, ModelConfig};
use crate::error::{quote, usage};
use crate::trace::Selection;
use anyhow::Result;

/// What to record and show, and where the focus is. Plain data.
#[derive(Debug, Clone)]
pub struct Plan {
    /// What the model copies into the trace.
    pub record: Selection,
    /// What the output shows (a subset of `record`).
    pub show: Selection,
    /// What the views read (a subset of `record`): `record` without what only the file needs.
    pub view_record: Selection,
    /// `--save-trace`'s steps (all, or `--save-steps`), whatever `--steps` etc. print.
    pub save: Option<Selection>,
    /// `--focus`: the position of the token whose attention is walked through.
    pub focus: Option<usize>,
    /// When the focus word was split into word pieces: their positions (the focus is the first).
    pub focus_pieces: Option<std::ops::Range<usize>>,
    /// Ablations and knockouts, checked against the model and resolved against the tokens.
    pub interventions: Interventions,
    /// The summary table alone reads the weights: each layer's are reduced to its strongest
    /// links as the model computes them, a tile of queries at a time (`trace::rows`).
    pub reduce_summary: bool,
    /// `--stats` is gathered the same way (`reduce::stats`), not read from recorded weights.
    pub reduce_stats: bool,
    /// Recorded steps are handed on as they are made (`reduce_summary`, or `--format jsonl`
    /// without `--save-trace`): the memory estimate counts only the largest.
    pub streamed: bool,
    /// `--attribute`: what the model attributes (`settings::attribute::request`).
    pub attribution: Option<crate::trace::attribute::Request>,
    /// The bytes the run was estimated to need at its peak, as checked against `--max-memory`
    /// (`limits::check_run`; 0 until checked): `--timings` prints it beside the measured peak.
    pub estimate: f64,
}

impl Plan {
    /// Checks `--layer`, `--head`, `--steps`, `--focus` and `--check` against the model.
    /// `texts` are the tokens' decoded texts, when the vocabulary has them: `--focus` and
    /// `--knockout` find a token by its text too.
    pub fn new(settings: &Settings, cfg: &ModelConfig, tokens: &[String], texts: Option<&[String]>) -> Result<Plan> {
        let mut show = selection(settings, cfg)?;
        let focus = settings.output.views.focus.as_deref().map(|f| resolve(f, tokens, texts)).transpose()?;
        // `--focus` alone asks for the walkthrough: as tables, show it after the tokens, not
        // after every step of the trace (`--steps` brings the steps back; a page or a picture
        // still gets every step).
        let o = &settings.output;
        let alone = o.views.html.is_none() && o.views.svg.is_none() && !o.summary;
        if focus.is_some() && show.steps.is_none() && o.format == Format::Table && alone {
            show.steps = Some(std::iter::once("tokens".to_string()).collect());
        }
        let focus_pieces = match (settings.output.views.focus.as_deref(), focus) {
            (Some(word), Some(pos)) => {
                let spelled = super::views::spelling(tokens, texts);
                super::views::split_word(word, &spelled).into_iter().find(|r| r.start == pos && r.len() > 1)
            }
            _ => None,
        };
        let a = &settings.analysis;
        let reduce_summary = super::reduce::summary_alone(settings, cfg, &show, focus.is_some());
        let reduce_stats = super::reduce::stats(settings, cfg);
        let mut record = widen(settings, &show, focus.is_some());
        if reduce_summary {
            record.steps = Some(super::reduce::summary_steps(cfg));
        }
        let streamed =
            reduce_summary || (settings.output.format == Format::Jsonl && settings.outputs.save_trace.is_none());
        // Rollout and what each generated token looked at read the weights after the pass;
        // `--stats` reads them as they are computed, unless it cannot (`reduce::stats`).
        if (a.rollout || settings.generate.is_some() || (a.stats && !reduce_stats)) && record.steps.is_some() {
            record.steps.get_or_insert_with(Default::default).insert("attn.weights".to_string());
        }
        if a.lens && cfg.parts.lm_head.is_none() {
            return Err(usage(
                "--lens",
                "the logit lens needs a language-model head",
                "use a decoder (--model) or --lm-head",
            ));
        }
        drawing_fits(settings, cfg, tokens.len())?;
        let interventions = interventions(settings, cfg, (tokens, texts))?;
        let save = super::outputs::save_selection(&settings.outputs, cfg.layers)?;
        let (view_record, record) = (record.clone(), save.as_ref().map_or(record.clone(), |s| record.union(s)));
        Ok(Plan {
            record,
            view_record,
            save,
            show,
            focus,
            focus_pieces,
            interventions,
            reduce_summary,
            reduce_stats,
            streamed,
            attribution: None,
            estimate: 0.0,
        })
    }

    /// For a caller that keeps every shown step and draws every head's map later (the Python
    /// API): the summary table's narrowing (record only the weights, reduce them as they come)
    /// is undone, and the weights are recorded as `--html` records them.
    pub fn for_maps(&mut self) {
        if self.reduce_summary {
            self.reduce_summary = false;
            self.streamed = false;
            self.record = self.show.clone();
            self.view_record = self.show.clone();
        }
        for record in [&mut self.record, &mut self.view_record] {
            if let Some(steps) = record.steps.as_mut() {
                steps.insert("attn.weights".to_string());
            }
        }
    }
}

/// `--steps`, `--layer` and `--head`, checked against the model's sizes.
fn selection(settings: &Settings, cfg: &ModelConfig) -> Result<Selection> {
    let (s, layers, heads) = (&settings.select, cfg.layers, cfg.heads);
    if let Some(&l) = s.layer.iter().flatten().find(|&&l| l >= layers) {
        return Err(usage(
            "--layer",
            format!("layer {l} does not exist; the model has {layers}"),
            format!("pass layers from 0 to {}", layers - 1),
        ));
    }
    if let Some(&h) = s.head.iter().flatten().find(|&&h| h >= heads) {
        return Err(usage(
            "--head",
            format!("head {h} does not exist; the model has {heads}"),
            format!("pass heads from 0 to {}", heads - 1),
        ));
    }
    Ok(Selection {
        steps: s.steps.as_deref().map(|list| crate::trace::aliases::parse_for(list, cfg)).transpose()?,
        layer: s.layer.clone(),
        head: s.head.clone(),
    })
}

/// The shown selection plus the steps the views read.
fn widen(settings: &Settings, shown: &Selection, focus: bool) -> Selection {
    let mut record = shown.clone();
    let v = &settings.output.views;
    let format = settings.output.format;
    // The heatmap shows nothing but the weights (and the focus): copying out every other
    // step of a real model would only cost time and memory.
    if format == Format::Heatmap && v.html.is_none() && record.steps.is_none() {
        record.steps = Some(["attn.weights", "cross_attn.weights"].map(String::from).into());
    }
    if let Some(steps) = record.steps.as_mut() {
        if focus {
            steps.extend(crate::trace::steps::focus_steps(v.layer));
        }
        // The drawn maps need the weights whatever --steps says; derived tables and JSON
        // views only derive the weights that are shown.
        if format == Format::Heatmap || v.html.is_some() || v.svg.is_some() {
            // An encoder–decoder's maps may be its cross-attention's (`--stack`).
            steps.extend(["attn.weights", "cross_attn.weights"].map(String::from));
        }
    }
    record
}

/// Bytes an SVG and an HTML page take per attention weight drawn (measured: 114 and 60 at
/// 120 tokens), times 3 for the string's growth and the copy that is written.
const SVG_BYTES_PER_CELL: f64 = 120.0 * 3.0;
const HTML_BYTES_PER_CELL: f64 = 80.0 * 3.0;

/// `--svg` and `--html` build their whole document in memory: refuse one that would not fit
/// (an SVG of 3,000 tokens is gigabytes), before anything is computed.
fn drawing_fits(settings: &Settings, cfg: &ModelConfig, n: usize) -> Result<()> {
    let v = &settings.output.views;
    let layers = settings.select.layer.as_ref().map_or(cfg.layers, Vec::len);
    let heads = if v.average_heads { 1 } else { settings.select.head.as_ref().map_or(cfg.heads, Vec::len) };
    let cells = (layers as f64) * (heads as f64) * (n as f64) * (n as f64);
    let per_cell = if v.svg.is_some() { SVG_BYTES_PER_CELL } else { 0.0 }
        + if v.html.is_some() { HTML_BYTES_PER_CELL } else { 0.0 };
    if per_cell == 0.0 {
        return Ok(());
    }
    let need = cells * per_cell;
    let limit = settings.memory_available.map_or(settings.max_memory, |free| free.min(settings.max_memory));
    if need > limit as f64 {
        return Err(usage(
            "--svg/--html",
            format!(
                "{n} tokens draw {cells:.0} weights, about {} in memory, above the limit of {} (--max-memory or the memory available)",
                super::limits::human(need as u128),
                super::limits::human(limit)
            ),
            "draw one layer and head (--layer L --head H), or trace fewer tokens",
        ));
    }
    Ok(())
}

/// `--ablate` (an encoder–decoder's: its encoder's, `settings::stacks`) and `--knockout`.
fn interventions(
    settings: &Settings,
    cfg: &ModelConfig,
    (tokens, texts): (&[String], Option<&[String]>),
) -> Result<Interventions> {
    let a = &settings.analysis;
    let (layers, heads) = (cfg.layers, cfg.heads);
    let layer_ok = |flag: &str, l: usize| -> Result<()> {
        if l >= layers {
            return Err(usage(
                flag,
                format!("layer {l} does not exist; the model has layers 0 to {}", layers - 1),
                "pick a layer in range",
            ));
        }
        Ok(())
    };
    let head_ok = |flag: &str, h: usize| -> Result<()> {
        if h >= heads {
            return Err(usage(
                flag,
                format!("head {h} does not exist; the model has heads 0 to {}", heads - 1),
                "pick a head in range",
            ));
        }
        Ok(())
    };
    let ablate = super::stacks::ablated(a, cfg)?;
    for &(l, h) in &ablate {
        layer_ok("--ablate", l)?;
        head_ok("--ablate", h)?;
    }
    let mut knockout = Vec::new();
    for spec in &a.knockout {
        let bad = || {
            usage(
                "--knockout",
                format!("{} is not L[.H]:Q->K", crate::error::quote(spec)),
                "write e.g. --knockout 0.1:5->2 or 1:small->shoes",
            )
        };
        let (where_, edge) = spec.split_once(':').ok_or_else(bad)?;
        let (q, k) = edge.split_once("->").ok_or_else(bad)?;
        let (layer, head) = match where_.split_once('.') {
            Some((l, h)) => (l.trim().parse().map_err(|_| bad())?, Some(h.trim().parse().map_err(|_| bad())?)),
            None => (where_.trim().parse().map_err(|_| bad())?, None),
        };
        layer_ok("--knockout", layer)?;
        if let Some(h) = head {
            head_ok("--knockout", h)?;
        }
        let find = |w: &str| resolve_for("--knockout", w.trim(), tokens, texts);
        let (query, key) = (find(q)?, find(k)?);
        knockout.push(Knockout { layer, head, query, key });
    }
    Ok(Interventions {
        ablate_mode: (!ablate.is_empty() || !a.ablate_steps.is_empty()).then_some(a.ablate_mode),
        ablate_steps: a.ablate_steps.clone(),
        ablate,
        ablate_expert: ablate_experts(&a.ablate_expert, cfg)?,
        knockout,
        induction: a.induction,
        ..Default::default()
    })
}

/// `--ablate-expert`'s (layer, expert) pairs against the model's mixture of experts, in the
/// order given, each once: a layer keeps at least as many experts as each token runs.
fn ablate_experts(list: &[(usize, usize)], cfg: &ModelConfig) -> Result<Vec<(usize, usize)>> {
    if list.is_empty() {
        return Ok(Vec::new());
    }
    let flag = "--ablate-expert";
    let Some(x) = &cfg.parts.experts else {
        return Err(usage(
            flag,
            "the model has no mixture of experts",
            "use a model with experts (Mixtral, Qwen2-MoE, Qwen3-MoE), or --ablate for heads",
        ));
    };
    let mut out: Vec<(usize, usize)> = Vec::new();
    for &(l, e) in list {
        if l >= cfg.layers {
            let why = format!("layer {l} does not exist; the model has layers 0 to {}", cfg.layers - 1);
            return Err(usage(flag, why, "pick a layer in range"));
        }
        if e >= x.count {
            let why = format!("expert {e} does not exist; the model has experts 0 to {}", x.count - 1);
            return Err(usage(flag, why, "pick an expert in range"));
        }
        if !out.contains(&(l, e)) {
            out.push((l, e));
        }
        let left = x.count - out.iter().filter(|(m, _)| *m == l).count();
        if left < x.top_k {
            let why = format!("layer {l} would keep {left} of {} experts, and each token runs {}", x.count, x.top_k);
            return Err(usage(flag, why, format!("remove at most {} experts of a layer", x.count - x.top_k)));
        }
    }
    Ok(out)
}

pub use super::answer::Tokenized;

/// What `--patch` needs of the model's tokenizer, tokenized by the run (the plan tokenizes
/// nothing): the corrupted sentence, with the special tokens the clean one got, and
/// `--metric`'s two answers (in its order, present exactly when it is given), without.
pub struct PatchTexts {
    pub corrupted: Tokenized,
    pub answers: Option<(Tokenized, Tokenized)>,
}

/// `--patch` and `--metric`, checked against the model and the clean input.
#[derive(Debug, Clone, PartialEq)]
pub struct Patching {
    /// The corrupted sentence's ids and tokens: as many as the clean sentence's.
    pub ids: Vec<u32>,
    pub tokens: Vec<String>,
    /// `--metric A B`: the answers' ids and the position whose logits they compare (the last
    /// for a language model, the `[MASK]` for a masked-LM encoder); `None`: the metric is the
    /// output's distance from the clean output.
    pub logit_diff: Option<(u32, u32, usize)>,
}

/// Checks `--patch` and `--metric` against the model: the corrupted sentence has the clean
/// one's token length, and the metric suits the model (and, for a masked-LM encoder, the
/// clean sentence's first `[MASK]`). `clean` is the clean sentence's tokens and ids (`None`
/// for a raw input matrix); `texts` is `None` without a model's tokenizer.
pub fn patching(
    settings: &Settings,
    cfg: &ModelConfig,
    (tokens, clean): (&[String], Option<&[u32]>),
    texts: Option<PatchTexts>,
) -> Result<Patching> {
    let texts = texts.ok_or_else(|| {
        usage("--patch", "it tokenizes the corrupted sentence with a model's tokenizer", "use --model")
    })?;
    let (ids, corrupted) = texts.corrupted.map_err(|e| usage("--patch", e, "check the corrupted sentence"))?;
    let Some(clean) = clean else {
        return Err(usage("--patch", "it needs token ids", "use --model"));
    };
    if ids.len() != clean.len() {
        let show = |t: &[String]| super::answer::spelled(t).iter().map(|s| quote(s)).collect::<Vec<_>>().join(" ");
        return Err(usage(
            "--patch",
            format!(
                "the sentences have {} and {} tokens: [{}] and [{}]",
                clean.len(),
                ids.len(),
                show(tokens),
                show(&corrupted)
            ),
            "pass a corrupted sentence of the same token length",
        ));
    }
    let mask = tokens.iter().position(|t| t == "[MASK]").filter(|_| cfg.parts.masked_lm);
    let metric = settings.analysis.metric.as_ref().zip(texts.answers.as_ref());
    let logit_diff = match (&cfg.parts.lm_head, mask, metric) {
        (Some(_), _, Some((words, split))) => Some(answers(words, split, clean.len() - 1)?),
        (Some(_), _, None) => {
            return Err(usage("--patch", "a language model's metric is a logit difference", "add --metric A B"))
        }
        (None, Some(position), Some((words, split))) => Some(answers(words, split, position)?),
        (None, None, Some(_)) => {
            return Err(usage(
                "--metric",
                "an encoder's metric is the output's distance, unless a masked-LM checkpoint fills a [MASK]",
                "drop --metric, or put [MASK] in the sentence of a BertForMaskedLM checkpoint",
            ))
        }
        (None, _, None) => None,
    };
    Ok(Patching { ids, tokens: corrupted, logit_diff })
}

/// `--metric A B` read at `position`: each answer's single token id (A's checked first).
fn answers(
    (a, b): &(String, String),
    (split_a, split_b): &(Tokenized, Tokenized),
    position: usize,
) -> Result<(u32, u32, usize)> {
    Ok((answer(a, split_a)?, answer(b, split_b)?, position))
}

/// One `--metric` answer: a single token's id.
fn answer(t: &str, split: &Tokenized) -> Result<u32> {
    let example = "pass answers that are one token each, e.g. --metric \" Paris\" \" London\"";
    super::answer::one_token("--metric", t, split, example)
}
