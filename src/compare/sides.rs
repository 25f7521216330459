//! Opening both sides of a comparison: each side's settings from its command line, the
//! prompt read once, each model opened and its prompt tokenized as a trace would, then the
//! refusals that make two runs incomparable: different families or shapes, different
//! vocabularies, a prompt the two tokenizers split differently (unless `--ids-from`), and a
//! memory estimate of both together. Nothing is computed until both sides are known to fit.

use super::cli::{Parsed, SideArg};
use super::found::SideInfo;
use crate::cli::Env;
use crate::config::ModelConfig;
use crate::error::usage;
use crate::params::Input;
use crate::settings::{Settings, Text};
use crate::sources::{Loaded, Source};
use anyhow::{Context, Result};

/// One side, opened: its settings, its input and configuration, and where its parameters
/// come from.
pub struct Side {
    pub settings: Settings,
    pub loaded: Loaded,
    pub source: Source,
    pub info: SideInfo,
}

/// Opens both sides and checks that they are comparable; returns them with the side whose
/// ids both ran on, when `--ids-from` had to choose.
pub fn open(parsed: &Parsed, env: &Env) -> Result<([Side; 2], Option<&'static str>)> {
    parsed.check()?;
    let [cli_a, cli_b] = parsed.sides();
    let tag = |i: usize| format!("model {} ({})", ["A", "B"][i], parsed.models[i]);
    let mut a = Settings::from_cli(cli_a, env).with_context(|| tag(0))?;
    let mut b = Settings::from_cli(cli_b, env).with_context(|| tag(1))?;
    // Standard input or a file is read once, for both sides.
    let text = match crate::sources::text::sentence(&a.text)? {
        Some(s) => Text::Arg(s),
        None => Text::None,
    };
    (a.text, b.text) = (text.clone(), text);
    let open = |i: usize, s: Settings| -> Result<Side> {
        let (loaded, source, _plan) = crate::run::prepare(&s).with_context(|| tag(i))?;
        let info = info(&parsed.models[i], &loaded.cfg);
        Ok(Side { settings: s, loaded, source, info })
    };
    let mut sides = [open(0, a)?, open(1, b)?];
    same_architecture(&sides)?;
    let from = same_tokens(&mut sides, parsed.cli.ids_from)?;
    fits(&sides)?;
    Ok((sides, from))
}

fn info(given: &str, cfg: &ModelConfig) -> SideInfo {
    let (family, stored) = match (&cfg.model, &cfg.init) {
        (Some(m), _) => (m.model_type.clone(), m.stored_dtype.clone()),
        (None, crate::config::InitConfig::File { stored_dtype, .. }) => ("toy".to_string(), stored_dtype.clone()),
        (None, _) => ("toy".to_string(), None),
    };
    SideInfo { given: given.to_string(), family, stored }
}

/// What a side is, for a refusal: `llama with 2 layers, 4 heads (2 key/value heads) of 8,
/// d_model 32, d_ff 64`.
fn shape(s: &Side) -> String {
    let c = &s.loaded.cfg;
    let kv = if c.kv_heads() != c.heads { format!(" ({} key/value heads)", c.kv_heads()) } else { String::new() };
    let head = if c.d_k == c.d_v { c.d_k.to_string() } else { format!("{}/{}", c.d_k, c.d_v) };
    format!(
        "{} with {} layers, {} heads{kv} of {head}, d_model {}, d_ff {}",
        s.info.family, c.layers, c.heads, c.d_model, c.d_ff
    )
}

/// One family and one shape, so that every step lines up; one vocabulary, so that the
/// predictions compare.
fn same_architecture([a, b]: &[Side; 2]) -> Result<()> {
    let dims = |c: &ModelConfig| (c.layers, c.heads, c.kv_heads(), c.d_k, c.d_v, c.d_model, c.d_ff);
    let (ca, cb) = (&a.loaded.cfg, &b.loaded.cfg);
    if a.info.family != b.info.family || dims(ca) != dims(cb) {
        let why = if a.info.family != b.info.family { "different architectures" } else { "different shapes" };
        return Err(usage(
            "compare",
            format!("A ({}) is {}; B ({}) is {}: {why}", a.info.given, shape(a), b.info.given, shape(b)),
            "compare two checkpoints of one architecture and size, e.g. a model and its quantization, or a base and its fine-tune",
        ));
    }
    if ca.vocab_size != cb.vocab_size {
        return Err(usage(
            "compare",
            format!(
                "A ({}) has a vocabulary of {} tokens, B ({}) of {}: different vocabularies",
                a.info.given, ca.vocab_size, b.info.given, cb.vocab_size
            ),
            "compare two models that share a tokenizer",
        ));
    }
    Ok(())
}

/// Each side's ids (None for a raw input matrix).
fn ids(s: &Side) -> Option<&Vec<u32>> {
    match &s.loaded.input {
        Input::Ids { ids, .. } => Some(ids),
        Input::Matrix(_) => None,
    }
}

/// The two tokenizations agree, or `--ids-from` gives one side's ids to the other.
fn same_tokens(sides: &mut [Side; 2], from: Option<SideArg>) -> Result<Option<&'static str>> {
    let same = match (ids(&sides[0]), ids(&sides[1])) {
        (Some(x), Some(y)) => x == y,
        _ => sides[0].loaded.tokens == sides[1].loaded.tokens,
    };
    if same {
        return Ok(None);
    }
    let Some(from) = from else {
        let (a, b) = (&sides[0].loaded.tokens, &sides[1].loaded.tokens);
        let at = a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()));
        return Err(usage(
            "compare",
            format!(
                "the two tokenizers split the prompt differently (from position {at}): A into {}; B into {}",
                split(&sides[0]),
                split(&sides[1])
            ),
            "pass --ids-from a or --ids-from b to run both models on one side's token ids",
        ));
    };
    let (src, dst) = if from == SideArg::A { (0, 1) } else { (1, 0) };
    let (Input::Ids { ids, type_ids }, Some(_)) = (&sides[src].loaded.input, ids(&sides[dst])) else {
        return Err(usage("--ids-from", "a side has no token ids (a raw input matrix)", "drop --ids-from"));
    };
    let (ids, type_ids) = (ids.clone(), type_ids.clone());
    let max = sides[dst].loaded.cfg.max_len;
    if ids.len() > max {
        return Err(usage(
            "--ids-from",
            format!("{} tokens are more than {} takes ({max})", ids.len(), sides[dst].info.given),
            "trace a shorter prompt",
        ));
    }
    let tokens = match &sides[dst].loaded.tokenizer {
        Some(tok) => ids.iter().map(|&i| tok.id_to_token(i).unwrap_or_else(|| format!("[{i}]"))).collect(),
        None => sides[src].loaded.tokens.clone(),
    };
    let side = &mut sides[dst];
    let before = std::mem::replace(&mut side.loaded.tokens, tokens).len();
    side.loaded.input = Input::Ids { ids, type_ids };
    let name = ["A", "B"][src];
    side.loaded.notes.push(format!("--ids-from: ran on {name}'s token ids (its own tokenizer made {before} tokens)"));
    Ok(Some(if src == 0 { "a" } else { "b" }))
}

/// A tokenization in one line: `5 tokens [<s>, The, ·capital, …]`, ids when there are.
fn split(s: &Side) -> String {
    const SHOWN: usize = 24;
    let labels: Vec<String> = match s.loaded.texts() {
        Some(t) => (0..s.loaded.tokens.len())
            .map(|i| crate::trace::label::label(&s.loaded.tokens[i], Some(&t[i])).into_owned())
            .collect(),
        None => s.loaded.tokens.clone(),
    };
    let pieces: Vec<String> = labels
        .iter()
        .zip(ids(s).into_iter().flatten().map(Some).chain(std::iter::repeat(None)))
        .take(SHOWN)
        .map(|(l, id)| id.map_or(l.clone(), |id| format!("{l} ({id})")))
        .collect();
    let more = if labels.len() > SHOWN { ", …" } else { "" };
    format!("{} tokens [{}{more}]", labels.len(), pieces.join(", "))
}

/// Both sides' tensors together under `--max-memory` and the memory available: each side's
/// estimate as a trace that records every step and hands each on (the comparison drops a
/// part's steps once compared).
fn fits(sides: &[Side; 2]) -> Result<()> {
    let every = crate::trace::Selection {
        steps: Some(crate::trace::steps::CATALOGUE.iter().map(|d| d.name.to_string()).collect()),
        ..Default::default()
    };
    let n = sides[0].loaded.tokens.len();
    let need: f64 =
        sides.iter().map(|s| crate::settings::limits::estimate((&s.loaded.cfg, &s.loaded.run), n, &every, true)).sum();
    let s = &sides[0].settings;
    crate::settings::limits::check_bytes(need, "of tensors for the two models", s.max_memory, s.memory_available)
}
