//! Parsing of the flags that describe where inputs and parameters come from: the toy
//! tokenizer's options, the seeded-initialisation recipe, and a raw `--input` matrix.

use crate::cli::{self, Cli};
use crate::error::usage;
use crate::init::file;
use crate::init::seeded::{LinearInit, Proj, RandLayout, Recipe, Reseed, Skip};
use crate::init::torch_rng::{self, Kernel};
use crate::tokenize::{self, TokenizerOptions, VocabOrder};
use anyhow::Result;

pub(super) fn tokenizer_options(cli: &Cli) -> Result<TokenizerOptions> {
    let fixed = match &cli.vocab {
        Some(p) => Some(tokenize::load_vocab(p)?),
        None => None,
    };
    if cli.unk.is_some() && fixed.is_none() {
        return Err(usage("--unk", "it only applies to a fixed vocabulary", "pass --vocab FILE too, or drop --unk"));
    }
    Ok(TokenizerOptions {
        lowercase: cli.lowercase,
        remove: cli.remove.clone(),
        remove_punctuation: cli.remove_punctuation,
        order: match cli.vocab_order {
            cli::VocabOrderArg::FirstSeen => VocabOrder::FirstSeen,
            cli::VocabOrderArg::Sorted => VocabOrder::Sorted,
        },
        fixed,
        unk: cli.unk.clone(),
        bos: cli.bos.clone(),
        eos: cli.eos.clone(),
    })
}

pub(super) fn recipe(cli: &Cli) -> Result<Recipe> {
    let seed = torch_rng::seed_from_i128(cli.seed).ok_or_else(|| {
        usage("--seed", format!("{} is outside PyTorch's range", cli.seed), "pass a seed from -2^63 to 2^64-1")
    })?;
    let mut reseed = Reseed::default();
    if cli.reseed.trim() != "none" {
        for item in cli.reseed.split(',').map(str::trim) {
            match item {
                "token" => reseed.token = true,
                "position" => reseed.position = true,
                "layers" => reseed.layers = true,
                other => {
                    return Err(usage(
                        "--reseed",
                        format!("unknown point {other:?}"),
                        "list some of token, position, layers (comma separated), or none",
                    ))
                }
            }
        }
    }
    let order: Vec<&str> = cli.draw_order.split(',').map(str::trim).collect();
    let mut draw_order = [Proj::Q, Proj::K, Proj::V];
    let mut sorted = order.clone();
    sorted.sort();
    if sorted != ["k", "q", "v"] {
        return Err(usage(
            "--draw-order",
            format!("{:?} is not an order of q, k and v", cli.draw_order),
            "pass each of q, k, v once, e.g. --draw-order k,q,v",
        ));
    }
    for (slot, name) in draw_order.iter_mut().zip(&order) {
        *slot = match *name {
            "q" => Proj::Q,
            "k" => Proj::K,
            _ => Proj::V,
        };
    }
    let mut skip = Skip::default();
    for item in cli.skip_draws.iter().flat_map(|s| s.split(',')).map(str::trim).filter(|s| !s.is_empty()) {
        let bad = || {
            usage(
                "--skip-draws",
                format!("{item:?} is not POINT=N"),
                "write e.g. --skip-draws ffn=76 (points: token, position, layers, ffn)",
            )
        };
        let (point, n) = item.split_once('=').ok_or_else(bad)?;
        let n: u64 = n.trim().parse().map_err(|_| bad())?;
        if n > 1 << 32 {
            return Err(usage("--skip-draws", format!("{n} draws is too many"), "skip at most 4294967296 draws"));
        }
        match point.trim() {
            "token" => skip.token = n,
            "position" => skip.position = n,
            "layers" => skip.layers = n,
            "ffn" => skip.ffn = n,
            _ => return Err(bad()),
        }
    }
    Ok(Recipe {
        skip,
        seed,
        kernel: match cli.init {
            cli::InitArg::Torch => Kernel::Avx2,
            cli::InitArg::TorchGeneric => Kernel::Generic,
        },
        reseed,
        linear: match cli.linear_init {
            cli::LinearInitArg::Kaiming => LinearInit::Kaiming,
            cli::LinearInitArg::Rand => LinearInit::Rand,
        },
        layout: match cli.rand_layout {
            cli::LayoutArg::OutIn => RandLayout::OutIn,
            cli::LayoutArg::InOut => RandLayout::InOut,
        },
        draw_order,
    })
}

/// Reads `--input FILE`: a JSON array of equally long rows of numbers → (rows, cols, values).
pub(super) fn read_matrix(path: &std::path::Path) -> Result<(usize, usize, Vec<f32>)> {
    let what = format!("--input {}", path.display());
    let bytes = std::fs::read(path).map_err(|e| usage(&what, e, "pass the path of an existing, readable JSON file"))?;
    let value: serde_json::Value = serde_json::from_slice(&bytes)
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
