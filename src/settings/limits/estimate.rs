//! The memory estimate: every tensor, step and buffer a run allocates, counted from its
//! configuration and what it records before any of it exists (`limits.rs` checks it).

use crate::config::{ModelConfig, Norm, Positions, RunConfig};
use crate::trace::{steps, Selection};

/// The resident memory of the program itself before it computes anything: its code and
/// data, the allocator's arenas, the standard library's buffers and the thread pool's stacks
/// (measured: `attn-trace a --steps none` peaks at 10.7 MiB with /usr/bin/time).
pub const BASELINE: f64 = 12.0 * 1048576.0;

/// Bytes one recorded step costs beyond its values: the `Step` (its id, name, dims and shape),
/// the candle tensor it was copied from while both exist, and the allocator's rounding of each
/// of their half-dozen allocations (measured: 20,000 layers of the toy model record 340,005
/// steps of 43 values on average and peak at 280 MiB with their parameters).
const STEP_BYTES: f64 = 448.0;

/// Bytes one parameter tensor costs beyond its values (candle's `Tensor_`, its layout and
/// storage headers, the allocator's rounding): a toy model holds all its layers' tensors.
const TENSOR_BYTES: f64 = 256.0;

/// Parameter tensors in one layer: q, k, v and output weights and biases, two norms' weights and
/// biases, the FFN's two or three weights and two biases.
const TENSORS_PER_LAYER: f64 = 17.0;

/// Bytes the run's tensors need: the parameters (one layer's at a time for a checkpoint read
/// layer by layer), one layer's working tensors twice over (candle's tensors and a temporary
/// during reshapes), the logits with their softmax, and every step `record` keeps
/// twice (the trace's copy and the output's buffers), each with its bookkeeping. Steps nobody
/// asked for are never kept beyond their layer, so a long input with few recorded steps fits
/// where recording everything would not. With `streamed`, recorded steps are handed on as they
/// are made (`--format jsonl`, the summary table) and only the largest is held at once.
///
/// Computed in f64 so that absurd sizes (d_model = 2^64 − 1) cannot overflow.
pub fn estimate((cfg, run): (&ModelConfig, &RunConfig), n: usize, record: &Selection, streamed: bool) -> f64 {
    let u = |x: usize| x as f64;
    let d = u(cfg.d_model);
    let n_f = u(n);
    // A stored token table is read a row per token; one in f32 is held whole.
    let table = if run.vocab_stored { n_f } else { u(cfg.vocab_size) };
    let mut params = table * d;
    if cfg.positions == Positions::Learned {
        params += u(cfg.max_len) * d;
    }
    // A checkpoint read a layer at a time holds two layers' parameters in f32 at once (the
    // next is read while one runs).
    let held_layers = if run.layer_at_a_time { 2.0_f64.min(u(cfg.layers)) } else { u(cfg.layers) };
    params += held_layers * layer_params(cfg);
    let overhead = held_layers * TENSORS_PER_LAYER * TENSOR_BYTES;
    let mut logits = 0.0;
    if cfg.parts.lm_head.is_some() {
        // The head (the table itself when tied; one 4,096-row slice of a stored one, and its
        // product) and the logits with their softmax.
        let tied = cfg.parts.lm_head.as_ref().is_some_and(|h| h.tied);
        params += match (run.vocab_stored, tied) {
            (true, _) => 4096.0 * (d + n_f),
            (false, true) => 0.0,
            (false, false) => u(cfg.vocab_size) * d,
        };
        // Only a few positions' at once when only their predictions are kept (`model::unembed`).
        let named = record.steps.as_ref().is_some_and(|s| s.contains("logits") || s.contains("logits_uncapped"));
        let positions = if named { n_f } else { n_f.min(u(cfg.logit_rows())) };
        logits = 2.0 * positions * u(cfg.vocab_size);
    }
    let kept = recorded(cfg, n, record);
    let (values, steps) = if streamed { (kept.largest, 1.0) } else { (kept.total, kept.count) };
    // A recorded step is a copy of a working tensor, so it is counted once (the working copy
    // of the layer being computed is in `working`).
    let (attention, rest) = working((cfg, run), n, record);
    4.0 * (params + attention + 2.0 * rest + logits + values) + overhead + steps * STEP_BYTES
}

/// The bytes the trace holds once the pass is over: every step `record` keeps with its
/// bookkeeping (none when they were handed on as they were made).
pub fn trace_bytes(cfg: &ModelConfig, n: usize, record: &Selection, streamed: bool) -> f64 {
    if streamed {
        return 0.0;
    }
    let kept = recorded(cfg, n, record);
    4.0 * kept.total + kept.count * STEP_BYTES
}

/// Every parameter of the model (elements): the token and position tables, every layer, and
/// an untied head.
pub fn model_params(cfg: &ModelConfig) -> f64 {
    let u = |x: usize| x as f64;
    let positions = if cfg.positions == Positions::Learned { u(cfg.max_len) } else { 0.0 };
    let head = match &cfg.parts.lm_head {
        Some(h) if !h.tied => u(cfg.vocab_size),
        _ => 0.0,
    };
    (u(cfg.vocab_size) + positions + head) * u(cfg.d_model) + u(cfg.layers) * layer_params(cfg)
}

/// One layer's parameters (elements): the attention's four projections with their biases, the
/// norms and the FFN (gated: three matrices).
fn layer_params(cfg: &ModelConfig) -> f64 {
    let u = |x: usize| x as f64;
    let (d, h, kv) = (u(cfg.d_model), u(cfg.heads), u(cfg.kv_heads()));
    // Grouped-query attention: k and v have the key/value heads only.
    let (q, k, v) = (h * u(cfg.d_k), kv * u(cfg.d_k), kv * u(cfg.d_v));
    let o = h * u(cfg.d_v);
    let (ffn_weights, ffn_bias) = ffn_params(cfg);
    d * (q + k + v) + o * d + ffn_weights + q + k + v + 7.0 * d + ffn_bias
}

/// One layer's working tensors (elements), as (attention, the rest): the scores, their scaled
/// and masked copies, the weights and a temporary, with the mask (a whole layer's, or one
/// tile's: `config::tiles`; measured at 1,000 and 2,000 toy tokens, five `[head, query, key]`
/// copies of a whole layer's are alive at once, four of a tile's or of llama.cpp's arithmetic's
/// (SmolLM2 at 2,000 tokens)); and q, k and v, the context, the residual stream's sums and norms,
/// and the FFN's hidden rows (a tile's when none is recorded), which `estimate` counts twice
/// (candle's tensors and a temporary during reshapes).
fn working((cfg, run): (&ModelConfig, &RunConfig), n: usize, record: &Selection) -> (f64, f64) {
    let u = |x: usize| x as f64;
    let (d, ff, h, n_f) = (u(cfg.d_model), u(cfg.d_ff), u(cfg.heads), u(n));
    let (qk, v) = (h * u(cfg.d_k), h * u(cfg.d_v));
    let few_heads = record.head.as_ref().is_some_and(|hs| hs.len() < cfg.heads);
    let tiled = cfg.tiles_attention() && (few_heads || !record.keeps_square());
    let rows = if tiled { u(cfg.query_tile(run.query_tile, n, n)) } else { n_f };
    let ffn_rows = if record.keeps_wide_ffn() { n_f } else { u(cfg.ffn_rows(n)) };
    let gates = if cfg.parts.gated_ffn { 3.0 } else { 2.0 };
    let copies = if tiled || cfg.parts.arithmetic != crate::config::Arithmetic::F32 { 4.0 } else { 5.0 };
    let attention = copies * h * rows * n_f + rows * n_f;
    let rest = n_f * (2.0 * qk + v) + 2.0 * n_f * v + 14.0 * n_f * d + gates * ffn_rows * ff + expert_acts(cfg, n_f);
    (attention, rest)
}

/// One layer's FFN parameters, (weights, biases): the dense FFN's two matrices and bias, or a
/// mixture's router, every expert's three matrices (an MoE layer's experts are read with it:
/// they are most of its parameters) and the shared expert with its gate.
fn ffn_params(cfg: &ModelConfig) -> (f64, f64) {
    let (d, ff) = (cfg.d_model as f64, cfg.d_ff as f64);
    let gates = if cfg.parts.gated_ffn { 3.0 } else { 2.0 };
    let Some(x) = &cfg.parts.experts else { return (gates * d * ff, ff) };
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

/// What a selection keeps: the elements of every step, of the largest one, and how many steps.
pub struct Kept {
    pub total: f64,
    pub largest: f64,
    pub count: f64,
}

/// The steps `record` keeps over `n` positions.
pub fn recorded(cfg: &ModelConfig, n: usize, record: &Selection) -> Kept {
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
    let (mut total, mut largest, mut count) = (0.0f64, 0.0f64, 0.0f64);
    for def in steps::CATALOGUE {
        // Steps as large as the vocabulary are recorded only when named (as the recorder does).
        if def.on_request && record.steps.is_none() {
            continue;
        }
        if !produced(def.name, cfg) {
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
            count += copies as f64;
        }
    }
    Kept { total, largest, count }
}

/// Whether a model of `cfg` makes the step `name` at all: the catalogue holds every family's
/// steps, and a toy layer makes 17 of its 50 (counting the others would more than double the
/// steps of a run of many small layers).
fn produced(name: &str, cfg: &ModelConfig) -> bool {
    let p = &cfg.parts;
    let pre = cfg.norm == Norm::Pre;
    let attention_only = p.attention_only;
    let cross = name.starts_with("cross_attn.") || name.contains("norm_cross");
    match name {
        _ if cross => p.cross_attention,
        "embed.token_type" => cfg.model.as_ref().is_some_and(|m| m.type_vocab_size > 0),
        "embed.token_scaled" => p.embed_scale.is_some(),
        "embed.position" => matches!(cfg.positions, Positions::Learned | Positions::Sinusoidal),
        "position_bias" => p.relative_bias.is_some(),
        "norm1.out" | "norm2.out" => pre || p.parallel,
        "attn.q_norm" | "attn.k_norm" => p.qk_norm,
        "attn.q_rot" | "attn.k_rot" => p.rope.is_some(),
        "norm1_post.out" | "norm2_post.out" => p.sandwich_norms,
        "attn.scores_uncapped" => p.attn_softcap.is_some(),
        "ffn.gate" | "ffn.up" => p.gated_ffn && !attention_only,
        "final_norm.out" => p.final_norm,
        "attribution.heads" | "attribution.sources" => false,
        n if n.starts_with("ffn.") || n.starts_with("add_norm") || n.starts_with("norm2") => !attention_only,
        _ => true,
    }
}

/// How many of `layers` layers' `name` step `record` keeps: as many as
/// `record.wants("layers.{l}.{name}", …)` says yes to, counted without asking each layer
/// (`--layers 4000000000` would loop for minutes before its estimate refused it).
pub(super) fn layer_copies(layers: usize, record: &Selection, name: &str) -> usize {
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
