//! Which model runs: the toy encoder from its flags, or a real model (`--model`), whose
//! toy-only flags are refused here and the rest checked against it by `sources`.

use super::{recipe, ModelChoice, Toy, ToyTokenizer, VocabOrder, Weights};
use crate::cli::{self, Cli};
use crate::error::usage;
use anyhow::Result;

/// The toy model's flags: sentence pairs and `--truncate` need a real model.
pub(super) fn toy(cli: &Cli) -> Result<ModelChoice> {
    if cli.truncate || cli.no_special_tokens {
        let flag = if cli.truncate { "--truncate" } else { "--no-special-tokens" };
        return Err(usage(flag, "it applies to real models", format!("pass --model DIR too, or drop {flag}")));
    }
    if cli.arithmetic == cli::ArithmeticArg::Ggml {
        return Err(usage(
            "--arithmetic ggml",
            "it is llama.cpp's arithmetic for a GGUF file",
            "pass --model FILE.gguf too, or drop it",
        ));
    }
    if cli.unk.is_some() && cli.vocab.is_none() {
        return Err(usage("--unk", "it only applies to a fixed vocabulary", "pass --vocab FILE too, or drop --unk"));
    }
    let tokenizer = ToyTokenizer {
        lowercase: cli.lowercase,
        remove: cli.remove.clone(),
        remove_punctuation: cli.remove_punctuation,
        order: match cli.vocab_order {
            cli::VocabOrderArg::FirstSeen => VocabOrder::FirstSeen,
            cli::VocabOrderArg::Sorted => VocabOrder::Sorted,
        },
        vocab: cli.vocab.clone(),
        unk: cli.unk.clone(),
        bos: cli.bos.clone(),
        eos: cli.eos.clone(),
    };
    Ok(ModelChoice::Toy(Box::new(Toy {
        tokenizer,
        matrix: cli.input.clone(),
        weights: cli.weights.clone().map(Weights::File),
        recipe: recipe::recipe(cli)?,
    })))
}

/// A real model's flags: toy-only flags are refused, the rest are checked against the model
/// by the sources stage.
pub(super) fn pretrained(cli: &Cli, spec: &str) -> Result<ModelChoice> {
    for (flag, given) in [
        ("--weights", cli.weights.is_some()),
        ("--input", cli.input.is_some()),
        ("--vocab", cli.vocab.is_some()),
        ("--save-weights", cli.save_weights.is_some()),
        ("--skip-draws", cli.skip_draws.is_some()),
        ("--rms-norm", cli.rms_norm),
        ("--rope-theta", cli.rope_theta.is_some()),
        ("--gated", cli.gated),
        ("--kv-heads", cli.kv_heads.is_some()),
        ("--final-norm", cli.final_norm),
        ("--lm-head", cli.lm_head.is_some()),
        ("--qkv-bias", cli.qkv_bias),
        ("--out-proj-bias", cli.out_proj_bias),
        ("--attention-only", cli.attention_only),
        ("--d-out", cli.d_out.is_some()),
        ("--no-out-proj", cli.no_out_proj),
        ("--separate-heads", cli.separate_heads),
    ] {
        if given {
            return Err(usage(
                flag,
                "it applies to the toy encoder, not to --model",
                format!("drop {flag} or --model"),
            ));
        }
    }
    let arithmetic = match cli.arithmetic {
        cli::ArithmeticArg::F32 => crate::config::Arithmetic::F32,
        cli::ArithmeticArg::Ggml => crate::config::Arithmetic::Ggml,
    };
    Ok(ModelChoice::Pretrained {
        spec: spec.to_string(),
        truncate: cli.truncate,
        special: !cli.no_special_tokens,
        arithmetic,
    })
}
