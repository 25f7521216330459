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
//!
//! Linear weights are stored as PyTorch's `nn.Linear` does, `[out, in]`, and applied as
//! `x·Wᵀ + b`. Head `h` owns rows `h·d_k .. (h+1)·d_k` of the fused q/k projections.

use anyhow::Result;
use candle_core::{Device, Tensor};
use std::sync::Arc;

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

/// `y = x·Wᵀ + b`, PyTorch's `nn.Linear` layout.
#[derive(Debug, Clone)]
pub struct Linear {
    /// [out, in]
    pub weight: Tensor,
    /// [out]
    pub bias: Option<Tensor>,
}

/// A norm's affine parameters: LayerNorm's weight and bias (PyTorch initialises them to
/// ones and zeros), or RMSNorm's weight alone.
#[derive(Debug, Clone)]
pub struct LayerNorm {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
}

#[derive(Debug, Clone)]
pub struct LayerParams {
    pub q_proj: Linear,
    pub k_proj: Linear,
    pub v_proj: Linear,
    /// `None`: `attn.out` is the concatenated heads (`--no-out-proj`).
    pub out_proj: Option<Linear>,
    /// The norms and FFN around the attention; `None` in an attention-only layer.
    pub block: Option<Block>,
    /// Per-head RMSNorms of q and k before the rotation (Qwen3, Gemma 3), each [d_k].
    pub qk_norm: Option<QkNorm>,
}

/// The q and k norms of one layer.
#[derive(Debug, Clone)]
pub struct QkNorm {
    pub q: LayerNorm,
    pub k: LayerNorm,
}

/// A layer's parts after its attention: two norms and the FFN.
#[derive(Debug, Clone)]
pub struct Block {
    pub norm1: LayerNorm,
    /// The FFN's first linear (the up projection of a gated FFN).
    pub linear1: Linear,
    /// The FFN's second linear (the down projection of a gated FFN).
    pub linear2: Linear,
    pub norm2: LayerNorm,
    /// A gated FFN's gate projection (SwiGLU).
    pub gate: Option<Linear>,
}

/// Where the layers' parameters are: made already, or read from the checkpoint one layer
/// at a time as the forward pass reaches it (in f32 only while that layer runs), so a model
/// whose weights do not fit in memory as f32 can still be traced.
#[derive(Clone)]
pub enum Layers {
    Ready(Vec<LayerParams>),
    /// `first` is layer 0 as the source read it to check the checkpoint before anything ran;
    /// the first pass over the layers uses it instead of reading it again.
    Lazy {
        count: usize,
        load: LoadLayer,
        first: std::sync::Arc<std::sync::Mutex<Option<LayerParams>>>,
    },
}

/// Reads and converts one layer's parameters.
pub type LoadLayer = std::sync::Arc<dyn Fn(usize) -> anyhow::Result<LayerParams> + Send + Sync>;

impl std::fmt::Debug for Layers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Layers::Ready(v) => write!(f, "Layers::Ready({} layers)", v.len()),
            Layers::Lazy { count, .. } => write!(f, "Layers::Lazy({count} layers)"),
        }
    }
}

impl Layers {
    pub fn len(&self) -> usize {
        match self {
            Layers::Ready(v) => v.len(),
            Layers::Lazy { count, .. } => *count,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `count` layers read by `load` as they are needed; `first` is layer 0, read already.
    pub fn lazy(count: usize, load: LoadLayer, first: LayerParams) -> Layers {
        Layers::Lazy { count, load, first: std::sync::Arc::new(std::sync::Mutex::new(Some(first))) }
    }

    /// Calls `f` on every layer in order. Lazy layers are read one ahead on a second thread,
    /// so reading (and converting or dequantizing) layer i + 1 overlaps computing layer i:
    /// at most two layers' f32 parameters exist at once.
    pub fn each(&self, f: impl FnMut(usize, &LayerParams) -> anyhow::Result<()>) -> anyhow::Result<()> {
        self.each_from(0, f)
    }

    /// [`each`](Self::each) from layer `from` on (a patched run starts where its patch is).
    pub fn each_from(
        &self,
        from: usize,
        mut f: impl FnMut(usize, &LayerParams) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let (count, load, first) = match self {
            Layers::Ready(v) => return v.iter().enumerate().skip(from).try_for_each(|(i, l)| f(i, l)),
            Layers::Lazy { count, load, first } => (*count, load, first),
        };
        // Layer 0 as the source's check read it, the first time only (a patching sweep
        // passes over the layers again).
        let mut cached = if from == 0 { first.lock().ok().and_then(|mut first| first.take()) } else { None };
        std::thread::scope(|s| {
            let read = |i: usize| {
                let load = load.clone();
                s.spawn(move || load(i))
            };
            let mut next = (from < count && cached.is_none()).then(|| read(from));
            for i in from..count {
                let this = match cached.take() {
                    Some(layer) => Some(Ok(Ok(layer))),
                    None => next.take().map(|h| h.join()),
                };
                next = (i + 1 < count).then(|| read(i + 1));
                let layer = match this {
                    Some(Ok(layer)) => layer?,
                    _ => anyhow::bail!("internal: reading layer {i} failed"),
                };
                f(i, &layer)?;
            }
            Ok(())
        })
    }

    /// Layer `i`: borrowed when made already, read now when lazy.
    pub fn get(&self, i: usize) -> anyhow::Result<std::borrow::Cow<'_, LayerParams>> {
        match self {
            Layers::Ready(v) => {
                v.get(i).map(std::borrow::Cow::Borrowed).ok_or_else(|| anyhow::anyhow!("internal: no layer {i}"))
            }
            Layers::Lazy { load, .. } => Ok(std::borrow::Cow::Owned(load(i)?)),
        }
    }
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
}

/// A `[rows, cols]` table that stays in its file's form (a GGUF file's quantized blocks) and
/// hands out rows in f32, each exactly as the whole table dequantized would hold it.
pub trait StoredRows: Send + Sync + std::fmt::Debug {
    /// Rows `start .. start + len`, [len, cols].
    fn rows(&self, start: usize, len: usize) -> Result<Tensor>;
    /// [rows, cols].
    fn dims(&self) -> (usize, usize);
}

/// A stored table whose rows a closure reads from the file that holds it (a GGUF file's
/// quantized blocks, a mapped checkpoint's bytes); `name` is for messages and `Debug`.
pub struct RowReader {
    name: String,
    dims: (usize, usize),
    read: Box<dyn Fn(usize, usize) -> Result<Tensor> + Send + Sync>,
}

impl RowReader {
    /// The reader, shared as the table `Stored` holds.
    pub fn shared(
        name: &str,
        dims: (usize, usize),
        read: impl Fn(usize, usize) -> Result<Tensor> + Send + Sync + 'static,
    ) -> Arc<dyn StoredRows> {
        Arc::new(RowReader { name: name.to_string(), dims, read: Box::new(read) })
    }
}

impl std::fmt::Debug for RowReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RowReader({}, {:?})", self.name, self.dims)
    }
}

impl StoredRows for RowReader {
    fn rows(&self, start: usize, len: usize) -> Result<Tensor> {
        (self.read)(start, len)
    }

    fn dims(&self) -> (usize, usize) {
        self.dims
    }
}

/// The token table and the unembedding of a checkpoint, in their stored form: a 0.5B model's
/// two 151,936 × 896 tables are 1.1 GB in f32, for an input that needs a few rows of one and
/// a product with the other that can be taken a slice at a time.
#[derive(Debug, Clone)]
pub struct Stored {
    pub token: Arc<dyn StoredRows>,
    /// The head's own table; None when it is tied to the token table.
    pub head: Option<Arc<dyn StoredRows>>,
}

impl Stored {
    /// The rows of `ids`, in order, [ids, cols].
    pub fn gather(&self, ids: &[u32]) -> Result<Tensor> {
        let rows: Vec<Tensor> = ids.iter().map(|&i| self.token.rows(i as usize, 1)).collect::<Result<_>>()?;
        if rows.is_empty() {
            let (_, cols) = self.token.dims();
            return Ok(Tensor::zeros((0, cols), candle_core::DType::F32, &Device::Cpu)?);
        }
        Ok(Tensor::cat(&rows, 0)?)
    }

    /// The unembedding's table.
    pub fn head(&self) -> &dyn StoredRows {
        self.head.as_deref().unwrap_or(&*self.token)
    }
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
                push_linear(&mut out, format!("{p}.ffn.linear1"), &b.linear1);
                push_linear(&mut out, format!("{p}.ffn.linear2"), &b.linear2);
                push_norm(&mut out, format!("{p}.norm2"), &b.norm2);
                if let Some(g) = &b.gate {
                    push_linear(&mut out, format!("{p}.ffn.gate"), g);
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
        let lin =
            Linear { weight: candle_core::Tensor::new(&[[i as f32]], &candle_core::Device::Cpu).unwrap(), bias: None };
        LayerParams {
            q_proj: lin.clone(),
            k_proj: lin.clone(),
            v_proj: lin,
            out_proj: None,
            block: None,
            qk_norm: None,
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
