//! The interventions and analyses (`--ablate`, `--ablate-mode`, `--ablate-expert`, `--knockout`, `--lens`,
//! `--stats`, `--rollout`), checked among themselves; ranges and knockout words are checked
//! against the model by the plan.

use crate::cli::{self, Cli};
use crate::config::AblateMode;
use crate::error::usage;
use anyhow::Result;

pub mod steer;

/// The interventions and analyses asked for; knockouts are resolved against the tokens by
/// the plan.
#[derive(Debug, Clone, Default)]
pub struct Analysis {
    /// Heads to ablate, as (layer, head); an encoder–decoder's with their stack (`enc.L.H`,
    /// `dec.L.H`, `cross.L.H`), resolved by `settings::stacks`.
    pub ablate: Vec<(usize, usize)>,
    pub ablate_stacked: Vec<(StackHeads, usize, usize)>,
    /// `--ablate-mode`.
    pub ablate_mode: AblateMode,
    /// Experts to remove from routing, as (layer, expert).
    pub ablate_expert: Vec<(usize, usize)>,
    /// `--knockout` as typed: `L[.H]:Q->K`.
    pub knockout: Vec<String>,
    pub lens: bool,
    /// `--lens-track`: texts whose token the lens follows (tokenized once the model is open).
    pub lens_track: Vec<String>,
    pub stats: bool,
    pub rollout: bool,
    /// `--induction N`: the input is N random tokens repeated twice.
    pub induction: Option<usize>,
    /// `--patch CORRUPTED`, what it copies, and `--metric A B`.
    pub patch: Option<String>,
    pub patch_resid: bool,
    /// `--patch-step STEP`: the in-layer step patched per position (and head).
    pub patch_step: Option<&'static str>,
    /// `--patch-method attribution`: the gradient's estimate of the grid.
    pub patch_attribution: bool,
    /// `--patch-path RECEIVERS`: path patching into these receivers.
    pub patch_path: Option<crate::params::receivers::Receivers>,
    pub metric: Option<(String, String)>,
    /// `--attribute [ANSWER [FOIL]]` and `--at POS|WORD|last|gen:K` (resolved by the plan);
    /// no ANSWER: the token the model chose there against its runner-up.
    pub attribute: Option<(Option<String>, Option<String>)>,
    pub at: Option<String>,
    /// `--steer`, `--steer-from`: steering vectors, read and checked once the model is open.
    pub steer: steer::Steering,
}

/// Which of an encoder–decoder's attentions an `--ablate` item names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackHeads {
    /// `enc.L.H`: the encoder's self-attention.
    Encoder,
    /// `dec.L.H`: the decoder's self-attention.
    Decoder,
    /// `cross.L.H`: the decoder's cross-attention.
    Cross,
}

/// The `--ablate` items that name a stack (`enc.`, `dec.`, `cross.`), split from the others.
fn stacked(list: &str) -> (Vec<(StackHeads, String)>, String) {
    let mut named = Vec::new();
    let mut plain = Vec::new();
    for item in list.split(',').map(str::trim) {
        let found = [("enc.", StackHeads::Encoder), ("dec.", StackHeads::Decoder), ("cross.", StackHeads::Cross)]
            .into_iter()
            .find_map(|(p, s)| item.strip_prefix(p).map(|rest| (s, rest.to_string())));
        match found {
            Some(x) => named.push(x),
            None => plain.push(item),
        }
    }
    (named, plain.join(","))
}

/// `--ablate 0.1,2.3` → [(0, 1), (2, 3)] (`--ablate-expert`'s `L.E` likewise, `what` naming
/// the second number); ranges are checked by the plan.
fn ablate_list(flag: &str, what: &str, list: &str) -> Result<Vec<(usize, usize)>> {
    let items: Vec<(usize, usize)> = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|item| {
            let parsed = item.split_once('.').and_then(|(l, h)| Some((l.parse().ok()?, h.parse().ok()?)));
            parsed.ok_or_else(|| {
                usage(
                    flag,
                    format!("{} is not LAYER.{what}", crate::error::quote(item)),
                    format!("write e.g. {flag} 0.1,2.3"),
                )
            })
        })
        .collect::<Result<_>>()?;
    if items.is_empty() {
        return Err(usage(flag, "the list is empty", format!("write e.g. {flag} 0.1,2.3")));
    }
    Ok(items)
}

/// `--ablate`'s heads: (layer, head) pairs, and an encoder–decoder's with their stacks.
#[allow(clippy::type_complexity)]
fn ablate_options(cli: &Cli) -> Result<(Vec<(usize, usize)>, Vec<(StackHeads, usize, usize)>)> {
    let (named, plain) = stacked(cli.ablate.as_deref().unwrap_or(""));
    let ablate = match plain.trim_matches(',').is_empty() && !named.is_empty() {
        true => Vec::new(),
        false => cli.ablate.as_ref().map(|_| ablate_list("--ablate", "HEAD", &plain)).transpose()?.unwrap_or_default(),
    };
    let mut ablate_stacked = Vec::new();
    for (stack, item) in named {
        let (l, h) = ablate_list("--ablate", "HEAD", &item)?[0];
        ablate_stacked.push((stack, l, h));
    }
    Ok((ablate, ablate_stacked))
}

/// `--ablate`, `--knockout`, `--lens`, `--stats`, `--rollout`, checked among themselves.
pub fn options(cli: &Cli) -> Result<Analysis> {
    let (ablate, ablate_stacked) = ablate_options(cli)?;
    let ablate_expert = cli
        .ablate_expert
        .as_deref()
        .map(|l| ablate_list("--ablate-expert", "EXPERT", l))
        .transpose()?
        .unwrap_or_default();
    let views = cli.lens || cli.stats || cli.rollout;
    if views && cli.format == cli::Format::Jsonl {
        return Err(usage(
            "--lens/--stats/--rollout",
            "--format jsonl writes each step as it is computed, and these need the whole trace",
            "use --format json or table",
        ));
    }
    if let Some(n) = cli.induction {
        if !(2..=4096).contains(&n) {
            return Err(usage(
                "--induction",
                format!("{n} tokens"),
                "pass a length from 2 to 4096, e.g. --induction 20",
            ));
        }
        if !cli.stats || cli.model.is_none() {
            return Err(usage(
                "--induction",
                "it adds induction scores to --stats on a real model",
                "add --stats and --model",
            ));
        }
    }
    patching(cli)?;
    attribution(cli)?;
    if cli.rollout && cli.head.is_some() {
        return Err(usage(
            "--rollout",
            "it averages every head, and --head keeps only some",
            "drop --head or --rollout",
        ));
    }
    Ok(Analysis {
        ablate,
        ablate_stacked,
        ablate_mode: match cli.ablate_mode {
            cli::AblateArg::Zero => AblateMode::Zero,
            cli::AblateArg::Mean => AblateMode::Mean,
        },
        ablate_expert,
        knockout: cli.knockout.clone(),
        lens: cli.lens,
        lens_track: cli.lens_track.clone(),
        stats: cli.stats,
        rollout: cli.rollout,
        induction: cli.induction,
        patch: cli.patch.clone(),
        patch_resid: cli.patch_what == cli::PatchArg::Resid,
        patch_step: patch_step(cli)?,
        patch_attribution: cli.patch_method == Some(cli::PatchMethodArg::Attribution),
        patch_path: path_patching(cli)?,
        metric: cli.metric.as_ref().map(|m| (m[0].clone(), m[1].clone())),
        attribute: cli.attribute.as_ref().map(|a| (a.first().cloned(), a.get(1).cloned())),
        at: cli.at.clone(),
        steer: steer::options(cli)?,
    })
}

/// `--patch`, `--patch-method` and `--metric` among the other flags; the corrupted sentence
/// and the answers are checked by the plan (`plan.rs`).
fn patching(cli: &Cli) -> Result<()> {
    if cli.metric.is_some() && cli.patch.is_none() {
        return Err(usage("--metric", "it is the metric of --patch", "add --patch CORRUPTED, or drop --metric"));
    }
    if cli.patch_method.is_some() && cli.patch.is_none() {
        return Err(usage(
            "--patch-method",
            "it is how --patch computes its grid",
            "add --patch CORRUPTED, or drop --patch-method",
        ));
    }
    if cli.patch_method == Some(cli::PatchMethodArg::Attribution) && !cli.knockout.is_empty() {
        // A query that sees no key has weights 0 by definition, not by the softmax: the
        // softmax's backward there is 0/0, and NaN would reach every gradient before it.
        return Err(usage(
            "--patch-method attribution",
            "--knockout can leave a query without any key, where the softmax has no gradient",
            "drop --knockout, or use --patch-method exact",
        ));
    }
    if cli.patch_method == Some(cli::PatchMethodArg::Attribution) && cli.arithmetic == cli::ArithmeticArg::Ggml {
        // llama.cpp's kernels compute from Vecs and integer blocks, outside the graph.
        return Err(usage(
            "--patch-method attribution",
            "--arithmetic ggml computes with llama.cpp's kernels, which have no gradient",
            "drop --arithmetic ggml, or use --patch-method exact",
        ));
    }
    if cli.patch.is_some() && cli.format == cli::Format::Jsonl {
        return Err(usage(
            "--patch",
            "--format jsonl streams one trace; a sweep reports many runs",
            "use --format json or table",
        ));
    }
    if cli.patch.is_some() && cli.pair.is_some() {
        // The corrupted input is one sentence: a pair's segment ids would not fit it.
        return Err(usage(
            "--patch",
            "the corrupted input is one sentence, and a second positional sentence (PAIR) makes the clean one two",
            "drop PAIR, or join the pair into one sentence",
        ));
    }
    Ok(())
}

/// `--patch-step STEP` checked among the other flags and against the step catalogue: an
/// in-layer step with a position axis (`[pos, …]`, or `[head, pos, …]` per head); whether
/// the model computes it in every layer is the sweep's to say.
fn patch_step(cli: &Cli) -> Result<Option<&'static str>> {
    let Some(name) = &cli.patch_step else { return Ok(None) };
    let clash = if cli.patch.is_none() {
        Some(("it is what --patch copies", "add --patch CORRUPTED, or drop --patch-step"))
    } else if cli.patch_what == cli::PatchArg::Resid {
        Some(("it names what --patch copies, as --patch-what does", "drop --patch-what resid"))
    } else if cli.patch_method == Some(cli::PatchMethodArg::Attribution) {
        Some(("attribution patching estimates heads' contexts and layer outputs", "use --patch-method exact"))
    } else if cli.patch_path.is_some() {
        Some(("path patching's senders are heads", "drop --patch-path"))
    } else {
        None
    };
    if let Some((why, fix)) = clash {
        return Err(usage("--patch-step", why, fix));
    }
    let def = crate::trace::steps::def(name).filter(|d| d.in_layer);
    let positions = |d: &crate::trace::steps::StepDef| matches!(d.dims, ["pos", _] | ["head", "pos" | "query_pos", _]);
    match def {
        Some(d) if d.name == "ffn.router.chosen" => Err(usage(
            "--patch-step",
            "it holds the chosen experts' indices, not activations",
            "patch ffn.router.weights",
        )),
        Some(d) if positions(d) => Ok(Some(d.name)),
        Some(_) => Err(usage(
            "--patch-step",
            format!("{name} has no position axis to patch along"),
            "name a step of shape [pos, …] or [head, pos, …]",
        )),
        None => Err(usage(
            "--patch-step",
            format!("{name} is not an in-layer step"),
            "name one without its layer, as docs/TRACE.md lists them: attn.q, attn.context, ffn.out, add_norm1.sum, …",
        )),
    }
}

/// `--patch-path RECEIVERS` read, and checked among the other flags (the receivers' layers
/// and heads are checked against the model by `analysis::patch::path`).
fn path_patching(cli: &Cli) -> Result<Option<crate::params::receivers::Receivers>> {
    let Some(text) = &cli.patch_path else { return Ok(None) };
    let clash = if cli.patch.is_none() {
        Some(("it is how --patch reads its corrupted run", "add --patch CORRUPTED, or drop --patch-path"))
    } else if cli.patch_method == Some(cli::PatchMethodArg::Attribution) {
        Some(("path patching runs exactly; attribution patching has no paths", "drop --patch-method attribution"))
    } else if cli.patch_what == cli::PatchArg::Resid {
        Some(("path patching's senders are heads", "drop --patch-what resid"))
    } else if cli.arithmetic == cli::ArithmeticArg::Ggml {
        Some(("it takes a head's output through its slice of the output projection in f32", "drop --arithmetic ggml"))
    } else {
        None
    };
    if let Some((why, fix)) = clash {
        return Err(usage("--patch-path", why, fix));
    }
    let receivers = crate::params::receivers::Receivers::parse(text)
        .map_err(|e| usage("--patch-path", e, "pass resid, logits, or heads as LAYER.HEAD:q|k|v, e.g. 9.6:q,9.9:q"))?;
    Ok(Some(receivers))
}

/// `--attribute` and `--at` among the other flags; the answers are read by the run's
/// tokenizer and checked by the plan (`plan_attribution.rs`).
fn attribution(cli: &Cli) -> Result<()> {
    if cli.at.is_some() && cli.attribute.is_none() {
        return Err(usage(
            "--at",
            "it is the position of --attribute",
            "add --attribute [ANSWER [FOIL]], or drop --at",
        ));
    }
    let Some(answers) = &cli.attribute else { return Ok(()) };
    if cli.format == cli::Format::Jsonl {
        return Err(usage(
            "--attribute",
            "--format jsonl writes each step as it is computed, and the sum check needs the whole run",
            "use --format json or table",
        ));
    }
    if let [answer, foil] = &answers[..] {
        if answer == foil {
            return Err(usage(
                "--attribute",
                format!("the foil {} is the answer, so the difference is 0", crate::error::quote(foil)),
                "pass another foil, or the answer alone for its own logit",
            ));
        }
    }
    Ok(())
}
