//! Issue 47, item 7: a GGUF file traced with the f32 arithmetic (transformers' computation)
//! can predict another token than llama.cpp and Ollama compute from the same file (their
//! products round each input to 8 bits per block). When the tables show a GGUF model's
//! predictions, the prompt is computed once more with `--arithmetic ggml`, recording nothing,
//! and a note names every position whose top token differs and the flag that traces the
//! engine's arithmetic. Only for people reading tables: JSON, `serve` and Python users choose
//! their arithmetic explicitly, and `--quiet` skips the pass (docs/MODELS.md, "Which arithmetic
//! to use when").

use crate::config::Arithmetic;
use crate::params::Input;
use crate::settings::{Format, ModelChoice, Select, Settings, Text};
use crate::trace::{Prediction, Recorder, Trace};
use anyhow::{Context, Result};

/// The note, when llama.cpp's arithmetic picks another top token at some position of
/// `trace` (a run of `settings`) or would have written another token in its generation; None
/// when it agrees everywhere or does not apply.
pub(crate) fn ggml_note(settings: &Settings, trace: &Trace) -> Result<Option<String>> {
    let ModelChoice::Pretrained { arithmetic: Arithmetic::F32, .. } = &settings.model else { return Ok(None) };
    let gguf = trace.config.model.as_ref().is_some_and(|m| m.tensor_types.is_some());
    let table = matches!(settings.output.format, Format::Table | Format::Heatmap);
    let Some(ours) = trace.predictions.as_ref() else { return Ok(None) };
    if !gguf || !table || settings.quiet || trace.config.parts.seq2seq.is_some() {
        return Ok(None);
    }
    // A generation's tokens are read as a prompt: llama.cpp's top token after each.
    let written: Vec<&Prediction> = trace.generation.iter().flat_map(|g| g.tokens.iter().map(|t| &t.chosen)).collect();
    let theirs = ggml_top(settings, trace, &written)?;
    let name = |p: &Prediction| p.label().unwrap_or_else(|| format!("#{}", p.id));
    let mut differ = Vec::new();
    // With a generation, the prompt's last prediction is generated token 0's, said below.
    let prompt_rows = if written.is_empty() { ours.len() } else { ours.len() - 1 };
    for (pos, (a, b)) in ours.iter().zip(&theirs).enumerate().take(prompt_rows) {
        match (a.first(), b) {
            (Some(a), Some(b)) if a.id != b.id => {
                differ.push(format!("{pos} ({}): {}, where f32 predicts {}", trace.label(pos), name(b), name(a)))
            }
            _ => {}
        }
    }
    let n = ours.len();
    let parted = written.iter().enumerate().find_map(|(t, w)| match theirs.get(n - 1 + t) {
        Some(Some(b)) if b.id != w.id => Some(format!(
            "llama.cpp's arithmetic would have written {} as generated token {t}, where f32 wrote {}",
            name(b),
            name(w)
        )),
        _ => None,
    });
    let said = match (differ.len(), parted) {
        (0, None) => return Ok(None),
        (0, Some(p)) => p,
        (k, p) => {
            let at = if k == 1 { "at one position".to_string() } else { format!("at {k} of {n} positions") };
            let prompt = format!("llama.cpp's arithmetic predicts another top token {at} — {}", differ.join("; "));
            p.map_or(prompt.clone(), |p| format!("{prompt}; and {p}"))
        }
    };
    Ok(Some(format!(
        "{said} (llama.cpp and Ollama compute with this file's quantized products); add --arithmetic ggml \
         to trace what the engine computes (docs/MODELS.md, which arithmetic to use when)"
    )))
}

/// The top token llama.cpp's arithmetic predicts after each position of the prompt followed
/// by `written` (a generation's tokens), from one pass that records no step.
fn ggml_top(settings: &Settings, trace: &Trace, written: &[&Prediction]) -> Result<Vec<Option<Prediction>>> {
    let mut s = settings.clone();
    // The sentence as the first pass read it: standard input or a FIFO cannot be read twice.
    if matches!(s.text, Text::Stdin | Text::File(_)) {
        let Some(given) = trace.sentence.as_deref() else { return Ok(Vec::new()) };
        // A pair was joined as "first ‖ pair".
        let pair = s.pair.as_ref().map(|p| format!(" ‖ {p}"));
        let first = pair.as_deref().and_then(|p| given.strip_suffix(p)).unwrap_or(given);
        s.text = Text::Arg(first.to_string());
    }
    if let ModelChoice::Pretrained { arithmetic, .. } = &mut s.model {
        *arithmetic = Arithmetic::Ggml;
    }
    // Only what changes the forward pass is kept (interventions); no views, files or analyses.
    s.select = Select { steps: Some("none".to_string()), layer: None, head: None };
    s.outputs = Default::default();
    s.output.views = Default::default();
    s.output.summary = false;
    (s.output.stats, s.output.rollout, s.output.params, s.generate) = (false, false, false, None);
    let a = &mut s.analysis;
    (a.lens, a.stats, a.rollout, a.patch, a.attribute, a.at) = (false, false, false, None, None, None);
    a.lens_track.clear();
    let (loaded, source, plan) = super::open::prepare(&s)?;
    let params = source.params(&loaded)?;
    let Input::Ids { ids, type_ids } = &loaded.input else { return Ok(Vec::new()) };
    let ids: Vec<u32> = ids.iter().copied().chain(written.iter().map(|p| p.id)).collect();
    let tokens: Vec<String> =
        loaded.tokens.iter().cloned().chain(written.iter().map(|p| format!("#{}", p.id))).collect();
    let mut rec = Recorder::new(tokens, loaded.cfg.clone(), plan.record).with_top_k(1);
    let input = Input::Ids { ids, type_ids: type_ids.clone() };
    super::pass::forward(&loaded.cfg, &params, &input, (&mut rec, &super::pass::hooks(&loaded)))
        .context("llama.cpp's arithmetic")?;
    let (mut t, _) = rec.finish();
    crate::sources::naming::name_predictions(&mut t, &loaded, false);
    Ok(t.predictions.unwrap_or_default().into_iter().map(|top| top.into_iter().next()).collect())
}
