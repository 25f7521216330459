//! A layer's attention a tile of queries at a time (`config/tiles.rs`): when none of its
//! `[head, query, key]` steps is recorded (or only `--head`'s few heads' are), each tile's
//! scores, mask, softmax and context are computed as `attention.rs` computes the whole
//! layer's, the tile's weights go to the recorder's readers (`--stats`, the summary's
//! strongest links) and are dropped, the kept heads' rows of any recorded square step are
//! gathered, and the tiles' contexts are joined. Each query's row is the untiled row's
//! arithmetic, so a layer of one tile (every short input) is the untiled layer.

use super::pass::Pass;
use crate::config::tiles::SQUARE_STEPS;
use crate::config::ModelConfig;
use crate::hook::Hooks;
use crate::trace::rows::WeightRows;
use crate::trace::{steps, Values};
use anyhow::Result;
use candle_core::{Device, Tensor};

/// Whether layer `l`'s attention runs in tiles: the model allows it, nothing reads the whole
/// matrices (a T5 bias, a hook at one of the layer's square steps, as attribution patching's
/// taps and `--attribute`'s at the weights), and
/// no square step of the layer is recorded, or only a few heads' (never a soft-capped
/// model's uncapped scores, which `mask::capped_and_masked` keeps to itself).
pub fn tiles(cfg: &ModelConfig, l: usize, pass: &Pass, hooks: &Hooks) -> bool {
    let hooked = SQUARE_STEPS.into_iter().any(|s| hooks.hooked(&format!("layers.{l}.{s}")));
    let whole_matrices = pass.bias.is_some() || hooked;
    let recorded = wanted(hooks, l);
    let few_heads = hooks.rec.kept_heads().is_some_and(|hs| hs.len() < cfg.heads);
    cfg.tiles_attention() && !whole_matrices && (recorded.is_empty() || few_heads && !recorded.contains(&UNCAPPED))
}

const UNCAPPED: &str = "attn.scores_uncapped";

/// The square steps of layer `l` the recorder keeps.
fn wanted(hooks: &Hooks, l: usize) -> Vec<&'static str> {
    SQUARE_STEPS.into_iter().filter(|s| hooks.rec.wants(&format!("layers.{l}.{s}"))).collect()
}

/// The context `[head, pos, d_v]` of queries `q` (`[head, pos, d_k]`, at positions from
/// `offset` on) over keys `k` and values `v` (`[head, key_pos, d]`, repeated per query head).
pub fn context(
    cfg: &ModelConfig,
    (q, k, v): (&Tensor, &Tensor, &Tensor),
    (l, offset): (usize, usize),
    hooks: &mut Hooks,
) -> Result<Tensor> {
    let (h, n, _) = q.dims3()?;
    let keys = k.dim(1)?;
    let mut gathered = Gathered::new(hooks, l, (n, keys))?;
    let tile = cfg.query_tile(hooks.run().query_tile, n, keys);
    let mut contexts = Vec::with_capacity(n.div_ceil(tile));
    for first in (0..n).step_by(tile) {
        let rows = tile.min(n - first);
        // A causal tile's queries see no key after its last: those columns would be −inf
        // scores and 0 weights, so they are left out of the arithmetic (and of the readers' rows),
        // unless a recorded step holds them.
        let seen = if cfg.causal && gathered.is_none() { (offset + first + rows).min(keys) } else { keys };
        let q_tile = q.narrow(1, first, rows)?; // [head, rows, d_k]
        let raw_scores = super::kernels::product::matmul(&q_tile, &k.narrow(1, 0, seen)?.t()?)?; // [head, rows, seen]
        let scaled = raw_scores.affine(cfg.scale, 0.0)?; // [head, rows, seen]
        let hidden = super::mask::hidden_rows(cfg, l, (offset + first, rows), seen); // [rows, seen]
        let scores = super::mask::capped_and_masked(cfg, scaled, hidden.as_deref(), l, None)?; // [head, rows, seen]
        let weights = super::kernels::softmax::softmax_last_dim(&scores)?; // [head, rows, seen]
        let weights =
            match super::mask::blind_rows(hidden.as_deref(), (h, offset + first, rows), (seen, &Default::default())) {
                Some(flags) => super::mask::zero_rows(&weights, &flags)?, // [head, rows, seen]
                None => weights,
            };
        contexts.push(super::kernels::product::matmul(&weights, &v.narrow(1, 0, seen)?)?); // [head, rows, d_v]
        if let Some(g) = gathered.as_mut() {
            g.tile(first, [&raw_scores, &scores, &weights], hidden.as_deref())?;
        }
        read(hooks, l, &weights, (first, n, keys))?;
    }
    if let Some(g) = gathered {
        g.record(cfg, l, hooks);
    }
    Ok(Tensor::cat(&contexts, 1)?) // [head, pos, d_v]
}

/// Hands layer `l`'s weights of queries `first..` (`[head, rows, width]`, the first `width`
/// of its `keys` keys; the rest are 0) to the recorder's readers, if it has any: a tile, or a
/// whole layer (`attention.rs`).
pub fn read(
    hooks: &mut Hooks,
    l: usize,
    weights: &Tensor,
    (first, queries, keys): (usize, usize, usize),
) -> Result<()> {
    if hooks.rec.reads_rows(l) {
        let (heads, rows, width) = weights.dims3()?;
        let values = weights.flatten_all()?.to_vec1::<f32>()?;
        hooks.rec.weight_rows(&WeightRows { layer: l, first, queries, heads, rows, keys, width, values: &values });
    }
    Ok(())
}

/// The recorded square steps of a tiled layer: `--head`'s heads' rows of `attn.raw_scores`,
/// `attn.scores` and `attn.weights` (`[kept head, query, key]`) and the mask's rows, each
/// copied into place as its tile is made.
struct Gathered {
    /// The kept heads, as an index for `index_select`.
    heads: Tensor,
    /// (name, `[kept head, query, key]` values) in the order `attention.rs` records them.
    steps: Vec<(&'static str, Vec<f32>)>,
    mask: Option<Vec<bool>>,
    size: (usize, usize, usize),
}

impl Gathered {
    /// None when layer `l` records no square step.
    fn new(hooks: &Hooks, l: usize, (n, keys): (usize, usize)) -> Result<Option<Gathered>> {
        let wanted = wanted(hooks, l);
        let Some(kept) = hooks.rec.kept_heads().filter(|_| !wanted.is_empty()) else { return Ok(None) };
        let s = kept.len();
        let per_head = ["attn.raw_scores", "attn.scores", "attn.weights"];
        let steps = per_head
            .into_iter()
            .map(|name| (name, if wanted.contains(&name) { vec![0.0; s * n * keys] } else { Vec::new() }));
        Ok(Some(Gathered {
            heads: Tensor::new(kept.iter().map(|&g| g as u32).collect::<Vec<_>>(), &Device::Cpu)?,
            steps: steps.collect(),
            mask: wanted.contains(&"attn.mask").then(Vec::new),
            size: (s, n, keys),
        }))
    }

    /// The tile of queries from `first` on: its raw scores, scores and weights (`[head, rows,
    /// key_pos]`) and mask (`[rows, key_pos]`, if the model hides keys).
    fn tile(&mut self, first: usize, tensors: [&Tensor; 3], hidden: Option<&[bool]>) -> Result<()> {
        let (s, n, keys) = self.size;
        for ((_, values), t) in self.steps.iter_mut().zip(tensors).filter(|((_, v), _)| !v.is_empty()) {
            let rows = t.dim(1)?;
            let kept = t.index_select(&self.heads, 0)?.flatten_all()?.to_vec1::<f32>()?; // [kept head, rows, key_pos]
            for g in 0..s {
                let at = (g * n + first) * keys;
                values[at..at + rows * keys].copy_from_slice(&kept[g * rows * keys..(g + 1) * rows * keys]);
            }
        }
        if let (Some(mask), Some(hidden)) = (self.mask.as_mut(), hidden) {
            mask.extend_from_slice(hidden);
        }
        Ok(())
    }

    /// Records the gathered steps in `attention.rs`' order (raw scores, mask, scores, weights).
    fn record(self, cfg: &ModelConfig, l: usize, hooks: &mut Hooks) {
        let (s, n, keys) = self.size;
        let mut steps = self.steps.into_iter().filter(|(_, v)| !v.is_empty()).peekable();
        let put = |hooks: &mut Hooks, (name, values): (&str, Vec<f32>)| {
            let dims = steps::dims(name, cfg);
            hooks.rec.record_kept_heads(&format!("layers.{l}.{name}"), &dims, &[s, n, keys], Values::F32(values));
        };
        if let Some(raw) = steps.next_if(|(name, _)| *name == "attn.raw_scores") {
            put(hooks, raw);
        }
        if let Some(mask) = self.mask.filter(|m| !m.is_empty()) {
            hooks.rec.record(
                &format!("layers.{l}.attn.mask"),
                &steps::dims("attn.mask", cfg),
                &[n, keys],
                Values::Bool(mask),
            );
        }
        steps.for_each(|step| put(hooks, step));
    }
}
