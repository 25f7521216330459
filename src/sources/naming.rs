//! Naming what a run predicted: every predicted id of a trace (predictions, the lens, tracked
//! tokens, the attribution's answer and foil) gets its token string. Beside `namer` (which
//! names one id) and `tracked` (which uses it), so neither imports the other's caller.

/// Whether the toy model's vocabulary is the sentence's own words (no `--vocab` file).
pub fn own_vocab(settings: &crate::settings::Settings) -> bool {
    matches!(&settings.model, crate::settings::ModelChoice::Toy(t) if t.tokenizer.vocab.is_none())
}

/// Gives each predicted id (predictions, the lens, tracked tokens, the attribution's answer
/// and foil) its token string, from the model's tokenizer.
pub fn name_predictions(trace: &mut crate::trace::Trace, loaded: &super::loaded::Loaded, own_vocab: bool) {
    let name = super::namer::Namer::new(loaded, own_vocab);
    let lens = trace.lens.iter_mut().flatten().flatten();
    for p in trace.predictions.iter_mut().flatten().flatten().chain(lens.flatten()) {
        (p.token, p.text) = name.name(p.id);
    }
    super::tracked::name(trace, &name);
    if let Some(a) = trace.attribution.as_mut() {
        for x in std::iter::once(&mut a.answer).chain(a.foil.as_mut()) {
            (x.token, x.text) = name.name(x.id);
        }
    }
}
