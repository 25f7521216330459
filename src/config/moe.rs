//! A mixture of experts in place of the dense FFN (Mixtral, Qwen2-MoE, Qwen3-MoE): a router
//! scores every expert per token, the `top_k` most probable run, and their outputs are
//! summed, weighted by their probabilities. `config.experts` in the JSON; absent without one.

use serde::Serialize;

/// The mixture's shape and routing rule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Experts {
    /// Experts per MoE layer (`num_local_experts`, `num_experts`).
    pub count: usize,
    /// Experts each token runs (`num_experts_per_tok`).
    pub top_k: usize,
    /// The chosen experts' probabilities are divided by their sum (Mixtral always, Qwen's
    /// `norm_topk_prob`); otherwise each weight is the expert's softmax probability.
    pub norm_topk_prob: bool,
    /// Each expert's FFN width (`intermediate_size` for Mixtral, `moe_intermediate_size`).
    pub d_ff: usize,
    /// Qwen2-MoE's shared expert: an FFN of this width that every token runs, its output
    /// scaled by `sigmoid(x·w_gateᵀ)` and added to the mixture.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared_d_ff: Option<usize>,
}
