//! `--patch`: the corrupted sentence tokenized as the clean one was (and `--metric`'s
//! answers), checked by the plan against the model, the sweep run (`analysis::patch`: every
//! kind of patching), and its grid attached to the views.

use super::staged::Run;
use crate::analysis::patch::{Metric, Sweep, What};
use crate::params::{Input, Params};
use crate::settings::plan::{PatchTexts, Tokenized};
use crate::settings::{self, Settings};
use crate::sources::{self, naming, Loaded};
use crate::trace::Trace;
use crate::views::{self, Views};
use anyhow::Result;

impl Run<'_> {
    /// Runs `--patch`'s sweep against `corrupted` and attaches it to `views`; returns its
    /// note, also passed to `notes_now`.
    pub(crate) fn patch(
        &self,
        params: &Params,
        corrupted: &str,
        (trace, views): (&Trace, &mut Views),
        notes_now: &dyn Fn(&[String]),
    ) -> Result<Vec<String>> {
        let (settings, loaded) = (self.settings, &self.loaded);
        let (sweep, corrupted) = sweep(settings, loaded, params, corrupted)?;
        let note: Vec<String> = views::patch::note(&sweep).into_iter().collect();
        notes_now(&note);
        let labels = sources::tracked::labels(loaded.tokenizer.as_ref(), &corrupted);
        if let Metric::LogitDiff { a, b, .. } = sweep.metric {
            views.metric_labels = Some(sources::tracked::names(loaded, naming::own_vocab(settings), [a, b]));
        }
        views.attach_patching(sweep, (corrupted, labels), &trace.labels());
        Ok(note)
    }
}

/// Tokenizes the corrupted sentence as the clean one was (and `--metric`'s answers), has the
/// plan check them against the model, and runs the sweep; returns it with the corrupted tokens.
fn sweep(settings: &Settings, loaded: &Loaded, params: &Params, corrupted: &str) -> Result<(Sweep, Vec<String>)> {
    let special = matches!(settings.model, settings::ModelChoice::Pretrained { special: true, .. });
    let split = |tok: &tokenizers::Tokenizer, text: &str, special: bool| -> Tokenized {
        let e = tok.encode(text, special).map_err(|e| e.to_string())?;
        Ok((e.get_ids().to_vec(), e.get_tokens().to_vec()))
    };
    let texts = loaded.tokenizer.as_ref().map(|tok| PatchTexts {
        corrupted: split(tok, corrupted, special),
        answers: settings.analysis.metric.as_ref().map(|(a, b)| (split(tok, a, false), split(tok, b, false))),
    });
    let (clean, type_ids) = match &loaded.input {
        Input::Ids { ids, type_ids } => (Some(ids.as_slice()), type_ids.clone()),
        Input::Matrix(_) => (None, None),
    };
    let checked = settings::plan::patching(settings, &loaded.cfg, (&loaded.tokens, clean), texts)?;
    let metric = match checked.logit_diff {
        Some((a, b, position)) => Metric::LogitDiff { a, b, position },
        None => Metric::OutputDistance,
    };
    let what = match settings.analysis.patch_step {
        Some(step) => What::Step(step),
        None if settings.analysis.patch_resid => What::Resid,
        None => What::Heads,
    };
    let corrupted_input = Input::Ids { ids: checked.ids, type_ids };
    let how = (what, settings.analysis.patch_attribution, settings.analysis.patch_path.as_ref());
    let iv = crate::analysis::interventions::Interventions::of(&loaded.cfg);
    let hooks = super::pass::hooks(loaded, &iv);
    let sweep =
        crate::analysis::patch::any(&loaded.cfg, params, (&loaded.input, &corrupted_input), how, &metric, &hooks)?;
    Ok((sweep, checked.tokens))
}
