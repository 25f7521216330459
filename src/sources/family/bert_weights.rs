//! BERT checkpoint names → [`Params`]. Names are looked up with or without the `bert.`
//! prefix (sentence-transformers checkpoints drop it), and older `gamma`/`beta` LayerNorm
//! names are accepted. Buffers such as `embeddings.position_ids` are ignored.

use super::bert::BertConfig;
use crate::error::usage;
use crate::params::{Block, Dense, Ffn, LayerNorm, LayerParams, Layers, Linear, MlmHead, Params};
use anyhow::Result;
use candle_core::safetensors::MmapedSafetensors;
use candle_core::{DType, Device, Tensor};
use std::path::Path;

pub struct Weights {
    st: MmapedSafetensors,
    prefix: &'static str,
    what: String,
    /// Keep the whole word table too (`--patch`: the corrupted sentence's rows are looked up
    /// after the clean trace, so its ids are not known when the rows are gathered).
    pub whole_table: bool,
}

impl Weights {
    pub fn open(path: &Path, what: &str) -> Result<Weights> {
        // SAFETY: the file is mapped read-only; as everywhere with mmap, it must not be
        // truncated while we run. candle's safetensors reader checks the header and offsets.
        let st = unsafe { MmapedSafetensors::new(path) }.map_err(|e| {
            let why = e.to_string().lines().next().unwrap_or("").to_string();
            usage(
                what,
                format!("model.safetensors is not a readable safetensors file ({why})"),
                "restore or re-download the model",
            )
        })?;
        let prefix = if st.get("bert.embeddings.word_embeddings.weight").is_ok() { "bert." } else { "" };
        Ok(Weights { st, prefix, what: what.to_string(), whole_table: false })
    }

    /// config.json's `num_hidden_layers` is the number of `encoder.layer.N` the file holds.
    pub fn check_layers(&self, count: usize) -> Result<()> {
        let names: Vec<String> = self.st.tensors().into_iter().map(|(n, _)| n).collect();
        let present =
            crate::sources::hf::checkpoint::layer_numbers(&names, &[&format!("{}encoder.layer.", self.prefix)]);
        crate::sources::hf::checkpoint::check_layers(count, &present, &self.what)
    }

    fn missing(&self, full: &str) -> anyhow::Error {
        usage(
            &self.what,
            format!("model.safetensors has no tensor {full}"),
            "use a BERT checkpoint with the standard names",
        )
    }

    fn check_shape(&self, full: &str, got: &[usize], want: &[usize]) -> Result<()> {
        if got != want {
            return Err(usage(
                &self.what,
                format!("tensor {full} has shape {got:?} but config.json implies {want:?}"),
                "use the config.json that belongs to these weights",
            ));
        }
        Ok(())
    }

    /// The word-embedding table's stored type when it is not f32 (`f16`, `bf16`, …).
    pub fn stored_dtype(&self) -> Option<String> {
        let view = self.st.get(&format!("{}embeddings.word_embeddings.weight", self.prefix)).ok()?;
        let dtype = format!("{:?}", view.dtype()).to_lowercase();
        (dtype != "f32").then_some(dtype)
    }

    /// Whether the checkpoint carries BertForMaskedLM's head (`cls.predictions.*`).
    pub fn has_mlm_head(&self) -> bool {
        self.st.get("cls.predictions.transform.dense.weight").is_ok()
    }

    /// A tensor named without the `bert.` prefix (the masked-LM head's).
    fn get_raw(&self, full: &str, shape: &[usize]) -> Result<Tensor> {
        // Shape and type are checked on the view, before anything is read.
        let view = self.st.get(full).map_err(|_| self.missing(full))?;
        self.check_shape(full, view.shape(), shape)?;
        crate::sources::hf::checkpoint::float_dtype(full, view.dtype(), &self.what)?;
        let t = self.st.load(full, &Device::Cpu)?;
        Ok(if t.dtype() == DType::F32 { t } else { t.to_dtype(DType::F32)? })
    }

    /// The masked-LM head, with the whole word table (tied unless the checkpoint has its own
    /// `cls.predictions.decoder.weight`).
    fn mlm_head(&self, c: &BertConfig) -> Result<MlmHead> {
        let d = c.hidden_size;
        let p = "cls.predictions";
        let dense = Linear {
            weight: self.get_raw(&format!("{p}.transform.dense.weight"), &[d, d])?,
            bias: Some(self.get_raw(&format!("{p}.transform.dense.bias"), &[d])?),
            ggml: None,
        };
        let norm = LayerNorm {
            weight: self.get_raw(&format!("{p}.transform.LayerNorm.weight"), &[d])?,
            bias: Some(self.get_raw(&format!("{p}.transform.LayerNorm.bias"), &[d])?),
        };
        let word = match self.get_raw(&format!("{p}.decoder.weight"), &[c.vocab_size, d]) {
            Ok(w) => w,
            Err(_) => self.get("embeddings.word_embeddings.weight", &[c.vocab_size, d])?,
        };
        let bias = self
            .get_raw(&format!("{p}.bias"), &[c.vocab_size])
            .or_else(|_| self.get_raw(&format!("{p}.decoder.bias"), &[c.vocab_size]))?;
        Ok(MlmHead { dense, norm, decoder: Linear { weight: word, bias: Some(bias), ggml: None } })
    }

    fn get(&self, name: &str, shape: &[usize]) -> Result<Tensor> {
        self.get_raw(&format!("{}{name}", self.prefix), shape)
    }

    fn linear(&self, name: &str, d_in: usize, d_out: usize) -> Result<Linear> {
        Ok(Linear {
            weight: self.get(&format!("{name}.weight"), &[d_out, d_in])?,
            bias: Some(self.get(&format!("{name}.bias"), &[d_out])?),
            ggml: None,
        })
    }

    fn norm(&self, name: &str, d: usize) -> Result<LayerNorm> {
        let w = self.get(&format!("{name}.weight"), &[d]).or_else(|_| self.get(&format!("{name}.gamma"), &[d]))?;
        let b = self.get(&format!("{name}.bias"), &[d]).or_else(|_| self.get(&format!("{name}.beta"), &[d]))?;
        Ok(LayerNorm { weight: w, bias: Some(b) })
    }

    /// The rows of a 2-D tensor for `ids`, read straight from the memory map: the word table
    /// (30522 × 384 for MiniLM, 47 MB) is never copied whole, only the rows a sentence uses.
    fn rows(&self, name: &str, shape: &[usize], ids: &[u32]) -> Result<Tensor> {
        let full = format!("{}{name}", self.prefix);
        let view = self.st.get(&full).map_err(|_| self.missing(&full))?;
        self.check_shape(&full, view.shape(), shape)?;
        if view.dtype() != safetensors::Dtype::F32 {
            // Other dtypes: load and convert the whole table, then look up.
            let table = self.get(name, shape)?;
            return Ok(table.index_select(&Tensor::new(ids, &Device::Cpu)?, 0)?);
        }
        let (d, data) = (shape[1], view.data());
        let mut out = Vec::with_capacity(ids.len() * d);
        for &id in ids {
            // The tokenizer's ids were checked against vocab_size, the table's first dimension.
            let row = &data[id as usize * d * 4..(id as usize + 1) * d * 4];
            out.extend(row.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])));
        }
        Ok(Tensor::from_vec(out, (ids.len(), d), &Device::Cpu)?)
    }

    /// Every parameter the trace of `ids` needs.
    pub fn params(&self, c: &BertConfig, ids: &[u32]) -> Result<Params> {
        let d = c.hidden_size;
        let token_rows = self.rows("embeddings.word_embeddings.weight", &[c.vocab_size, d], ids)?;
        let position = self.get("embeddings.position_embeddings.weight", &[c.max_position_embeddings, d])?;
        let token_type = self.get("embeddings.token_type_embeddings.weight", &[c.type_vocab_size, d])?;
        let embed_norm = self.norm("embeddings.LayerNorm", d)?;
        let mut layers = Vec::with_capacity(c.num_hidden_layers);
        for i in 0..c.num_hidden_layers {
            let p = format!("encoder.layer.{i}");
            layers.push(LayerParams {
                q_proj: self.linear(&format!("{p}.attention.self.query"), d, d)?,
                k_proj: self.linear(&format!("{p}.attention.self.key"), d, d)?,
                v_proj: self.linear(&format!("{p}.attention.self.value"), d, d)?,
                out_proj: Some(self.linear(&format!("{p}.attention.output.dense"), d, d)?),
                block: Some(Block {
                    norm1: self.norm(&format!("{p}.attention.output.LayerNorm"), d)?,
                    ffn: Ffn::Dense(Dense {
                        linear1: self.linear(&format!("{p}.intermediate.dense"), d, c.intermediate_size)?,
                        linear2: self.linear(&format!("{p}.output.dense"), c.intermediate_size, d)?,
                        gate: None,
                    }),
                    norm2: self.norm(&format!("{p}.output.LayerNorm"), d)?,
                    post_attn_norm: None,
                    post_ffn_norm: None,
                }),
                qk_norm: None,
                cross: None,
            });
        }
        let token = match self.whole_table {
            true => Some(self.get("embeddings.word_embeddings.weight", &[c.vocab_size, d])?),
            false => None,
        };
        Ok(Params {
            token,
            token_rows: Some(token_rows),
            position: Some(position),
            token_type: Some(token_type),
            embed_norm: Some(embed_norm),
            layers: Layers::Ready(layers),
            final_norm: None,
            lm_head: None,
            mlm: if self.has_mlm_head() { Some(self.mlm_head(c)?) } else { None },
            stored: None,
            relative_bias: None,
            decoder: None,
        })
    }
}

impl std::fmt::Debug for Weights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Weights({}, prefix {:?})", self.what, self.prefix)
    }
}
