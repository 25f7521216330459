//! How this run goes, as against what the checkpoint says (`ModelConfig`): llama.cpp's
//! `llama_cparams` beside its `llama_hparams`. None of it is in the trace's JSON: it changes
//! how the numbers are computed or held, never which numbers a step holds (the `--arithmetic
//! ggml` details follow the file but only under that arithmetic).

/// The run's knobs, fixed once the sources are open.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunConfig {
    /// `--query-tile`: queries per tile of an attention that runs in tiles (`tiles.rs`);
    /// `None` sizes tiles by memory.
    pub query_tile: Option<usize>,
    /// The layers' parameters are read from the checkpoint one layer at a time (real
    /// decoders and encoder–decoders): the memory estimate counts one layer's, not all.
    pub layer_at_a_time: bool,
    /// The token table and head stay stored (`params::Stored`), for the estimate.
    pub vocab_stored: bool,
    /// `--arithmetic ggml` on a file whose Q and K rows llama.cpp permuted: its q·kᵀ sums each
    /// head's dimensions in the file's interleaved order (`model/kernels/ggml/exact.rs`).
    pub ggml_interleaved: bool,
    /// `--arithmetic ggml` on a Gemma file: llama.cpp scales q before its f16 rounding (its
    /// softmax's scale is 1), which differs from scaling the scores where q is tiny (f16's
    /// subnormals).
    pub ggml_scales_q: bool,
}

impl RunConfig {
    /// This run with every layer's parameters and the head in f32 at once (`Params::made`):
    /// what a generation or a server holds when the whole model fits.
    pub fn whole(&self) -> RunConfig {
        RunConfig { layer_at_a_time: false, vocab_stored: false, ..self.clone() }
    }
}
