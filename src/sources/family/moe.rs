//! The mixture-of-experts FFN of the Llama family's MoE variants (`llama.rs`: Mixtral,
//! Qwen2-MoE, Qwen3-MoE): their config keys, refusals and tensor names. Their attention,
//! norms and rotary positions are Llama's, so they are values of `Llama` whose FFN is one of
//! these; only the FFN is read here.
//!
//! | family | router | expert e (gate, up, down) | shared expert |
//! |---|---|---|---|
//! | `mixtral` | `block_sparse_moe.gate` | `block_sparse_moe.experts.{e}.w1`, `w3`, `w2` | — |
//! | `qwen2_moe` | `mlp.gate` | `mlp.experts.{e}.gate_proj`, `up_proj`, `down_proj` | `mlp.shared_expert.*`, gate `mlp.shared_expert_gate` |
//! | `qwen3_moe` | `mlp.gate` | as Qwen2-MoE | — |

use super::config::DecoderConfig;
use crate::config::Experts as Spec;
use crate::error::usage;
use crate::params::{Dense, Experts, Linear};
use crate::sources::store::TensorStore;
use anyhow::Result;
use candle_core::Tensor;

/// What one MoE variant names and assumes.
pub struct Moe {
    /// The config key of the expert count (`num_local_experts`, `num_experts`).
    count_key: &'static str,
    /// transformers' defaults for a config.json that leaves them out (`save_pretrained`
    /// omits values equal to the class's): experts, experts per token, expert width.
    defaults: (usize, usize, usize),
    /// The config key of each expert's width (`intermediate_size`, `moe_intermediate_size`).
    d_ff_key: &'static str,
    /// The block's module in a layer (`block_sparse_moe`, `mlp`).
    module: &'static str,
    /// Each expert's gate, up and down projections.
    proj: [&'static str; 3],
    /// The chosen weights are always renormalised (Mixtral has no `norm_topk_prob`).
    always_normalised: bool,
    /// Every token also runs a shared expert, scaled by a sigmoid gate (Qwen2-MoE).
    shared: Option<usize>,
    /// Layers may be dense (`decoder_sparse_step`, `mlp_only_layers`: Qwen's).
    sparse_step_keys: bool,
}

/// MixtralConfig's defaults: 8 experts, 2 per token, width 14,336 (`intermediate_size`).
pub static MIXTRAL: Moe = Moe {
    count_key: "num_local_experts",
    defaults: (8, 2, 14336),
    d_ff_key: "intermediate_size",
    module: "block_sparse_moe",
    proj: ["w1", "w3", "w2"],
    always_normalised: true,
    shared: None,
    sparse_step_keys: false,
};
/// Qwen2MoeConfig's defaults: 60 experts, 4 per token, width 1,408, shared width 5,632.
pub static QWEN2_MOE: Moe = Moe {
    count_key: "num_experts",
    defaults: (60, 4, 1408),
    d_ff_key: "moe_intermediate_size",
    module: "mlp",
    proj: ["gate_proj", "up_proj", "down_proj"],
    always_normalised: false,
    shared: Some(5632),
    sparse_step_keys: true,
};
/// Qwen3MoeConfig's defaults: 128 experts, 8 per token, width 768.
pub static QWEN3_MOE: Moe = Moe { defaults: (128, 8, 768), shared: None, ..QWEN2_MOE };

impl Moe {
    /// The mixture the config describes, checked: counts above 0, no more experts per token
    /// than experts, every layer sparse (transformers' dense layers are not read).
    pub fn spec(&self, c: &DecoderConfig, what: &str) -> Result<Spec> {
        let bad = |why: String| usage(what, format!("config.json: {why}"), "restore the model's config.json");
        let count = if self.count_key == "num_local_experts" { c.num_local_experts } else { c.num_experts };
        let count = count.unwrap_or(self.defaults.0);
        let top_k = c.num_experts_per_tok.unwrap_or(self.defaults.1);
        let d_ff = match self.d_ff_key {
            "intermediate_size" => c.intermediate_size.unwrap_or(self.defaults.2),
            _ => c.moe_intermediate_size.unwrap_or(self.defaults.2),
        };
        let shared_d_ff = self.shared.map(|d| c.shared_expert_intermediate_size.unwrap_or(d));
        let sizes = [
            (self.count_key, count),
            ("num_experts_per_tok", top_k),
            (self.d_ff_key, d_ff),
            ("shared_expert_intermediate_size", shared_d_ff.unwrap_or(1)),
        ];
        if let Some((key, _)) = sizes.iter().find(|(_, v)| *v == 0) {
            return Err(bad(format!("{key} is 0")));
        }
        if top_k > count {
            return Err(bad(format!("num_experts_per_tok {top_k} is more than {} {count}", self.count_key)));
        }
        if self.sparse_step_keys {
            if c.decoder_sparse_step.is_some_and(|s| s != 1) {
                return Err(usage(
                    what,
                    "decoder_sparse_step other than 1 (dense layers) is not supported",
                    "use a model with experts in every layer",
                ));
            }
            if c.mlp_only_layers.as_ref().is_some_and(|l| !l.is_empty()) {
                return Err(usage(
                    what,
                    "mlp_only_layers (dense layers) is not supported",
                    "use a model with experts in every layer",
                ));
            }
        }
        let norm_topk_prob = self.always_normalised || c.norm_topk_prob.unwrap_or(false);
        Ok(Spec { count, top_k, norm_topk_prob, d_ff, shared_d_ff })
    }

    /// Layer `p`'s mixture (`p` = `model.layers.{i}`): the router first, whose rows say how
    /// many experts the file holds, then every expert and the shared one.
    pub fn read(&self, c: &DecoderConfig, store: &dyn TensorStore, p: &str) -> Result<Experts> {
        let spec = self.spec(c, store.what())?;
        let (d, m) = (c.hidden_size, format!("{p}.{}", self.module));
        let lin = |name: &str, d_in: usize, d_out: usize| -> Result<Linear> {
            let name = format!("{name}.weight");
            Ok(Linear {
                weight: store.get(&name, &[d_out, d_in])?,
                bias: None,
                ggml: store.ggml_input(&name)?.map(std::sync::Arc::new),
            })
        };
        let name = format!("{m}.gate.weight");
        if let Some(rows) = store.shape(&name).filter(|s| s.len() == 2 && s[0] != spec.count).map(|s| s[0]) {
            let why = format!("{} is {} but tensor {name} holds {rows} experts", self.count_key, spec.count);
            return Err(usage(
                store.what(),
                format!("config.json: {why}"),
                "use the config.json that belongs to these weights",
            ));
        }
        let dense = |prefix: &str, ff: usize| -> Result<Dense> {
            let [gate, up, down] = self.proj.map(|n| format!("{prefix}.{n}"));
            Ok(Dense { gate: Some(lin(&gate, d, ff)?), linear1: lin(&up, d, ff)?, linear2: lin(&down, ff, d)? })
        };
        let router = lin(&format!("{m}.gate"), d, spec.count)?;
        // Each projection of every expert at once: a GGUF file stacks them in one tensor.
        let [gate, up, down] = self.proj.map(|n| format!("{m}.experts.{{e}}.{n}.weight"));
        let (ff, n) = (spec.d_ff, spec.count);
        let (gate, up, down) =
            (store.experts(&gate, n, &[ff, d])?, store.experts(&up, n, &[ff, d])?, store.experts(&down, n, &[d, ff])?);
        let [gate_g, up_g, down_g] = self.proj.map(|p| store.ggml_experts(&format!("{m}.experts.{{e}}.{p}.weight"), n));
        let (gate_g, up_g, down_g) = (gate_g?, up_g?, down_g?);
        let linear = |weight: &Tensor, ggml: &Option<crate::params::GgmlInput>| Linear {
            weight: weight.clone(),
            bias: None,
            ggml: ggml.clone().map(std::sync::Arc::new),
        };
        let experts = (0..n)
            .map(|e| Dense {
                gate: Some(linear(&gate[e], &gate_g[e])),
                linear1: linear(&up[e], &up_g[e]),
                linear2: linear(&down[e], &down_g[e]),
            })
            .collect();
        let shared = match spec.shared_d_ff {
            Some(ff) => {
                Some((dense(&format!("{m}.shared_expert"), ff)?, lin(&format!("{m}.shared_expert_gate"), d, 1)?))
            }
            None => None,
        };
        Ok(Experts { router, experts, shared })
    }
}
