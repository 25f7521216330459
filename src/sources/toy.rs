//! The toy encoder's inputs: the sentence through the toy tokenizer (or a raw `--input`
//! matrix), and its dimensions from three places that must agree: the flags, the shapes in a
//! `--weights` file, and the matrix's width. Defaults fill what none of them says.

use super::common::agree;
use super::file::{self, FileDims};
use super::loaded::{Loaded, Source};
use super::meta;
use super::textbook;
use super::tokenize::{self, TokenizerOptions};
use crate::config::{Activation, InitConfig, LmHead, ModelConfig, Norm, Parts, Positions, Rope};
use crate::error::usage;
use crate::params::Input;
use crate::settings::{Settings, Shape, Toy, Weights};
use anyhow::Result;
use candle_core::{Device, Tensor};

/// A raw input matrix: (rows, columns, row-major values).
type Matrix = (usize, usize, Vec<f32>);

/// Reads the toy model's inputs and fixes its configuration.
pub fn open(settings: &Settings, toy: &Toy, sentence: Option<String>) -> Result<(Loaded, Source)> {
    let matrix = toy.matrix.as_deref().map(read_matrix).transpose()?;
    let tok_opts = tokenizer_options(toy)?;
    let weights_name = match &toy.weights {
        None => None,
        Some(Weights::File(p)) => Some(format!("--weights {}", p.display())),
        Some(Weights::Given(_)) => Some("weights".to_string()),
    };
    let w = weights_name.clone().unwrap_or_default();
    let (named, stored, stored_dtype) = match &toy.weights {
        Some(Weights::File(p)) => {
            let f = meta::open(p)?;
            (Some(f.tensors), meta::read(&f.metadata, &w)?, f.stored_dtype)
        }
        Some(Weights::Given(g)) => (Some(super::given::tensors(g, "weights")?), None, None),
        None => (None, None, None),
    };
    // The file's settings are the flags' defaults; a flag that contradicts them is refused.
    let shape = match &stored {
        Some(fs) => meta::merge(&settings.shape, &fs.shape, &w)?,
        None => settings.shape.clone(),
    };
    let (mut tokens, mut ids, vocab_size, sentence) = match (&stored, &matrix, sentence) {
        (Some(fs), None, None) => {
            let ids = fs.input.ids(&w)?;
            (fs.input.tokens.clone(), Some(ids), 0, fs.input.sentence.clone())
        }
        (_, _, sentence) => {
            let (tokens, ids, vocab_size) = tokens(&matrix, sentence.as_deref(), &tok_opts)?;
            (tokens, ids, vocab_size, sentence)
        }
    };
    let notes = file_notes(named.as_ref(), stored_dtype.as_deref());
    let fd = match (&named, &weights_name) {
        (Some(nm), Some(w)) => Some(file::infer(nm, w)?),
        _ => None,
    };
    let mut cfg = dims(&shape, fd.as_ref(), matrix.as_ref(), &w)?;
    let n = tokens.len();
    if cfg.positions == Positions::Learned && n > cfg.max_len {
        return Err(usage(
            "sentence",
            format!("it has {n} tokens but the learned position table has {} rows", cfg.max_len),
            format!("pass --max-len {n} or more, or --positions sinusoidal"),
        ));
    }
    cfg.vocab_size = match (&fd, &ids) {
        (Some(f), Some(ids)) => file_vocab(f, ids, &w)?,
        _ => vocab_size,
    };
    if let (Some(p), Some(ids)) = (settings.padding, ids.as_mut()) {
        super::toy_pad::pad(&mut tokens, ids, &mut cfg, p, tok_opts.fixed.as_ref())?;
    }
    check_skips(toy, cfg.layers)?;
    if toy.weights.is_none() {
        textbook::check_encoder_layer(&cfg, &toy.recipe)?;
    }
    cfg.init = match &toy.weights {
        Some(Weights::File(p)) => InitConfig::File { path: p.display().to_string(), stored_dtype },
        Some(Weights::Given(_)) => InitConfig::Given,
        None => toy.recipe.describe(),
    };
    let input = match (matrix, ids) {
        (Some((rows, cols, values)), _) => Input::Matrix(Tensor::from_vec(values, (rows, cols), &Device::Cpu)?),
        (None, Some(ids)) => Input::Ids { ids, type_ids: None },
        (None, None) => anyhow::bail!("internal: neither ids nor a matrix"),
    };
    let source = match named {
        Some(nm) => Source::File(nm),
        None => Source::Seeded(toy.recipe.clone()),
    };
    Ok((Loaded::made(sentence, (tokens, input), cfg, notes), source))
}

/// Notes on a weights file: non-finite values, and a stored type other than f32.
fn file_notes(named: Option<&file::NamedTensors>, stored_dtype: Option<&str>) -> Vec<String> {
    let bad = named.map(file::non_finite).unwrap_or_default();
    let mut notes = Vec::new();
    if !bad.is_empty() {
        notes.push(format!("the weights hold NaN or infinite values in {}", bad.join(", ")));
    }
    notes.extend(stored_dtype.map(super::common::stored_note));
    notes
}

/// `--skip-draws ffn=N` discards N draws before every layer's FFN, one at a time: bound the
/// total as the per-point cap bounds each point.
fn check_skips(toy: &Toy, layers: usize) -> Result<()> {
    let skipped = toy.recipe.skip.ffn.saturating_mul(layers as u64);
    if toy.weights.is_none() && skipped > 1 << 32 {
        return Err(usage(
            "--skip-draws",
            format!("ffn={} before each of {layers} layers is {skipped} draws", toy.recipe.skip.ffn),
            "skip at most 4294967296 draws in all",
        ));
    }
    Ok(())
}

fn tokenizer_options(toy: &Toy) -> Result<TokenizerOptions> {
    let t = &toy.tokenizer;
    Ok(TokenizerOptions {
        lowercase: t.lowercase,
        remove: t.remove.clone(),
        remove_punctuation: t.remove_punctuation,
        order: t.order,
        fixed: t.vocab.as_deref().map(tokenize::load_vocab).transpose()?,
        unk: t.unk.clone(),
        bos: t.bos.clone(),
        eos: t.eos.clone(),
    })
}

/// The row labels, ids and own-vocabulary size: from the sentence, or one label per matrix row.
fn tokens(
    matrix: &Option<Matrix>,
    sentence: Option<&str>,
    opts: &TokenizerOptions,
) -> Result<(Vec<String>, Option<Vec<u32>>, usize)> {
    Ok(match (matrix, sentence) {
        (None, None) => {
            return Err(usage(
                "sentence",
                "none was given",
                "pass a sentence, e.g. attn-trace \"my shoes are small\" (or a matrix with --input FILE)",
            ))
        }
        (None, Some(s)) => {
            let t = tokenize::tokenize(s, opts)?;
            (t.tokens, Some(t.ids), t.vocab_size)
        }
        (Some((rows, _, _)), Some(s)) => {
            let words = tokenize::words(s, opts);
            if words.len() != *rows {
                return Err(usage(
                    "--input",
                    format!("the matrix has {rows} rows but the sentence has {} words", words.len()),
                    "label each row with one word, or leave the sentence out",
                ));
            }
            (words, None, 0)
        }
        (Some((rows, _, _)), None) => ((0..*rows).map(|i| format!("x{i}")).collect(), None, 0),
    })
}

/// Every dimension, from the weights file if any, else from the matrix, flags and defaults.
/// `vocab_size` and `init` are filled in by the caller.
fn dims(s: &Shape, fd: Option<&FileDims>, matrix: Option<&Matrix>, w: &str) -> Result<ModelConfig> {
    let d_model = match (fd, matrix) {
        (Some(f), Some((_, cols, _))) if *cols != f.d_model => {
            return Err(usage(
                "--input",
                format!("the matrix has {cols} columns but {w} has d_model {}", f.d_model),
                "give the matrix d_model columns",
            ))
        }
        (Some(f), _) => agree("--d-model", s.d_model, f.d_model, w)?,
        (None, Some((_, cols, _))) => agree("--d-model", s.d_model, *cols, "--input")?,
        (None, None) => s.d_model.unwrap_or(4),
    };
    let heads = s.heads.unwrap_or(1);
    let form = textbook::form(s, fd, w)?;
    // A textbook's MultiHeadAttention(d_in, d_out, …) splits d_out into heads.
    let (d_k, d_v) = head_widths(s, fd, s.d_out.unwrap_or(d_model), heads, w)?;
    let d_ff = match fd.map(|f| f.d_ff) {
        _ if form.attention_only => 0,
        Some(Some(ff)) => agree("--d-ff", s.d_ff, ff, w)?,
        _ => s.d_ff.unwrap_or(d_model.saturating_mul(2)),
    };
    let layers = match fd {
        Some(f) => agree("--layers", s.layers, f.layers, w)?,
        None => s.layers.unwrap_or(1),
    };
    let positions = positions(s.positions, fd, matrix.is_some(), w)?;
    let max_len = match fd.and_then(|f| f.max_len) {
        Some(m) => agree("--max-len", s.max_len, m, w)?,
        None => s.max_len.unwrap_or(10),
    };
    let (attn_bias, ffn_bias) = biases(s, fd, w)?;
    let mut parts = parts(s, fd, (heads, d_k), positions, matrix.is_some(), w)?;
    let sizes = textbook::Sizes { d_model, concat: heads * d_v, layers, qkv_bias: attn_bias };
    textbook::fill(&mut parts, s, form, sizes, fd, w)?;
    Ok(ModelConfig {
        d_model,
        heads,
        d_k,
        d_v,
        d_ff,
        layers,
        vocab_size: 0,
        max_len,
        positions,
        causal: s.causal,
        scale: s.scale.unwrap_or(1.0 / (d_k as f64).sqrt()),
        norm: s.norm.unwrap_or(Norm::Post),
        activation: s.activation.unwrap_or(Activation::Relu),
        attn_bias,
        ffn_bias,
        eps: s.eps.unwrap_or(1e-5),
        raw_input: matrix.is_some(),
        model: None,
        init: InitConfig::File { path: String::new(), stored_dtype: None },
        interventions: Default::default(),
        parts,
    })
}

/// The decoder parts the flags (or a weights file's tensors) ask for.
fn parts(
    s: &Shape,
    fd: Option<&FileDims>,
    (heads, d_k): (usize, usize),
    positions: Positions,
    matrix: bool,
    w: &str,
) -> Result<Parts> {
    let kv_heads = match fd {
        Some(f) => agree("--kv-heads", s.kv_heads, f.k_width / d_k.max(1), w)?,
        None => s.kv_heads.unwrap_or(heads),
    };
    if !heads.is_multiple_of(kv_heads) {
        return Err(usage(
            "--kv-heads",
            format!("{heads} heads cannot share {kv_heads} key/value heads evenly"),
            "pass a --kv-heads that divides --heads",
        ));
    }
    if positions == Positions::Rotary && d_k % 2 == 1 {
        return Err(usage(
            "--positions rope",
            format!("d_k {d_k} is odd; rotary positions turn pairs"),
            "pass an even --d-k",
        ));
    }
    let lm_head = s.lm_head.or(fd.and_then(|f| f.lm_head.then_some(false)));
    if lm_head.is_some() && matrix {
        return Err(usage(
            "--lm-head",
            "a raw --input matrix has no vocabulary to predict",
            "drop --lm-head or --input",
        ));
    }
    Ok(Parts {
        rms_norm: s.rms_norm,
        kv_heads: (kv_heads != heads).then_some(kv_heads),
        kv_head_of_query_head: (kv_heads != heads).then(|| (0..heads).map(|h| h / (heads / kv_heads)).collect()),
        rope: (positions == Positions::Rotary).then(|| Rope::plain(s.rope_theta.unwrap_or(10000.0), d_k)),
        gated_ffn: s.gated || fd.is_some_and(|f| f.gated),
        window: None,
        local_layers: None,
        qk_norm: false,
        rope_local: None,
        attn_out_bias: None,
        parallel: false,
        attention_only: false,
        no_out_proj: false,
        d_out: None,
        separate_heads: false,
        final_norm: s.final_norm || fd.is_some_and(|f| f.final_norm),
        lm_head: lm_head.map(|tied| LmHead { tied }),
        masked_lm: false,
        padding: None,
        ..Default::default()
    })
}

/// d_k and d_v: split from the file's projection widths, or from `d_model` (an attention-only
/// block's d_out when given) and the flags.
fn head_widths(s: &Shape, fd: Option<&FileDims>, d_model: usize, heads: usize, w: &str) -> Result<(usize, usize)> {
    if let Some(f) = fd {
        let need_div = |width: usize, what: &str| -> Result<usize> {
            if !width.is_multiple_of(heads) {
                return Err(usage(
                    "--heads",
                    format!("{w} has a {what} projection {width} wide, which {heads} heads cannot split evenly"),
                    "pass a --heads that divides it",
                ));
            }
            Ok(width / heads)
        };
        let dk = need_div(f.qk_width, "query/key")?;
        // With grouped-query attention the value projection holds k_width / d_k heads.
        let kv = (f.k_width / dk.max(1)).max(1);
        let dv = if kv == heads { need_div(f.v_width, "value")? } else { f.v_width / kv };
        return Ok((agree("--d-k", s.d_k, dk, w)?, agree("--d-v", s.d_v, dv, w)?));
    }
    let dk = match s.d_k {
        Some(k) => k,
        None if !d_model.is_multiple_of(heads) => {
            let what = if s.d_out.is_some() { "d_out" } else { "d_model" };
            return Err(usage(
                "--heads",
                format!("{what} {d_model} is not divisible by {heads} heads"),
                "pick --heads that divides --d-model, or set the per-head width with --d-k",
            ));
        }
        None => d_model / heads,
    };
    Ok((dk, s.d_v.unwrap_or(dk)))
}

/// The position kind: a file with a position table is learned, one without has none.
fn positions(flag: Option<Positions>, fd: Option<&FileDims>, matrix: bool, w: &str) -> Result<Positions> {
    Ok(match (fd, flag) {
        (Some(f), Some(Positions::Learned)) if f.max_len.is_none() => {
            return Err(usage(
                "--positions",
                format!("learned positions need embed.position.weight, which {w} lacks"),
                "add the table to the file or pass --positions sinusoidal or none",
            ))
        }
        (Some(f), Some(p)) if f.max_len.is_some() && p != Positions::Learned => {
            return Err(usage(
                "--positions",
                format!("{w} has a learned position table (embed.position.weight)"),
                "drop --positions, or remove the table from the file",
            ))
        }
        (Some(f), None) if f.max_len.is_some() => Positions::Learned,
        (Some(_), None) => Positions::None,
        (_, Some(p)) => p,
        (None, None) if matrix => Positions::None,
        (None, None) => Positions::Learned,
    })
}

/// Biases: a file decides; flags may only agree with it.
fn biases(s: &Shape, fd: Option<&FileDims>, w: &str) -> Result<(bool, bool)> {
    let qkv = s.attn_bias || s.qkv_bias;
    let Some(f) = fd else { return Ok((qkv, !s.no_ffn_bias)) };
    if qkv && !f.attn_bias {
        let flag = if s.attn_bias { "--attn-bias" } else { "--qkv-bias" };
        return Err(usage(flag, format!("{w} has no projection biases"), format!("drop {flag}")));
    }
    if s.no_ffn_bias && f.ffn_bias {
        return Err(usage("--no-ffn-bias", format!("{w} has FFN biases"), "drop --no-ffn-bias"));
    }
    Ok((f.attn_bias, f.ffn_bias))
}

/// The file's token table must hold every id the tokenizer gave.
fn file_vocab(f: &FileDims, ids: &[u32], w: &str) -> Result<usize> {
    let rows = f.vocab_size.ok_or_else(|| {
        usage(w, "tensor embed.token.weight is missing", "add the token table, or pass a raw matrix with --input")
    })?;
    if let Some(&bad) = ids.iter().find(|&&i| i as usize >= rows) {
        return Err(usage(
            w,
            format!("token id {bad} is out of range for embed.token.weight with {rows} rows"),
            "use a vocabulary (--vocab) whose ids fit the table",
        ));
    }
    Ok(rows)
}

/// Reads `--input FILE`: a JSON array of equally long rows of numbers → (rows, cols, values).
fn read_matrix(path: &std::path::Path) -> Result<Matrix> {
    let what = format!("--input {}", path.display());
    let bytes = super::input_file::read(&what, path, "pass the path of an existing, readable JSON file")?;
    let value: serde_json::Value = crate::strict_json::parse(&bytes)
        .map_err(|e| usage(&what, format!("not valid JSON: {e}"), "write the matrix as [[0.5, 0.4], [0.8, 0.6]]"))?;
    let (shape, values) = file::array(&value, "the matrix", &what)?;
    if shape.len() != 2 || shape[0] == 0 || shape[1] == 0 {
        return Err(usage(
            &what,
            format!("the matrix has shape {shape:?}"),
            "give a non-empty 2-D array, one row per position",
        ));
    }
    if let Some(bad) = values.iter().position(|v| !v.is_finite()) {
        return Err(usage(
            &what,
            format!("row {}, column {} is not a finite number", bad / shape[1], bad % shape[1]),
            "give finite numbers",
        ));
    }
    Ok((shape[0], shape[1], values))
}
