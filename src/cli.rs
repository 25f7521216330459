//! The command line exactly as typed: clap parses it, `settings` checks it. Doc comments
//! here are the `--help` text.
//! long: one field per flag, with its --help text; split, the help would be scattered.

use clap::{Parser, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// One titled table per step and head, rows labelled by token.
    Table,
    /// One JSON document: schema_version, input, config, steps.
    Json,
    /// JSON Lines: a header line (schema_version, input, config), then one step per line,
    /// written as each step is computed.
    Jsonl,
    /// Each head's attention weights as a coloured grid (shaded characters without colour).
    Heatmap,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NamesArg {
    /// attn-trace's step ids and layouts (layers.0.attn.q as [head, pos, d_head]).
    AttnTrace,
    /// TransformerLens's hook names and cache layouts (blocks.0.attn.hook_q as
    /// [batch, pos, head, d_head]); steps without a hook are left out.
    TransformerLens,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ArithmeticArg {
    F32,
    Ggml,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorArg {
    /// Colour when stdout is a terminal and NO_COLOR is not set.
    Auto,
    Always,
    Never,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PositionsArg {
    Learned,
    Sinusoidal,
    None,
    /// Rotary positions (RoPE) on q and k in every layer, as the Llama family has them.
    Rope,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NormArg {
    Post,
    Pre,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ActivationArg {
    Relu,
    Gelu,
    /// x·σ(x), the gate activation of SwiGLU (with --gated).
    Silu,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LmHeadArg {
    /// Its own nn.Linear(d_model, vocab, bias=False), drawn after the last layer.
    Own,
    /// The token-embedding table, reused.
    Tied,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum InitArg {
    /// PyTorch's CPU generator as on x86-64 with AVX2 (the usual tutorial machine).
    Torch,
    /// PyTorch's CPU generator as on x86-64 without AVX2 (`ATEN_CPU_CAPABILITY=default`).
    TorchGeneric,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LinearInitArg {
    /// Like nn.Linear: Kaiming-uniform weight in ±1/√in, then bias.
    Kaiming,
    /// Like a raw torch.rand matrix, uniform in [0, 1), as hand-written walkthroughs draw
    /// their weights (Raschka's "Life is short, eat dessert first" post).
    Rand,
    /// As nn.TransformerEncoderLayer draws its own (xavier in-projection, zero attention
    /// biases), every layer a copy of the first, as nn.TransformerEncoder makes them.
    EncoderLayer,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LayoutArg {
    /// torch.rand(d_out, d_in), used as W·x (stored as nn.Linear stores weights).
    OutIn,
    /// torch.rand(d_in, d_out), used as x·W (as in "Life is short, eat dessert first").
    InOut,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum VocabOrderArg {
    /// Ids in order of first appearance ("my" 0, "shoes" 1, "are" 2, …).
    FirstSeen,
    /// Ids in sorted order, upper case first, as Python's sorted(set(words)) numbers them.
    Sorted,
}

/// `--stack`: which of an encoder–decoder's attentions the views draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum ViewStack {
    /// The decoder's cross-attention: decoder tokens × source tokens.
    #[default]
    Cross,
    /// The encoder's self-attention over the source tokens.
    Encoder,
    /// The decoder's (causal) self-attention over its own tokens.
    Decoder,
}

/// Trace transformer encoders and decoders step by step: BERT, GPT-2, Llama, Qwen2, Mistral,
/// Gemma, Phi-3, T5, BART, GGUF and Ollama files, toy models.
///
/// Every intermediate tensor, named and labelled by token: tables, heatmaps, an HTML page and SVG
/// maps for people, one JSON document for jq and CI.
#[derive(Debug, Clone, Parser)]
#[command(name = "attn-trace", version, max_term_width = 100)]
#[command(
    after_help = "Step ids and the JSON document are described in docs/OUTPUT.md, every option and the exit codes (0 ok, 1 failure, 2 usage) in docs/OPTIONS.md."
)]
pub struct Cli {
    /// The sentence to trace; "-" reads it from standard input.
    #[arg(value_name = "SENTENCE")]
    pub sentence: Option<String>,
    /// Read the sentence from a file (UTF-8; surrounding white space is trimmed).
    #[arg(long, value_name = "FILE", conflicts_with = "sentence", help_heading = "Tokens")]
    pub file: Option<std::path::PathBuf>,
    /// A second sentence: with a BERT model, the second sentence of a pair (token types 1);
    /// with the toy model or a decoder, the next sentence of a batch (each traced on its own).
    #[arg(value_name = "PAIR")]
    pub pair: Option<String>,
    /// An encoder–decoder (T5, BART): the decoder's text, traced by teacher forcing (its
    /// tokens shifted right after the decoder's start token, as in training).
    #[arg(long, value_name = "TEXT", help_heading = "Tokens")]
    pub target: Option<String>,
    /// More sentences of a batch (not with BERT, whose two sentences are a pair: use --batch).
    #[arg(value_name = "MORE")]
    pub more: Vec<String>,
    /// Pad the tokens to N with the pad token (a model's pad token, else its eos token; the
    /// toy model's <pad>) and hide the pads from every query, as transformers' attention_mask
    /// and PyTorch's key padding masks do.
    #[arg(long, value_name = "N", help_heading = "Tokens")]
    pub pad_to: Option<usize>,
    /// With --pad-to: where the pad tokens go [default: right].
    #[arg(long, value_enum, help_heading = "Tokens")]
    pub padding: Option<PaddingArg>,
    /// Trace every line of FILE as its own sentence (UTF-8, one per line; an empty line is an
    /// error): one trace per sentence.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["sentence", "file"], help_heading = "Tokens")]
    pub batch: Option<std::path::PathBuf>,

    // ---- real models ----
    /// A Hugging Face model folder (config.json, weights, tokenizer.json) or ORG/NAME already in
    /// the local Hugging Face cache, a GGUF file, or ollama:NAME. (`command::main_command`
    /// replaces this text by one that lists the model types from the registry of families.)
    #[arg(long, value_name = "DIR", help_heading = "Real models")]
    pub model: Option<String>,
    /// With --model: keep the first max_position_embeddings tokens of a longer input.
    #[arg(long, help_heading = "Real models")]
    pub truncate: bool,
    /// With --model: tokenize without the tokenizer's special tokens (no BOS, [CLS], [SEP]).
    #[arg(long, help_heading = "Real models")]
    pub no_special_tokens: bool,
    /// With a GGUF --model: the matrix products' arithmetic. f32 on the dequantized weights
    /// (transformers'), or ggml: llama.cpp's CPU backend's (inputs quantized for each
    /// weight's type, f16 keys, values and attention weights; flash attention off).
    #[arg(long, value_enum, value_name = "ARITH", default_value = "f32", help_heading = "Real models")]
    pub arithmetic: ArithmeticArg,
    /// With a language model: the most probable next tokens shown per position.
    #[arg(long, value_name = "K", default_value_t = 5, help_heading = "Real models")]
    pub top_k: usize,
    /// With a language model: trace the sentence as one user turn of the model's chat
    /// template (chat_template.jinja or tokenizer_config.json's chat_template; a GGUF's
    /// tokenizer.chat_template), with the assistant's generation prompt, as transformers'
    /// apply_chat_template renders it; the template's special tokens are special tokens, and
    /// no BOS is added beyond what it writes.
    #[arg(long, help_heading = "Real models")]
    pub chat: bool,
    /// With --chat: a system turn before the user's ("" is an empty system turn).
    #[arg(long, value_name = "TEXT", requires = "chat", allow_hyphen_values = true, help_heading = "Real models")]
    pub system: Option<String>,
    /// With --chat: render with the Jinja template in FILE instead of the model's own (for a
    /// model that carries none, or to try another).
    #[arg(long, value_name = "FILE", requires = "chat", help_heading = "Real models")]
    pub chat_template: Option<PathBuf>,

    // ---- tokens ----
    /// Lower-case the sentence before splitting it.
    #[arg(long, help_heading = "Tokens")]
    pub lowercase: bool,
    /// Characters deleted before splitting on white space ("" keeps them all).
    #[arg(long, value_name = "CHARS", default_value = ",", help_heading = "Tokens")]
    pub remove: String,
    /// Also delete every punctuation character.
    #[arg(long, help_heading = "Tokens")]
    pub remove_punctuation: bool,
    /// How ids are given to the sentence's own words.
    #[arg(long, value_enum, default_value = "first-seen", help_heading = "Tokens")]
    pub vocab_order: VocabOrderArg,
    /// A fixed vocabulary: JSON {"token": id} or one token per line (id = line number).
    #[arg(long, value_name = "FILE", help_heading = "Tokens")]
    pub vocab: Option<PathBuf>,
    /// With --vocab, the token that unknown words become.
    #[arg(long, value_name = "TOKEN", help_heading = "Tokens")]
    pub unk: Option<String>,
    /// A token put before the sentence, e.g. "<bos>".
    #[arg(long, value_name = "TOKEN", help_heading = "Tokens")]
    pub bos: Option<String>,
    /// A token put after the sentence, e.g. "<eos>".
    #[arg(long, value_name = "TOKEN", help_heading = "Tokens")]
    pub eos: Option<String>,
    /// A raw input matrix instead of embeddings: JSON [[…], …], one row per position.
    #[arg(long, value_name = "FILE", help_heading = "Tokens")]
    pub input: Option<PathBuf>,

    // ---- model ----
    /// Model width [default: 4].
    #[arg(long, value_name = "N", help_heading = "Model")]
    pub d_model: Option<usize>,
    /// Attention heads [default: 1].
    #[arg(long, value_name = "N", help_heading = "Model")]
    pub heads: Option<usize>,
    /// Query/key width per head [default: d_model / heads].
    #[arg(long, value_name = "N", help_heading = "Model")]
    pub d_k: Option<usize>,
    /// Value width per head [default: d_k].
    #[arg(long, value_name = "N", help_heading = "Model")]
    pub d_v: Option<usize>,
    /// FFN hidden width [default: 2 × d_model].
    #[arg(long, value_name = "N", help_heading = "Model")]
    pub d_ff: Option<usize>,
    /// Layers [default: 1].
    #[arg(long, value_name = "N", help_heading = "Model")]
    pub layers: Option<usize>,
    /// Positional encoding [default: learned; none with --input].
    #[arg(long, value_enum, help_heading = "Model")]
    pub positions: Option<PositionsArg>,
    /// Rows of the learned position table: the longest sentence it takes [default: 10].
    #[arg(long, value_name = "N", help_heading = "Model")]
    pub max_len: Option<usize>,
    /// Hide later tokens from each query (decoder-style mask).
    #[arg(long, help_heading = "Model")]
    pub causal: bool,
    /// Factor applied to q·kᵀ, e.g. 0.5 to divide by √4 [default: 1/√d_k].
    #[arg(long, value_name = "X", allow_negative_numbers = true, help_heading = "Model")]
    pub scale: Option<f64>,
    /// Where LayerNorm goes: after each residual sum (post) or before each sublayer (pre)
    /// [default: post].
    #[arg(long, value_enum, help_heading = "Model")]
    pub norm: Option<NormArg>,
    /// FFN activation (gelu is the exact, erf-based one) [default: relu].
    #[arg(long, value_enum, help_heading = "Model")]
    pub activation: Option<ActivationArg>,
    /// Give the q, k, v and output projections a bias.
    #[arg(long, help_heading = "Model")]
    pub attn_bias: bool,
    /// Leave out the FFN's biases.
    #[arg(long, help_heading = "Model")]
    pub no_ffn_bias: bool,
    /// Give only the q, k and v projections a bias (a textbook's qkv_bias=True).
    #[arg(long, help_heading = "Textbook attention")]
    pub qkv_bias: bool,
    /// Give the output projection a bias (a textbook MultiHeadAttention's out_proj has one).
    #[arg(long, help_heading = "Textbook attention")]
    pub out_proj_bias: bool,
    /// Trace self-attention alone, as a textbook's MultiHeadAttention(d_in, d_out, …) module:
    /// each layer ends at attn.out, with no residual sum, norm or FFN.
    #[arg(long, help_heading = "Textbook attention")]
    pub attention_only: bool,
    /// With --attention-only: the output width, split into heads for q, k, v [default: d_model].
    #[arg(long, value_name = "N", help_heading = "Textbook attention")]
    pub d_out: Option<usize>,
    /// With --attention-only: no output projection; attn.out is the heads side by side (the
    /// tutorials' MultiHeadAttentionWrapper).
    #[arg(long, help_heading = "Textbook attention")]
    pub no_out_proj: bool,
    /// Build the heads as separate single-head modules, each with its own q, k, v nn.Linear
    /// created head by head (MultiHeadAttentionWrapper), instead of fused projections. Same
    /// arithmetic; seeded weights are drawn in that order.
    #[arg(long, help_heading = "Textbook attention")]
    pub separate_heads: bool,
    /// LayerNorm epsilon [default: 1e-5; a model's own with --model].
    #[arg(long, value_name = "X", allow_negative_numbers = true, help_heading = "Model")]
    pub eps: Option<f64>,
    /// RMSNorm (as the Llama family) instead of LayerNorm, for every norm.
    #[arg(long, help_heading = "Decoder parts")]
    pub rms_norm: bool,
    /// With --positions rope: the rotation's base θ [default: 10000].
    #[arg(long, value_name = "X", help_heading = "Decoder parts")]
    pub rope_theta: Option<f64>,
    /// A gated FFN: act(x·W_gate) ⊙ (x·W_up), then W_down (SwiGLU with --activation silu).
    #[arg(long, help_heading = "Decoder parts")]
    pub gated: bool,
    /// Key/value heads for grouped-query attention (must divide --heads) [default: --heads].
    #[arg(long, value_name = "N", help_heading = "Decoder parts")]
    pub kv_heads: Option<usize>,
    /// A norm after the last layer (GPT-2's ln_f): step final_norm.out.
    #[arg(long, help_heading = "Decoder parts")]
    pub final_norm: bool,
    /// A language-model head after the last layer: logits and next-token predictions.
    #[arg(long, value_enum, value_name = "KIND", help_heading = "Decoder parts")]
    pub lm_head: Option<LmHeadArg>,

    // ---- parameters ----
    /// How seeded parameters are drawn.
    #[arg(long, value_enum, default_value = "torch", help_heading = "Parameters")]
    pub init: InitArg,
    /// Seed, as torch.manual_seed(seed).
    #[arg(long, value_name = "N", default_value_t = 123, allow_negative_numbers = true, help_heading = "Parameters")]
    pub seed: i128,
    /// Where the generator is re-seeded: a comma list of token, position, layers; or none.
    #[arg(long, value_name = "LIST", default_value = "token,position,layers", help_heading = "Parameters")]
    pub reseed: String,
    /// How linear weights are drawn.
    #[arg(long, value_enum, default_value = "kaiming", help_heading = "Parameters")]
    pub linear_init: LinearInitArg,
    /// With --linear-init rand: the shape each matrix is drawn in.
    #[arg(long, value_enum, default_value = "out-in", help_heading = "Parameters")]
    pub rand_layout: LayoutArg,
    /// The order in which a layer draws its q, k and v projections.
    #[arg(long, value_name = "ORDER", default_value = "q,k,v", help_heading = "Parameters")]
    pub draw_order: String,
    /// Discard raw draws before a point (token, position, layers, ffn), e.g. ffn=76 to replay
    /// a notebook cell that ran twice. Comma list of POINT=N.
    #[arg(long, value_name = "LIST", help_heading = "Parameters")]
    pub skip_draws: Option<String>,
    /// Load every parameter from a safetensors or .json file. It fixes the dimensions; a file
    /// written by --save-weights also gives every setting and the input, so flags and the
    /// sentence may be left out (a flag that contradicts the file is an error).
    #[arg(long, value_name = "FILE", help_heading = "Parameters")]
    pub weights: Option<PathBuf>,
    /// Write every parameter of the run to a safetensors file, with the settings and the input
    /// (sentence, tokens, ids) in its metadata.
    #[arg(long, value_name = "FILE", help_heading = "Parameters")]
    pub save_weights: Option<PathBuf>,

    // ---- output ----
    /// Output format.
    #[arg(long, value_enum, default_value = "table", help_heading = "Output")]
    pub format: Format,
    /// Steps to show: ids, names, aliases or TransformerLens hook names, comma separated
    /// (e.g. weights,context or blocks.0.attn.hook_pattern); none: only the summary and the
    /// predictions.
    #[arg(long, value_name = "LIST", help_heading = "Output")]
    pub steps: Option<String>,
    /// Print only these positions in the views (step rows, heatmap rows, predictions, the lens): last:N, a
    /// position, a range (3-7) or a list. Files (--save-trace, --html, --svg) keep them all.
    #[arg(long, value_name = "SPEC", help_heading = "Output")]
    pub show_positions: Option<String>,
    /// Show only these layers' steps: a number, a list or a range (0,3 or 1-4).
    #[arg(long, value_name = "LIST", help_heading = "Output")]
    pub layer: Option<String>,
    /// Show only these heads of per-head steps: a number, a list or a range (0,3 or 1-4).
    #[arg(long, value_name = "LIST", help_heading = "Output")]
    pub head: Option<String>,
    /// Digits after the decimal point in tables.
    #[arg(long, value_name = "N", default_value_t = 4, help_heading = "Output")]
    pub precision: usize,
    /// Table width in columns; wider tensors are split into column blocks [default: the
    /// terminal's width when printing to one, else 80].
    #[arg(long, value_name = "N", help_heading = "Output")]
    pub width: Option<usize>,
    /// Colour in views that use it (auto: only on a terminal, and never with NO_COLOR set).
    #[arg(long, value_enum, default_value = "auto", help_heading = "Output")]
    pub color: ColorArg,
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) and exit.
    #[arg(long, value_name = "SHELL", help_heading = "Output")]
    pub completions: Option<clap_complete::Shell>,
    /// Print the man page (roff) and exit: attn-trace --man > attn-trace.1
    #[arg(long, help_heading = "Output")]
    pub man: bool,
    /// Print no notes on stderr (errors are still printed).
    #[arg(long, short = 'q', help_heading = "Output")]
    pub quiet: bool,
    /// Print on stderr how long each stage took and the peak resident memory, then the forward
    /// pass's floating-point operations, GFLOP/s and share of this machine's f32 peak, which a
    /// short matrix product measures after the run (under 0.3 s). For users and benchmarks;
    /// stdout is unchanged.
    #[arg(long, help_heading = "Output")]
    pub timings: bool,
    /// Refuse runs whose tensors would need more than this many bytes (e.g. 512MiB, 8GiB);
    /// auto: three quarters of the memory available to this process (2GiB where unknown).
    #[arg(long, value_name = "SIZE|auto", default_value = "auto", help_heading = "Output")]
    pub max_memory: String,
    /// Refuse runs whose printed output would be larger than this (e.g. 100MiB, 4GiB),
    /// estimated from the steps shown before anything is computed; none: no cap.
    #[arg(long, value_name = "SIZE|none", default_value = "1GiB", help_heading = "Output")]
    pub max_output: String,
    /// Queries per tile of attention. A layer none of whose [head × query × key] steps is
    /// recorded (a summary table, --stats, a few steps of a long input) computes its scores a
    /// tile of queries at a time and never holds them whole [default: the rows that keep a
    /// tile's scores near 16 MiB; every input of up to ~900 tokens on a 9-head model is one tile].
    #[arg(long, value_name = "ROWS", value_parser = clap::value_parser!(u64).range(1..), help_heading = "Output")]
    pub query_tile: Option<u64>,

    // ---- views ----
    /// Walk through one token's attention, head by head: its query, its dot product with
    /// every key, the scaling, the mask, the softmax and the context vector. A number is a
    /// position; a word must occur once. Uses --layer (layer 0 without it).
    #[arg(long, value_name = "TOKEN|POS", help_heading = "Views")]
    pub focus: Option<String>,
    /// With --focus: write every dot product and sum out term by term, with its numbers.
    #[arg(long, help_heading = "Views")]
    pub explain: bool,
    /// Also print the parameters as tables, as tutorials print them: W_Q, W_K, W_V, W_O and
    /// the FFN's weights and biases of the shown layers (tables only).
    #[arg(long, help_heading = "Views")]
    pub params: bool,
    /// Attention between words: a "##" word piece joins the token before it (sum over a
    /// word's key pieces, mean over its query pieces).
    #[arg(long, help_heading = "Views")]
    pub merge_pieces: bool,
    /// An encoder–decoder's attention the views draw: the cross-attention (decoder tokens ×
    /// source tokens), the encoder's self-attention or the decoder's [default: cross].
    #[arg(long, value_enum, help_heading = "Views")]
    pub stack: Option<ViewStack>,
    /// Attention averaged over heads (mean over heads).
    #[arg(long, help_heading = "Views")]
    pub average_heads: bool,
    /// Also write the trace as one self-contained HTML page with interactive attention maps
    /// (a batch: one section per sentence).
    #[arg(long, value_name = "FILE", help_heading = "Views")]
    pub html: Option<PathBuf>,
    /// Also write an SVG attention map of --layer (layer 0 without it): --head, or every head
    /// (a batch: one block per sentence, stacked).
    #[arg(long, value_name = "FILE", help_heading = "Views")]
    pub svg: Option<PathBuf>,

    // ---- testing ----
    /// Also write every step as a named tensor to FILE: .safetensors or .npz (f32; the mask
    /// as uint8; token ids as int64). What is saved never depends on --steps, --layer or
    /// --head, which choose only what is printed; --save-steps narrows the file.
    #[arg(long, value_name = "FILE", help_heading = "Testing")]
    pub save_trace: Option<PathBuf>,
    /// The steps --save-trace writes: ids, names or aliases, comma separated, as --steps
    /// takes them [default: every step, every layer and head].
    #[arg(long, value_name = "LIST", help_heading = "Testing")]
    pub save_steps: Option<String>,
    /// The names (and layouts) of the tensors --save-trace writes.
    #[arg(long, value_enum, value_name = "NAMES", help_heading = "Testing")]
    pub names: Option<NamesArg>,
    /// With --model: recompute the model with an independent implementation (candle-transformers'
    /// own model and loaders: BERT, Llama, Mistral, Mixtral, Qwen2/3 and their MoEs, Gemma 2/3,
    /// Phi-3, and GGUF llama/qwen2/qwen3/phi3) and report the largest difference of the logits
    /// (and hidden states); exit 1 above --check-tol; refused (exit 2) where none exists.
    #[arg(long, help_heading = "Testing")]
    pub check: bool,
    /// The largest absolute difference --check accepts [default: 1e-4 for an encoder's
    /// output, 1e-3 for a language model's logits].
    #[arg(long, value_name = "X", help_heading = "Testing")]
    pub check_tol: Option<f64>,

    // ---- interventions and analysis ----
    /// Remove heads' contributions: their context set to zero (or its mean) before the output
    /// projection, e.g. --ablate 0.1,2.3 for layer 0 head 1 and layer 2 head 3.
    #[arg(long, value_name = "L.H,…", help_heading = "Interventions")]
    pub ablate: Option<String>,
    /// What an ablated head's context becomes: zero (as transformers' head_mask) or its mean
    /// over positions.
    #[arg(long, value_enum, default_value = "zero", help_heading = "Interventions")]
    pub ablate_mode: AblateArg,
    /// Remove experts from a mixture of experts' routing: their router logit becomes −inf
    /// before the softmax and top-k, e.g. --ablate-expert 0.3,1.0 for layer 0 expert 3 and
    /// layer 1 expert 0.
    #[arg(long, value_name = "L.E,…", help_heading = "Interventions")]
    pub ablate_expert: Option<String>,
    /// Hide one query→key edge before the softmax: L.H:Q->K, or L:Q->K for every head of
    /// layer L; Q and K are positions or words. Repeatable.
    #[arg(long, value_name = "L[.H]:Q->K", help_heading = "Interventions")]
    pub knockout: Vec<String>,
    /// Add a steering vector to the residual stream after layer L (activation addition):
    /// L:FILE[@ALPHA[@FROM]], ALPHA times the vector (1 when left out) at every position from
    /// FROM on (0 when left out). FILE: a .npy of d_model values, or one row of a step of a saved
    /// JSON or safetensors trace, e.g. t.json#layers.3.add_norm2.sum[5]. Repeatable.
    #[arg(long, value_name = "L:FILE[@ALPHA[@FROM]]", help_heading = "Interventions")]
    pub steer: Vec<String>,
    /// Build a steering vector from two prompts: the residual stream after --at-layer at A's
    /// last position minus B's, added there at every position times --alpha, e.g.
    /// --steer-from "Love" "Hate" --at-layer 6 --alpha 5. Put the sentence first.
    #[arg(long, num_args = 2, value_names = ["A", "B"], requires = "at_layer", help_heading = "Interventions")]
    pub steer_from: Option<Vec<String>>,
    /// With --steer-from: the layer after which the vector is read and added.
    #[arg(long, value_name = "L", requires = "steer_from", help_heading = "Interventions")]
    pub at_layer: Option<usize>,
    /// With --steer-from: the vector's coefficient [default: 1].
    #[arg(
        long,
        value_name = "A",
        requires = "steer_from",
        allow_negative_numbers = true,
        help_heading = "Interventions"
    )]
    pub alpha: Option<f32>,
    /// The logit lens: every layer's residual stream through the final norm and the
    /// unembedding, top tokens per position per layer (language models).
    #[arg(long, help_heading = "Interventions")]
    pub lens: bool,
    /// With --lens: follow this token (one token of the model's vocabulary, e.g. " Paris"):
    /// its exact rank and probability per layer and position. Repeatable.
    #[arg(long, value_name = "TEXT", requires = "lens", help_heading = "Interventions")]
    pub lens_track: Vec<String>,
    /// Per-head statistics: entropy, mean attention distance, weight on the first token,
    /// previous-token score.
    #[arg(long, help_heading = "Interventions")]
    pub stats: bool,
    /// With --stats on a language model: trace N random tokens repeated twice instead of a
    /// sentence (none is needed) and add each head's induction score (attention from a token's
    /// second occurrence to the token after its first).
    #[arg(long, value_name = "N", help_heading = "Interventions")]
    pub induction: Option<usize>,
    /// Attention rollout (Abnar & Zuidema 2020): heads averaged, the residual added as ½·I,
    /// layers multiplied from the first.
    #[arg(long, help_heading = "Interventions")]
    pub rollout: bool,
    /// Activation patching: a corrupted sentence of the same token length; the clean
    /// sentence's activations are copied into its run one at a time and the effect reported.
    #[arg(long, value_name = "CORRUPTED", help_heading = "Interventions")]
    pub patch: Option<String>,
    /// What --patch copies: each head's context, or each position of each layer's output.
    #[arg(long, value_enum, default_value = "heads", help_heading = "Interventions")]
    pub patch_what: PatchArg,
    /// What --patch copies, by step (an in-layer step name: attn.q, attn.context, ffn.out,
    /// add_norm1.sum, …): the step at each position of each layer, and of each head where the
    /// step has heads, one cell at a time; in place of --patch-what.
    #[arg(long, value_name = "STEP", help_heading = "Interventions")]
    pub patch_step: Option<String>,
    /// How --patch computes its grid: exact (one patched run per cell) or attribution (one
    /// clean run, one corrupted run and one backward pass: the gradient's first-order
    /// estimate of every cell; docs/INTERVENTIONS.md) [default: exact].
    #[arg(long, value_enum, value_name = "METHOD", help_heading = "Interventions")]
    pub patch_method: Option<PatchMethodArg>,
    /// Path patching (Wang et al. 2022): with --patch, each head's output is taken from the
    /// corrupted run only along its direct path into RECEIVERS, in the clean run: `logits`
    /// (or `resid`: the final residual stream) or heads' inputs, e.g. 9.6:q,9.9:q (q, k or v).
    /// docs/INTERVENTIONS.md.
    #[arg(long, value_name = "RECEIVERS", help_heading = "Interventions")]
    pub patch_path: Option<String>,
    /// With --patch: the metric is logit[A] − logit[B] for two one-token answers, at the last
    /// position of a language model or at the [MASK] of a BERT checkpoint with a masked-LM
    /// head, e.g. --metric " Paris" " London". Without it an encoder's metric is the distance
    /// of its output from the clean run's.
    #[arg(long, num_args = 2, value_names = ["A", "B"], allow_hyphen_values = true, help_heading = "Interventions")]
    pub metric: Option<Vec<String>>,

    // ---- generation ----
    /// Generate up to N tokens after the prompt with a key/value cache, tracing each decode
    /// step (ids gen.T.…); stops at the model's end-of-sequence token (language models).
    #[arg(long, value_name = "N", help_heading = "Generation")]
    pub generate: Option<usize>,
    /// With --generate: do not stop at the end-of-sequence token.
    #[arg(long, requires = "generate", help_heading = "Generation")]
    pub ignore_eos: bool,
    /// With --generate: draw each token at random from the model's distribution (after
    /// --temperature, --sample-top-k, --top-p) instead of taking the most probable.
    #[arg(long, requires = "generate", help_heading = "Generation")]
    pub sample: bool,
    /// With --sample: divide the logits by T before the softmax [default: 1].
    #[arg(long, value_name = "T", requires = "sample", allow_negative_numbers = true, help_heading = "Generation")]
    pub temperature: Option<f64>,
    /// With --sample: draw from the smallest set of most probable tokens whose probability
    /// reaches P, in (0, 1] [default: 1, all].
    #[arg(long, value_name = "P", requires = "sample", allow_negative_numbers = true, help_heading = "Generation")]
    pub top_p: Option<f64>,
    /// With --sample: draw from the K most probable tokens only; --top-k is the number of
    /// predictions shown [default: all].
    #[arg(long, value_name = "K", requires = "sample", help_heading = "Generation")]
    pub sample_top_k: Option<usize>,
    /// With --sample: the generator's seed; the same seed gives the same tokens on every run
    /// and machine [default: 0].
    #[arg(long, value_name = "N", requires = "sample", help_heading = "Generation")]
    pub sample_seed: Option<u64>,
    /// With --generate and an intervention (--ablate, --knockout, --ablate-expert, --steer): also
    /// generate without it, and show both texts and where they part.
    #[arg(long, requires = "generate", help_heading = "Generation")]
    pub baseline: bool,
    /// Direct logit attribution: logit[ANSWER] (− logit[FOIL]) at the last position (a masked
    /// LM's [MASK]; --at) split into what each part wrote: the embeddings, every head (and by
    /// the source token it read), every FFN or expert, and every bias, each through the final
    /// norm frozen at the run's scale, e.g. --attribute " Paris" " London". Without ANSWER: the
    /// token the model chose there (with --generate, the one it wrote) against its runner-up.
    /// Put the sentence first.
    #[arg(long, num_args = 0..=2, value_names = ["ANSWER", "FOIL"], help_heading = "Interventions")]
    pub attribute: Option<Vec<String>>,
    /// With --attribute: the position whose logits are attributed, a number or a word (as
    /// --focus finds one), instead of the last (or the [MASK]); with --generate, gen:K is where
    /// the K-th generated token (from 0) was chosen and last where the last one was.
    #[arg(long, value_name = "POS|WORD|last|gen:K", help_heading = "Interventions")]
    pub at: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PaddingArg {
    Left,
    Right,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PatchArg {
    Heads,
    Resid,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PatchMethodArg {
    Exact,
    Attribution,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AblateArg {
    Zero,
    Mean,
}

/// What the environment says about the output, read once by `main` so that settings stay a
/// pure function of the command line and this value (tests pass their own).
#[derive(Debug, Clone, Default)]
pub struct Env {
    /// `NO_COLOR` is set to something non-empty (no-color.org).
    pub no_color: bool,
    /// Standard output is a terminal.
    pub stdout_is_terminal: bool,
    /// `COLORTERM` is `truecolor` or `24bit`.
    pub truecolor: bool,
    /// The terminal's width in columns, when stdout is a terminal that says.
    pub terminal_width: Option<usize>,
    /// The machine's available memory in bytes (`MemAvailable` of /proc/meminfo), if known:
    /// a run is refused above it as above `--max-memory`, rather than killed part way.
    pub memory_available: Option<u128>,
}

impl Env {
    /// Reads `NO_COLOR`, `COLORTERM` and whether stdout is a terminal.
    pub fn read() -> Env {
        use std::io::IsTerminal;
        let colorterm = std::env::var("COLORTERM").unwrap_or_default();
        Env {
            no_color: std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()),
            stdout_is_terminal: std::io::stdout().is_terminal(),
            truecolor: matches!(colorterm.as_str(), "truecolor" | "24bit"),
            terminal_width: std::io::stdout().is_terminal().then(terminal_width).flatten(),
            memory_available: memory_available(),
        }
    }
}

/// The widest `--help` is wrapped to.
pub const HELP_WIDTH: usize = 100;

/// The width `--help` wraps to: the terminal's, at most [`HELP_WIDTH`]; [`HELP_WIDTH`] when
/// standard output is not a terminal, so that piped help is the same bytes everywhere.
pub fn help_width() -> usize {
    use std::io::IsTerminal;
    let terminal = std::io::stdout().is_terminal().then(terminal_width).flatten();
    terminal.unwrap_or(HELP_WIDTH).min(HELP_WIDTH)
}

/// Standard output's terminal width (the `TIOCGWINSZ` ioctl), if it reports one.
#[cfg(unix)]
fn terminal_width() -> Option<usize> {
    let mut size = libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: TIOCGWINSZ writes one `winsize` into the pointer it is given, which is valid
    // and exclusively borrowed for the call; a failed call leaves it untouched.
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    (ok && size.ws_col > 0).then_some(size.ws_col as usize)
}

#[cfg(not(unix))]
fn terminal_width() -> Option<usize> {
    None
}

/// What this process can still allocate (Linux), in bytes: the least of the machine's
/// `MemAvailable`, the cgroup's `memory.max` less its usage, and the address-space limit
/// (`ulimit -v`) less the address space already mapped. `None` where none is known.
fn memory_available() -> Option<u128> {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    // "Name:   1234 kB" lines of /proc/meminfo and /proc/self/status.
    let kib = |text: &str, key: &str| -> Option<u128> {
        let line = text.lines().find(|l| l.starts_with(key))?;
        line.split_whitespace().nth(1)?.parse::<u128>().ok().map(|k| k * 1024)
    };
    let machine = read("/proc/meminfo").and_then(|t| kib(&t, "MemAvailable:"));
    let cgroup = (|| {
        let max: u128 = read("/sys/fs/cgroup/memory.max")?.trim().parse().ok()?;
        let used: u128 = read("/sys/fs/cgroup/memory.current")?.trim().parse().ok()?;
        Some(max.saturating_sub(used))
    })();
    let address_space = (|| {
        let limits = read("/proc/self/limits")?;
        let line = limits.lines().find(|l| l.starts_with("Max address space"))?;
        let soft: u128 = line.split_whitespace().nth(3)?.parse().ok()?; // "unlimited" → None
        let mapped = read("/proc/self/status").and_then(|t| kib(&t, "VmSize:")).unwrap_or(0);
        Some(soft.saturating_sub(mapped))
    })();
    [machine, cgroup, address_space].into_iter().flatten().min()
}
