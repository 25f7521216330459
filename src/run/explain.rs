//! `--attribute` where the position or the answer is known only after the run: `--at gen:K`
//! and `--at last` with `--generate` (the position where a generated token was chosen), and
//! `--attribute` without an answer (the token the model chose there against its runner-up).
//! After the run, one more forward pass over the prompt's ids followed by the first K
//! generated ids (teacher forcing: the KV-cache generation and a fresh pass over the same ids
//! compute the same logits up to summation order) attributes its last position. Without an
//! answer a quiet pass over the same ids first reads the model's two most probable tokens there.

use crate::analysis::interventions::Interventions;
use crate::error::usage;
use crate::params::{Input, Params};
use crate::settings::attribute::{Asked, At};
use crate::settings::Settings;
use crate::sources::Loaded;
use crate::trace::attribute::Request;
use crate::trace::{Recorder, Selection, Trace};
use anyhow::{Context, Result};

/// `--attribute`: tokenizes the answers as `--metric`'s are (without special tokens) and has
/// the settings check them against the model and the input.
pub(crate) fn asked(settings: &Settings, loaded: &Loaded) -> Result<Option<Asked>> {
    let Some((answer, foil)) = &settings.analysis.attribute else { return Ok(None) };
    let split = |tok: &tokenizers::Tokenizer, text: &str| -> crate::settings::plan::Tokenized {
        let e = tok.encode(text, false).map_err(|e| e.to_string())?;
        Ok((e.get_ids().to_vec(), e.get_tokens().to_vec()))
    };
    // Without an answer nothing is read (the split is not looked at).
    let texts = loaded.tokenizer.as_ref().map(|tok| crate::settings::attribute::AnswerTexts {
        answer: split(tok, answer.as_deref().unwrap_or_default()),
        foil: foil.as_deref().map(|f| split(tok, f)),
    });
    let texts_of = loaded.texts();
    crate::settings::attribute::request(settings, &loaded.cfg, (&loaded.tokens, texts_of.as_deref()), texts)
}

/// The request the model attributes in the run's own pass, when it is known before the run.
pub(crate) fn request(settings: &Settings, loaded: &Loaded) -> Result<Option<Request>> {
    Ok(asked(settings, loaded)?.and_then(|a| a.now()))
}

/// Fills `trace.attribution` when the run's own pass could not (see the module's comment).
pub(crate) fn explain(settings: &Settings, (loaded, params): (&Loaded, &Params), trace: &mut Trace) -> Result<()> {
    let Some(mut asked) = asked(settings, loaded)? else { return Ok(()) };
    if asked.now().is_some() {
        return Ok(());
    }
    // A generation's first token was chosen at the prompt's last position: without an answer,
    // that is the token the model wrote (with sampling, not always its most probable).
    if let (At::Position(p), Some(g)) = (asked.at, &trace.generation) {
        if p + 1 == g.prompt_tokens && !g.tokens.is_empty() {
            asked.at = At::Generated(0);
        }
    }
    let Input::Ids { ids: prompt, type_ids } = &loaded.input else {
        return Err(usage("--attribute", "the input is a matrix, not tokens", "pass a sentence instead of --input"));
    };
    let (ids, tokens, chosen) = sequence(&asked, trace, (prompt, &loaded.tokens))?;
    // A generated position has no token type; the prompt's own keep theirs.
    let type_ids = type_ids.clone().filter(|t| t.len() == ids.len());
    let input = Input::Ids { ids: ids.clone(), type_ids };
    let position = match asked.at {
        At::Position(p) => p,
        _ => ids.len() - 1,
    };
    let (answer, foil) = match asked.answer {
        Some(a) => (a, asked.foil),
        None => choice(loaded, params, (&input, &tokens), position, chosen)?,
    };
    let request = Request { position, answer, foil: foil.filter(|&f| f != answer) };
    let nothing = Selection { steps: Some(Default::default()), ..Default::default() };
    let n = tokens.len();
    let mut rec = Recorder::new(tokens, loaded.cfg.clone(), nothing);
    rec.set_input(None, Some(ids), None);
    let reading = crate::analysis::Reading::new(&loaded.cfg, params, n, (Some(request), None))?;
    let iv = Interventions::of(&loaded.cfg);
    let mut hooks = super::pass::hooks(loaded, &iv);
    reading.register(&loaded.cfg, &mut hooks);
    super::pass::forward(&loaded.cfg, params, &input, (&mut rec, &hooks)).context("attributing")?;
    trace.attribution = reading.finish(&loaded.cfg, &mut rec)?.attribution;
    Ok(())
}

/// The ids the attribution's pass reads, their tokens, and the token the model chose at the
/// last of them when it was generated (`gen:K`: the prompt and the first K generated tokens).
fn sequence(
    asked: &Asked,
    trace: &Trace,
    (prompt, tokens): (&[u32], &[String]),
) -> Result<(Vec<u32>, Vec<String>, Option<u32>)> {
    let at = |k: usize| format!("--at gen:{k}");
    let (g, k) = match (asked.at, trace.generation.as_ref()) {
        (At::Position(_), _) => return Ok((prompt.to_vec(), tokens.to_vec(), None)),
        (At::Generated(k), Some(g)) if k < g.tokens.len() => (g, k),
        (At::LastGenerated, Some(g)) if !g.tokens.is_empty() => (g, g.tokens.len() - 1),
        (At::Generated(k), Some(g)) => {
            let why =
                format!("the generation wrote {} tokens (it stopped: {}), numbered from 0", g.tokens.len(), g.stop);
            return Err(usage(at(k), why, "pass a smaller K, or --at last"));
        }
        (_, g) => {
            let why = format!("the generation wrote {} tokens", g.map_or(0, |g| g.tokens.len()));
            return Err(usage("--at last", why, "generate at least one token"));
        }
    };
    let written = &g.tokens[..k];
    let ids = prompt.iter().copied().chain(written.iter().map(|t| t.chosen.id)).collect();
    let names = written.iter().map(|t| t.chosen.token.clone().unwrap_or_else(|| format!("#{}", t.chosen.id)));
    Ok((ids, tokens.iter().cloned().chain(names).collect(), Some(g.tokens[k].chosen.id)))
}

/// The token the model chose at `position` (`chosen`, the generated one, else its most
/// probable) and its runner-up: the most probable other token there, from a quiet pass.
fn choice(
    loaded: &Loaded,
    params: &Params,
    (input, tokens): (&Input, &[String]),
    position: usize,
    chosen: Option<u32>,
) -> Result<(u32, Option<u32>)> {
    let nothing = Selection { steps: Some(Default::default()), ..Default::default() };
    let mut rec = Recorder::new(tokens.to_vec(), loaded.cfg.clone(), nothing).with_top_k(2);
    super::pass::forward(
        &loaded.cfg,
        params,
        input,
        (&mut rec, &super::pass::hooks(loaded, &Interventions::of(&loaded.cfg))),
    )
    .context("reading the model's choice")?;
    let top = rec.finish().0.predictions.and_then(|p| p.into_iter().nth(position)).unwrap_or_default();
    let Some(first) = top.first() else {
        return Err(usage(
            "--attribute",
            "the model has no next-token prediction there",
            "name the answer: --attribute ANSWER",
        ));
    };
    let answer = chosen.unwrap_or(first.id);
    let runner_up = top.iter().map(|p| p.id).find(|&id| id != answer);
    Ok((answer, runner_up))
}
