//! The model's inputs: what enters it ([`Input`]) and the parameters every source yields
//! ([`Params`]). They sit in the shared vocabulary so that `model/` imports no reader.
//!
//! [`Params`] mirrors the checkpoint's names, one struct per module, so that the names a
//! user sees in `--save-weights` files are the field paths here:
//!
//! | name | shape |
//! |---|---|
//! | `embed.token.weight` | [vocab_size, d_model] |
//! | `embed.position.weight` | [max_len, d_model] (learned positions only) |
//! | `layers.{i}.attn.q_proj.weight` / `.bias` | [heads·d_k, d_model] / [heads·d_k] |
//! | `layers.{i}.attn.k_proj.weight` / `.bias` | [heads·d_k, d_model] / [heads·d_k] |
//! | `layers.{i}.attn.v_proj.weight` / `.bias` | [heads·d_v, d_model] / [heads·d_v] |
//! | `layers.{i}.attn.out_proj.weight` / `.bias` | [d_model, heads·d_v] / [d_model] |
//! | `layers.{i}.norm1.weight` / `.bias` | [d_model] |
//! | `layers.{i}.ffn.linear1.weight` / `.bias` | [d_ff, d_model] / [d_ff] |
//! | `layers.{i}.ffn.linear2.weight` / `.bias` | [d_model, d_ff] / [d_model] |
//! | `layers.{i}.norm2.weight` / `.bias` | [d_model] |
//! | `layers.{i}.post_attn_norm.weight`, `post_ffn_norm.weight` | [d_model] (Gemma's sandwich norms) |
//!
//! Linear weights are stored as PyTorch's `nn.Linear` does, `[out, in]`, and applied as
//! `x·Wᵀ + b`. Head `h` owns rows `h·d_k .. (h+1)·d_k` of the fused q/k projections.

use candle_core::Tensor;

mod ggml;
mod layers;
mod modules;
pub mod receivers;
mod stored;
pub use ggml::{GgmlBlocks, GgmlInput, GgmlKBlocks, InputForm};
pub use layers::{Layers, LoadLayer};
pub use modules::{Block, Cross, Dense, Experts, Ffn, LayerNorm, LayerParams, Linear, QkNorm};
pub use stored::{RowReader, Stored, StoredRows, Whole};

/// What enters the model: token ids, or a raw `[pos, d_model]` matrix (seed 002).
#[derive(Debug, Clone)]
pub enum Input {
    /// Vocabulary ids, and BERT's token types (segment ids) for real models.
    Ids {
        ids: Vec<u32>,
        type_ids: Option<Vec<u32>>,
    },
    Matrix(Tensor),
}

/// Every parameter of one encoder stack.
#[derive(Debug, Clone)]
pub struct Params {
    /// [vocab_size, d_model]; absent when the input is a raw matrix, or when a real model's
    /// rows were gathered straight from its memory-mapped file into `token_rows`.
    pub token: Option<Tensor>,
    /// [pos, d_model]: the token-embedding rows of this input, already looked up.
    pub token_rows: Option<Tensor>,
    /// [max_len, d_model]; present only for learned positions.
    pub position: Option<Tensor>,
    /// [type_vocab_size, d_model]: BERT's segment embeddings (real models only).
    pub token_type: Option<Tensor>,
    /// BERT's LayerNorm over the embedding sum (real models only).
    pub embed_norm: Option<LayerNorm>,
    pub layers: Layers,
    /// The norm after the last layer (decoders).
    pub final_norm: Option<LayerNorm>,
    /// The unembedding, `[vocab_size, d_model]` (a copy of the token table when tied).
    pub lm_head: Option<Linear>,
    /// BERT's masked-LM head (`cls.predictions.*`), when the checkpoint has one.
    pub mlm: Option<MlmHead>,
    /// A checkpoint's vocabulary-wide tables kept in their stored form (then `token` and
    /// `lm_head` are None): only the rows a step needs are ever made f32.
    pub stored: Option<Stored>,
    /// T5's relative position bias table, [buckets, heads] (`config.relative_bias`).
    pub relative_bias: Option<Tensor>,
    /// An encoder–decoder: these parameters are the encoder's, and these the decoder's
    /// (`config.seq2seq`).
    pub decoder: Option<Box<Params>>,
}

/// BertForMaskedLM's head: logits = LayerNorm(act(h·W_denseᵀ + b))·W_wordᵀ + bias.
#[derive(Debug, Clone)]
pub struct MlmHead {
    pub dense: Linear,
    pub norm: LayerNorm,
    /// The word table (tied) and the output bias.
    pub decoder: Linear,
}

impl Params {
    /// These parameters with every layer read and converted once (`Layers::made`) and the
    /// stored head's table made f32 whole (`Stored::made`), an encoder–decoder's
    /// decoder's too: for many passes (a generation, a server).
    pub fn made(&self) -> anyhow::Result<Params> {
        let decoder = self.decoder.as_ref().map(|d| d.made().map(Box::new)).transpose()?;
        let stored = self.stored.as_ref().map(Stored::made).transpose()?;
        Ok(Params { layers: self.layers.made()?, decoder, stored, ..self.clone() })
    }

    /// Every parameter with its checkpoint name, in the order of the table above.
    pub fn named(&self) -> Vec<(String, &Tensor)> {
        let mut out: Vec<(String, &Tensor)> = Vec::new();
        if let Some(t) = &self.token {
            out.push(("embed.token.weight".into(), t));
        }
        if let Some(t) = &self.position {
            out.push(("embed.position.weight".into(), t));
        }
        // Lazily read layers belong to a checkpoint, which is never written back.
        let ready: &[LayerParams] = match &self.layers {
            Layers::Ready(v) => v,
            Layers::Lazy { .. } => &[],
        };
        for (i, l) in ready.iter().enumerate() {
            let p = crate::trace::steps::layer_id(i, "");
            let p = p.trim_end_matches('.');
            push_linear(&mut out, format!("{p}.attn.q_proj"), &l.q_proj);
            push_linear(&mut out, format!("{p}.attn.k_proj"), &l.k_proj);
            push_linear(&mut out, format!("{p}.attn.v_proj"), &l.v_proj);
            if let Some(o) = &l.out_proj {
                push_linear(&mut out, format!("{p}.attn.out_proj"), o);
            }
            if let Some(n) = &l.qk_norm {
                push_norm(&mut out, format!("{p}.attn.q_norm"), &n.q);
                push_norm(&mut out, format!("{p}.attn.k_norm"), &n.k);
            }
            if let Some(b) = &l.block {
                push_norm(&mut out, format!("{p}.norm1"), &b.norm1);
                match &b.ffn {
                    Ffn::Dense(f) => {
                        push_linear(&mut out, format!("{p}.ffn.linear1"), &f.linear1);
                        push_linear(&mut out, format!("{p}.ffn.linear2"), &f.linear2);
                        push_norm(&mut out, format!("{p}.norm2"), &b.norm2);
                        if let Some(g) = &f.gate {
                            push_linear(&mut out, format!("{p}.ffn.gate"), g);
                        }
                    }
                    Ffn::Experts(m) => {
                        push_norm(&mut out, format!("{p}.norm2"), &b.norm2);
                        push_linear(&mut out, format!("{p}.ffn.router"), &m.router);
                        for (e, f) in m.experts.iter().enumerate() {
                            push_dense(&mut out, format!("{p}.ffn.experts.{e}"), f);
                        }
                        if let Some((f, gate)) = &m.shared {
                            push_dense(&mut out, format!("{p}.ffn.shared"), f);
                            push_linear(&mut out, format!("{p}.ffn.shared.gate"), gate);
                        }
                    }
                }
                if let (Some(a), Some(f)) = (&b.post_attn_norm, &b.post_ffn_norm) {
                    push_norm(&mut out, format!("{p}.post_attn_norm"), a);
                    push_norm(&mut out, format!("{p}.post_ffn_norm"), f);
                }
            }
        }
        if let Some(n) = &self.final_norm {
            push_norm(&mut out, "final_norm".into(), n);
        }
        if let Some(h) = &self.lm_head {
            push_linear(&mut out, "lm_head".into(), h);
        }
        out
    }
}

/// A dense FFN's linears under `prefix` (an expert's, in a mixture).
fn push_dense<'a>(out: &mut Vec<(String, &'a Tensor)>, prefix: String, f: &'a Dense) {
    push_linear(out, format!("{prefix}.linear1"), &f.linear1);
    push_linear(out, format!("{prefix}.linear2"), &f.linear2);
    if let Some(g) = &f.gate {
        push_linear(out, format!("{prefix}.gate"), g);
    }
}

fn push_norm<'a>(out: &mut Vec<(String, &'a Tensor)>, prefix: String, n: &'a LayerNorm) {
    out.push((format!("{prefix}.weight"), &n.weight));
    if let Some(b) = &n.bias {
        out.push((format!("{prefix}.bias"), b));
    }
}

fn push_linear<'a>(out: &mut Vec<(String, &'a Tensor)>, prefix: String, lin: &'a Linear) {
    out.push((format!("{prefix}.weight"), &lin.weight));
    if let Some(b) = &lin.bias {
        out.push((format!("{prefix}.bias"), b));
    }
}

#[cfg(test)]
mod tests {
    use super::{LayerParams, Layers, Linear};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A layer whose q projection holds its index, so a pass can tell which layer it got.
    fn layer(i: usize) -> LayerParams {
        let lin = Linear {
            weight: candle_core::Tensor::new(&[[i as f32]], &candle_core::Device::Cpu).unwrap(),
            bias: None,
            ggml: None,
        };
        LayerParams {
            q_proj: lin.clone(),
            k_proj: lin.clone(),
            v_proj: lin,
            out_proj: None,
            block: None,
            qk_norm: None,
            cross: None,
        }
    }

    /// The check's layer 0 serves the first pass, which reads only layers 1 and 2; a second
    /// pass (a patching sweep) reads all three.
    #[test]
    fn the_first_pass_uses_layer_0_as_read_and_later_passes_read_it_again() {
        let reads = Arc::new(AtomicUsize::new(0));
        let counted = reads.clone();
        let load = Arc::new(move |i: usize| {
            counted.fetch_add(1, Ordering::SeqCst);
            Ok(layer(i))
        });
        let layers = Layers::lazy(3, load, layer(0));
        for pass in 0..2 {
            let mut seen = Vec::new();
            layers
                .each(|i, l| {
                    seen.push((i, l.q_proj.weight.flatten_all()?.to_vec1::<f32>()?[0]));
                    Ok(())
                })
                .unwrap();
            assert_eq!(seen, vec![(0, 0.0), (1, 1.0), (2, 2.0)]);
            assert_eq!(reads.load(Ordering::SeqCst), if pass == 0 { 2 } else { 5 });
        }
    }
}
