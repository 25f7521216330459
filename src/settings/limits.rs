//! The memory cap: an estimate of every tensor a run allocates, checked before any is made,
//! so absurd sizes get an error instead of an out-of-memory kill.

use crate::config::{ModelConfig, Positions};
use crate::error::usage;
use crate::trace::{steps, Selection};
use anyhow::Result;

/// Parses sizes such as `2GiB`, `512MiB`, `100MB`, `65536` (bytes).
/// `--max-memory`: a size, or `auto` (the default): three quarters of the memory available to
/// this process (what the machine, its cgroup and `ulimit -v` leave; `cli::Env`), so a 7 B
/// checkpoint that runs in 2.4 GiB is not refused on a 24 GiB machine, while a quarter stays
/// for everything else; 2 GiB where the available memory is unknown. The available memory
/// stays a second cap either way ([`check_bytes`]).
pub fn max_memory(arg: &str, available: Option<u128>) -> Result<u128> {
    if arg.trim().eq_ignore_ascii_case("auto") {
        return Ok(available.map_or(2 << 30, |free| free / 4 * 3));
    }
    parse_size(arg)
}

pub fn parse_size(s: &str) -> Result<u128> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: u128 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "kib" => 1 << 10,
        "m" | "mb" => 1_000_000,
        "mib" => 1 << 20,
        "g" | "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        "t" | "tb" => 1_000_000_000_000,
        "tib" => 1 << 40,
        _ => return Err(bad_size(s)),
    };
    let n: u128 = num.parse().map_err(|_| bad_size(s))?;
    Ok(n.saturating_mul(mult))
}

fn bad_size(s: &str) -> anyhow::Error {
    usage(
        "--max-memory",
        format!("{} is not a size", crate::error::quote(s)),
        "write e.g. 512MiB, 8GiB, a number of bytes, or auto",
    )
}

/// Bytes the run's tensors need: the parameters (one layer's at a time for a checkpoint read
/// layer by layer), one layer's working tensors twice over (candle's tensors and a temporary
/// during reshapes), the logits with their softmax, and every step `record` keeps
/// twice (the trace's copy and the output's buffers). Steps nobody asked for are never kept
/// beyond their layer, so a long input with few recorded steps fits where recording everything
/// would not. With `streamed`, recorded steps are handed on as they are made (`--format jsonl`,
/// the summary table) and only the largest is held at once.
///
/// Computed in f64 so that absurd sizes (d_model = 2^64 − 1) cannot overflow.
pub fn estimate(cfg: &ModelConfig, n: usize, record: &Selection, streamed: bool) -> f64 {
    let u = |x: usize| x as f64;
    let (d, ff, h) = (u(cfg.d_model), u(cfg.d_ff), u(cfg.heads));
    let (qk, v) = (h * u(cfg.d_k), h * u(cfg.d_v));
    let n_f = u(n);
    // A stored token table is read a row per token; one in f32 is held whole.
    let table = if cfg.parts.vocab_stored { n_f } else { u(cfg.vocab_size) };
    let mut params = table * d;
    if cfg.positions == Positions::Learned {
        params += u(cfg.max_len) * d;
    }
    let (ffn_weights, ffn_bias) = ffn_params(cfg);
    let per_layer_params = d * qk * 2.0 + d * v + v * d + ffn_weights + 2.0 * qk + v + 7.0 * d + ffn_bias;
    // A checkpoint read a layer at a time holds two layers' parameters in f32 at once (the
    // next is read while one runs).
    params += if cfg.parts.layer_at_a_time { 2.0 * per_layer_params } else { u(cfg.layers) * per_layer_params };
    let n = n_f;
    // The scores, their scaled and masked copies and the weights, with the mask: a whole
    // layer's, or one tile's (`config::tiles`).
    let few_heads = record.head.as_ref().is_some_and(|hs| hs.len() < cfg.heads);
    let tiled = cfg.tiles_attention() && (few_heads || !record.keeps_square());
    let rows = if tiled { u(cfg.query_tile(n_f as usize, n_f as usize)) } else { n };
    let ffn_rows = if record.keeps_wide_ffn() { n } else { u(cfg.ffn_rows(n_f as usize)) };
    let per_layer_acts = n * (2.0 * qk + v)
        + 3.0 * h * rows * n
        + rows * n
        + 2.0 * n * v
        + 8.0 * n * d
        + 2.0 * ffn_rows * ff
        + expert_acts(cfg, n);
    let working = per_layer_acts + 6.0 * n * d;
    let mut logits = 0.0;
    if cfg.parts.lm_head.is_some() {
        // The head (a copy of the table when tied; one 4,096-row slice of a stored one, and
        // its product) and the logits with their softmax.
        params += if cfg.parts.vocab_stored { 4096.0 * (d + n_f) } else { u(cfg.vocab_size) * d };
        // Only a few positions' at once when only their predictions are kept (`model::unembed`).
        let named = record.steps.as_ref().is_some_and(|s| s.contains("logits") || s.contains("logits_uncapped"));
        let positions = if named { n } else { n.min(u(cfg.logit_rows())) };
        logits = 2.0 * positions * u(cfg.vocab_size);
    }
    let (total, largest) = recorded(cfg, n_f as usize, record);
    let kept = if streamed { largest } else { total };
    // Measured: SmolLM2's summary table at 4,096 tokens peaks at 3.1 GiB; this says 6.8 GiB.
    4.0 * (params + 2.0 * working + logits + 2.0 * kept)
}

/// One layer's FFN parameters, (weights, biases): the dense FFN's two matrices and bias, or a
/// mixture's router, every expert's three matrices (an MoE layer's experts are read with it:
/// they are most of its parameters) and the shared expert with its gate.
fn ffn_params(cfg: &ModelConfig) -> (f64, f64) {
    let (d, ff) = (cfg.d_model as f64, cfg.d_ff as f64);
    let Some(x) = &cfg.parts.experts else { return (2.0 * d * ff, ff) };
    let (count, shared) = (x.count as f64, x.shared_d_ff.map_or(0.0, |s| 3.0 * d * s as f64 + d));
    (count * d + count * 3.0 * d * x.d_ff as f64 + shared, 0.0)
}

/// A mixture's working tensors beyond a dense FFN's: the router's logits and probabilities,
/// the chosen experts' outputs and their rows gathered, one expert's hidden rows (at most
/// every position) and the shared expert's.
fn expert_acts(cfg: &ModelConfig, n: f64) -> f64 {
    let Some(x) = &cfg.parts.experts else { return 0.0 };
    let (d, k) = (cfg.d_model as f64, x.top_k as f64);
    2.0 * n * x.count as f64
        + 2.0 * n * k * d
        + n * d
        + 3.0 * n * x.d_ff as f64
        + 3.0 * n * x.shared_d_ff.unwrap_or(0) as f64
}

/// The elements of every step `record` keeps, and of the largest one.
fn recorded(cfg: &ModelConfig, n: usize, record: &Selection) -> (f64, f64) {
    let size = |name: &str| -> f64 {
        steps::dims(name, cfg)
            .iter()
            .map(|dim| match *dim {
                "pos" | "query_pos" | "key_pos" => n as f64,
                // `--head` narrows per-head steps as they are recorded.
                "head" => record.head.as_ref().map_or(cfg.heads, |hs| hs.len()) as f64,
                "kv_head" => cfg.kv_heads() as f64,
                "d_k" => cfg.d_k as f64,
                "d_v" | "d_head" => cfg.d_v.max(cfg.d_k) as f64,
                "d_ff" => cfg.d_ff as f64,
                "vocab" => cfg.vocab_size as f64,
                "heads·d_v" => (cfg.heads * cfg.d_v) as f64,
                "expert" => cfg.parts.experts.as_ref().map_or(0, |x| x.count) as f64,
                "rank" => cfg.parts.experts.as_ref().map_or(0, |x| x.top_k) as f64,
                "1" => 1.0,
                _ => cfg.d_model as f64,
            })
            .product()
    };
    let (mut total, mut largest) = (0.0f64, 0.0f64);
    for def in steps::CATALOGUE {
        // Steps as large as the vocabulary are recorded only when named (as the recorder does).
        if def.on_request && record.steps.is_none() {
            continue;
        }
        // A layer's FFN steps are the dense FFN's or the mixture's, never both.
        let moe_step = ["ffn.router.", "ffn.experts.", "ffn.shared."].iter().any(|p| def.name.starts_with(p));
        let dense_step = matches!(def.name, "ffn.hidden" | "ffn.gate" | "ffn.up" | "ffn.act");
        if (moe_step || dense_step) && moe_step != cfg.parts.experts.is_some() {
            continue;
        }
        let copies = if def.in_layer {
            layer_copies(cfg.layers, record, def.name)
        } else {
            usize::from(record.wants(def.name, None, def.name))
        };
        if copies > 0 {
            let s = size(def.name);
            total += copies as f64 * s;
            largest = largest.max(s);
        }
    }
    (total, largest)
}

/// How many of `layers` layers' `name` step `record` keeps: as many as
/// `record.wants("layers.{l}.{name}", …)` says yes to, counted without asking each layer
/// (`--layers 4000000000` would loop for minutes before its estimate refused it).
fn layer_copies(layers: usize, record: &Selection, name: &str) -> usize {
    let listed = |l: usize| l < layers && record.layer.as_ref().is_none_or(|w| w.contains(&l));
    let every = match &record.layer {
        Some(w) => w.iter().filter(|&&l| l < layers).collect::<std::collections::BTreeSet<_>>().len(),
        None => layers,
    };
    match &record.steps {
        Some(set) if !set.contains(name) => {
            let layer_of = |id: &String| -> Option<usize> {
                let (_, l, rest) = steps::parse_layer_id(id)?;
                (rest == name).then_some(l)
            };
            set.iter().filter_map(layer_of).filter(|&l| listed(l)).count()
        }
        _ => every,
    }
}

/// Refuses a run of `n` positions that [`check_run`] would refuse whatever the model, as soon as
/// a flag names `n` (`--pad-to`) and before anything sized by it exists: padding to 10⁹
/// tokens would otherwise make 10⁹ labels (24 GB) before the model's estimate is known.
/// Every model needs at least one head's `[n, n]` scores and weights, twice over as
/// [`estimate`] counts them: 32·n² bytes.
pub fn check_positions(flag: &str, n: usize, cap: u128, available: Option<u128>) -> Result<()> {
    let need = 32.0 * (n as f64) * (n as f64);
    let limit = available.map_or(cap, |free| free.min(cap));
    if need <= limit as f64 {
        return Ok(());
    }
    let why = if limit < cap { "the memory available to this process" } else { "the cap (--max-memory)" };
    Err(usage(
        flag,
        format!(
            "{n} positions need at least {} for their attention scores alone, above {why} of {}",
            human_f(need),
            human(limit)
        ),
        format!("pass a smaller {flag}, or raise the cap with --max-memory"),
    ))
}

/// Refuses a run of `s` whose tensors would need more than the cap (`--max-memory`) or than
/// the machine has available: an error now instead of an out-of-memory abort part way.
/// `record` as the plan says (`Plan::record`, `Plan::streamed`). In a batch, the results
/// already held for the sentences before it (`s.held`) count with this run's tensors, so the
/// whole batch stays under the caps.
pub fn check_run(cfg: &ModelConfig, n: usize, record: (&Selection, bool), s: &super::Settings) -> Result<()> {
    // An encoder–decoder's decoder is a second stack: its parameters and steps count too
    // (over the decoder's tokens, or a generation's length; `n` bounds both here).
    let decoder = cfg
        .parts
        .seq2seq
        .as_ref()
        .map_or(0.0, |d| estimate(&d.decoder, n.max(d.decoder_ids.len()), record.0, record.1));
    // A generation reads the prompt's logits whole, where `estimate` counts a few positions'.
    let prompt_logits = if s.generate.is_some() { 8.0 * n as f64 * cfg.vocab_size as f64 } else { 0.0 };
    let need = estimate(cfg, n, record.0, record.1) + decoder + attribution_bytes(cfg, n, s) + prompt_logits;
    if s.held == 0 {
        return check_bytes(need, "of tensors", s.max_memory, s.memory_available);
    }
    let total = need + s.held as f64;
    let limit = s.memory_available.map_or(s.max_memory, |free| free.min(s.max_memory));
    if total <= limit as f64 {
        return Ok(());
    }
    let why = if limit < s.max_memory { "the memory available to this process" } else { "the cap" };
    Err(usage(
        "sizes",
        format!(
            "this run needs about {} (its tensors, and {} of results the batch holds for the sentences before it), \
             above {why} of {}",
            human_f(total),
            human(s.held),
            human(limit)
        ),
        "split the batch into smaller files, or raise the cap with --max-memory",
    ))
}

/// `--attribute` on a post-norm stack or a masked-LM head keeps each head's sources as vectors
/// at the position (model/attribute: heads × tokens × d_model f64 a layer), and each later
/// norm makes a new copy while the old one is alive; a pre-norm one keeps numbers only.
fn attribution_bytes(cfg: &ModelConfig, n: usize, s: &super::Settings) -> f64 {
    let keeps = cfg.norm == crate::config::Norm::Post || cfg.parts.masked_lm;
    if s.analysis.attribute.is_none() || !keeps {
        return 0.0;
    }
    2.0 * 8.0 * (cfg.layers * cfg.heads) as f64 * n as f64 * cfg.d_model as f64
}

/// Refuses `need` bytes (what they hold: `what`) above the cap or the available memory.
/// Whether a run of `n` positions fits both caps with every layer's parameters in f32 at
/// once rather than a layer at a time (a generation, or a server answering many requests,
/// then converts the layers once instead of once per pass).
pub fn whole_model_fits(cfg: &ModelConfig, n: usize, record: (&Selection, bool), s: &super::Settings) -> bool {
    let mut whole = cfg.clone();
    whole.parts.layer_at_a_time = false;
    whole.parts.vocab_stored = false; // `Params::made` holds the head's table whole too
    check_run(&whole, n, record, s).is_ok()
}

pub fn check_bytes(need: f64, what: &str, cap: u128, available: Option<u128>) -> Result<()> {
    if need > cap as f64 {
        return Err(usage(
            "sizes",
            format!("this run needs about {} {what}, above the cap of {}", human_f(need), human(cap)),
            "use smaller dimensions or a shorter sentence, or raise the cap with --max-memory",
        ));
    }
    if let Some(free) = available.filter(|&free| need > free as f64) {
        return Err(usage(
            "sizes",
            format!(
                "this run needs about {} {what}, more than the {} available to this process",
                human_f(need),
                human(free)
            ),
            "use smaller dimensions or a shorter sentence, or free memory",
        ));
    }
    Ok(())
}

fn human_f(bytes: f64) -> String {
    if bytes < 1.2e21 {
        human(bytes as u128)
    } else {
        format!("{bytes:.1e} B")
    }
}

/// 1536 → "1.5 KiB".
pub fn human(bytes: u128) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < units.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", units[i])
    }
}

#[cfg(test)]
mod tests;
