//! The arithmetic of a forward pass: how many floating-point operations its matrix products
//! take, from the configuration and the number of positions, so that `--timings` can say how
//! many GFLOP/s the forward pass ran at and what share of the machine's f32 peak that is
//! (BENCHMARKS.md, "Share of the peak").
//!
//! A multiply-add counts as two operations. Counted: every matrix product the forward pass
//! computes — the q, k, v and output projections (grouped-query attention's narrower k and v),
//! each head's scores q·kᵀ and context weights·v over the keys *as computed* (attn-trace
//! computes the full square: a causal or windowed mask hides keys after the product, it does
//! not skip them), the FFN (two products, or three when gated; for a mixture of experts the
//! router, the `top_k` experts each position actually runs, and a shared expert with its gate),
//! and the head (vocabulary × d_model per position, BERT's masked-LM head with its dense
//! transform). Left out, as element-wise work of a few operations per value: norms, rotary
//! positions, the scale, masks and soft-caps, the softmax, activations, biases, residual sums
//! and the embedding lookup. For SmolLM2 at 512 tokens they come to the order of 1% of the
//! count (most of it the softmax's 9 × 512 exponentials per position and layer).
//!
//! [`forward_flops`] takes the number of new positions and the number of keys each attends
//! over separately, so that a decode step (one new position against a cache) is the same call
//! as a whole pass: `forward_flops(cfg, n, n)` for attn-trace's pass over n positions,
//! `forward_flops(cfg, 1, p + 1)` for one generated position after p cached ones.

use super::ModelConfig;

/// The floating-point operations of one forward pass, by part (multiply-adds × 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flops {
    /// Every layer's q, k, v and output projections.
    pub projections: u64,
    /// Every layer's scores (q·kᵀ) and context (weights·v), head by head.
    pub attention: u64,
    /// Every layer's FFN: a dense one, or the router, the chosen experts and a shared expert.
    pub ffn: u64,
    /// One application of the head to the new positions (0 for a model without one): the
    /// language-model head, or BERT's masked-LM head. The logit lens applies it once more per
    /// layer, and a run that asks for no logits not at all: see [`Flops::with_heads`].
    pub head: u64,
}

impl Flops {
    /// The layers' operations, without the head.
    pub fn layers(&self) -> u64 {
        self.projections + self.attention + self.ffn
    }

    /// The layers and one application of the head: a forward pass that computes its logits.
    pub fn total(&self) -> u64 {
        self.layers() + self.head
    }

    /// The layers and `heads` applications of the head: 0 when no logits were computed, 1 for
    /// the final logits, and one more per layer with the logit lens.
    pub fn with_heads(&self, heads: usize) -> u64 {
        self.layers() + self.head * heads as u64
    }
}

/// The operations of a forward pass of `new_positions` positions whose queries each score
/// `keys` keys (the new positions included): `(n, n)` for a pass over n positions as
/// attn-trace computes it, `(1, p + 1)` for a decode step after `p` cached positions. See the
/// module documentation for what is counted.
pub fn forward_flops(cfg: &ModelConfig, new_positions: usize, keys: usize) -> Flops {
    let (n, keys, d) = (new_positions as u64, keys as u64, cfg.d_model as u64);
    let layers = cfg.layers as u64;
    let out_proj = if cfg.parts.no_out_proj { 0 } else { cfg.v_width() * cfg.out_width() };
    let projections = d * (cfg.qk_width() + cfg.k_width() + cfg.kv_v_width()) as u64 + out_proj as u64;
    let (h, d_k, d_v) = (cfg.heads as u64, cfg.d_k as u64, cfg.d_v as u64);
    let attention = h * keys * (d_k + d_v);
    Flops {
        projections: 2 * layers * n * projections,
        attention: 2 * layers * n * attention,
        ffn: 2 * layers * n * ffn_per_position(cfg),
        head: 2 * n * head_per_position(cfg),
    }
}

/// The multiply-adds of one position's FFN.
fn ffn_per_position(cfg: &ModelConfig) -> u64 {
    if cfg.parts.attention_only {
        return 0;
    }
    let d = cfg.d_model as u64;
    // Two products of d_model × width, or three when gated (gate, up, down).
    let dense = |width: usize| (if cfg.parts.gated_ffn { 3 } else { 2 }) * d * width as u64;
    match &cfg.parts.experts {
        None => dense(cfg.d_ff),
        Some(e) => {
            let router = d * e.count as u64;
            let chosen = e.top_k.min(e.count) as u64 * dense(e.d_ff);
            // Qwen2-MoE's shared expert, and its one-column gate.
            let shared = e.shared_d_ff.map_or(0, |w| dense(w) + d);
            router + chosen + shared
        }
    }
}

/// The multiply-adds of one position through the head.
fn head_per_position(cfg: &ModelConfig) -> u64 {
    let (d, vocab) = (cfg.d_model as u64, cfg.vocab_size as u64);
    if cfg.parts.masked_lm {
        d * d + d * vocab // the dense transform, then the word table
    } else if cfg.parts.lm_head.is_some() {
        d * vocab
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Experts, LmHead, Parts};

    /// A small decoder counted by hand: d_model 8, 4 query heads over 2 key/value heads of
    /// width 2, a gated FFN of 16, 3 layers, a vocabulary of 10, 5 positions.
    fn small() -> ModelConfig {
        let parts =
            Parts { kv_heads: Some(2), gated_ffn: true, lm_head: Some(LmHead { tied: false }), ..Default::default() };
        ModelConfig {
            d_model: 8,
            heads: 4,
            d_k: 2,
            d_v: 2,
            d_ff: 16,
            layers: 3,
            vocab_size: 10,
            parts,
            ..ModelConfig::toy()
        }
    }

    #[test]
    fn a_small_decoder_counted_by_hand() {
        let f = forward_flops(&small(), 5, 5);
        // Per position and layer: q 8×8 = 64, k 8×4 = 32, v 8×4 = 32, o 8×8 = 64 → 192
        // multiply-adds; × 2 × 5 positions × 3 layers = 5760.
        assert_eq!(f.projections, 5760);
        // Scores 4 heads × 5 keys × 2, context the same: 80 per position and layer → 2400.
        assert_eq!(f.attention, 2400);
        // Gate, up and down: 3 × 8 × 16 = 384 → 11520.
        assert_eq!(f.ffn, 11520);
        // Head: 8 × 10 per position → 800, once.
        assert_eq!(f.head, 800);
        assert_eq!((f.layers(), f.total(), f.with_heads(0), f.with_heads(4)), (19680, 20480, 19680, 22880));
    }

    /// A decode step: one position, its scores over the cache and itself.
    #[test]
    fn a_decode_step_is_one_position_against_every_key() {
        let f = forward_flops(&small(), 1, 7);
        assert_eq!(f.projections, 2 * 3 * 192);
        assert_eq!(f.attention, 2 * 3 * 4 * 7 * (2 + 2));
        assert_eq!(f.ffn, 2 * 3 * 384);
        assert_eq!(f.head, 2 * 80);
        // n positions at once cost what n single positions against n keys each cost.
        let one = forward_flops(&small(), 1, 5);
        assert_eq!(forward_flops(&small(), 5, 5).total(), 5 * one.total());
    }

    /// A mixture runs the router, top-k experts per position and the shared expert with its
    /// gate; an ungated FFN two products; the seed encoder has no head.
    #[test]
    fn experts_count_what_each_position_runs() {
        let experts = Experts { count: 6, top_k: 2, norm_topk_prob: true, d_ff: 4, shared_d_ff: Some(12) };
        let mut cfg = small();
        cfg.parts.experts = Some(experts);
        // Router 8 × 6 = 48; two experts of 3 × 8 × 4 = 96 each; shared 3 × 8 × 12 = 288 and
        // its gate 8: 536 per position and layer.
        assert_eq!(forward_flops(&cfg, 5, 5).ffn, 2 * 3 * 5 * 536);
        let toy = ModelConfig::toy(); // d_model 4, one head of 4, ReLU FFN of 8, one layer
        let f = forward_flops(&toy, 3, 3);
        assert_eq!((f.projections, f.attention, f.ffn, f.head), (2 * 3 * 64, 2 * 3 * 3 * 8, 2 * 3 * 64, 0));
    }

    /// BERT's masked-LM head: the dense transform and the word table, at every position; an
    /// attention-only block without an output projection: q, k, v and the scores alone.
    #[test]
    fn masked_lm_heads_and_attention_only_blocks() {
        let mut cfg = ModelConfig { vocab_size: 30, ..ModelConfig::toy() };
        cfg.parts.masked_lm = true;
        assert_eq!(forward_flops(&cfg, 2, 2).head, 2 * 2 * (16 + 4 * 30));
        cfg.parts = Parts { attention_only: true, no_out_proj: true, ..Default::default() };
        let f = forward_flops(&cfg, 2, 2);
        assert_eq!((f.projections, f.ffn, f.head), (2 * 2 * 48, 0, 0));
    }

    /// SmolLM2-135M (d_model 576, 9 heads over 3 of width 64, gated FFN 1536, 30 layers,
    /// vocabulary 49,152): 0.304 GFLOP per position at 512 positions, the head 19% of it.
    #[test]
    fn smollm2_at_512_positions() {
        let parts =
            Parts { kv_heads: Some(3), gated_ffn: true, lm_head: Some(LmHead { tied: true }), ..Default::default() };
        let cfg = ModelConfig {
            d_model: 576,
            heads: 9,
            d_k: 64,
            d_v: 64,
            d_ff: 1536,
            layers: 30,
            vocab_size: 49152,
            parts,
            ..ModelConfig::toy()
        };
        let f = forward_flops(&cfg, 512, 512);
        assert_eq!(f.projections, 2 * 30 * 512 * (576 * (576 + 192 + 192) + 576 * 576));
        assert_eq!(f.total(), 155_826_782_208);
        assert_eq!(f.head, 2 * 512 * 576 * 49152);
    }
}
