//! `--check` around the run: refused before anything is computed when no independent
//! implementation exists or the run is not the model's own forward pass, and once the trace
//! exists, compared with the reference (`sources::check`). Here, in the run, because
//! attn-trace's side of the comparison (the logits at the last position) needs the
//! parameters, which exist only once the sources are open.

use crate::config::Interventions;
use crate::error::usage;
use crate::params::Params;
use crate::settings::Settings;
use crate::sources::check::{self, Ours};
use crate::sources::Loaded;
use crate::{model, output, trace::Trace};
use anyhow::Result;
use candle_core::Tensor;

/// What the forward pass returned that `--check` compares: the final hidden states
/// `[pos, d_model]` and, for a language model under `--check`, its logits at the last
/// position `[vocab]`.
pub struct Last {
    pub output: Tensor,
    pub logits: Option<Tensor>,
}

/// Refuses `--check` (one line, exit 2) where it could not compare: no reference for the
/// model, or a run that is not the checkpoint's own forward pass.
pub(crate) fn refuse_early(settings: &Settings, loaded: &Loaded) -> Result<()> {
    if settings.outputs.check.is_none() {
        return Ok(());
    }
    let reference = check::reference(&loaded.cfg, loaded.hf.is_some(), loaded.tokens.len())?;
    let cfg = &loaded.cfg;
    if reference == check::Reference::Bert && (cfg.scale - 1.0 / (cfg.d_k as f64).sqrt()).abs() > 1e-12 {
        return Err(usage(
            "--check",
            "candle's BertModel always scales scores by 1/√d_head",
            "drop --scale or --check",
        ));
    }
    if settings.generate.is_some() {
        return Err(usage("--check", "it compares one forward pass, not a generation", "drop --generate or --check"));
    }
    if loaded.cfg.interventions != Interventions::default() {
        return Err(usage(
            "--check",
            "the reference computes the model as the checkpoint defines it, and an intervention changes the pass",
            "drop the intervention (--ablate, --knockout, --ablate-expert, --induction) or --check",
        ));
    }
    Ok(())
}

/// attn-trace's logits at the last position of `output` [pos, d_model], for `--check` on a
/// language model (None otherwise): the head applied as the pass applies it.
pub(crate) fn last(settings: &Settings, loaded: &Loaded, params: &Params, output: Tensor) -> Result<Last> {
    // BERT's check compares its hidden states; a run without --check compares nothing.
    if settings.outputs.check.is_none() || loaded.hf.is_some() {
        return Ok(Last { output, logits: None });
    }
    let logits = match model::head::Unembed::of(&loaded.cfg, params) {
        Some(head) => {
            let n = output.dim(0)?;
            let row = output.narrow(0, n - 1, 1)?; // [1, d_model]
            model::unembed::logits(&loaded.cfg, params, Some(&head), &row)?.map(|l| l.flatten_all()).transpose()?
        }
        None => None,
    };
    Ok(Last { output, logits })
}

/// `--save-trace` (into `files`) and `--check`, once the trace exists. A failed check must
/// end the run with exit 1, but only after the output is written: it comes back as `Err` in
/// the value.
pub(crate) fn testing(
    settings: &Settings,
    loaded: &Loaded,
    last: &Last,
    (trace, files): (&Trace, &mut output::Pending),
) -> Result<(Option<serde_json::Value>, Result<()>)> {
    output::save_trace(trace, settings, files)?;
    let Some(tol) = settings.outputs.check else { return Ok((None, Ok(()))) };
    let reference = check::reference(&loaded.cfg, loaded.hf.is_some(), loaded.tokens.len())?;
    let ours = Ours { output: &last.output, logits: last.logits.as_ref() };
    let tol = tol.of(reference != check::Reference::Bert);
    let c = check::run(reference, &loaded.cfg, loaded.hf.as_ref(), &loaded.input, &ours, tol)?;
    if !c.ok() {
        return Ok((Some(c.to_json()), Err(c.failure())));
    }
    output::line(&c.line(), settings.quiet);
    Ok((Some(c.to_json()), Ok(())))
}
