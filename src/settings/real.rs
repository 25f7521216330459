//! Settings for a real model (`--model`): the folder fixes every dimension, the tokenizer
//! makes the tokens; flags may only restate what the model says, or choose what to show.

use super::{agree, nonzero, selection, Output, Settings, Source};
use crate::cli::{self, Cli};
use crate::config::{Activation, InitConfig, ModelConfig, Norm, Positions, RealModel};
use crate::error::usage;
use crate::hf::{self, HfModel};
use crate::limits;
use crate::model::Input;
use anyhow::Result;

pub fn from_cli(cli: Cli) -> Result<Settings> {
    let spec = cli.model.clone().unwrap_or_default();
    for (flag, given) in [
        ("--weights", cli.weights.is_some()),
        ("--input", cli.input.is_some()),
        ("--vocab", cli.vocab.is_some()),
        ("--save-weights", cli.save_weights.is_some()),
        ("--skip-draws", cli.skip_draws.is_some()),
    ] {
        if given {
            return Err(usage(
                flag,
                "it applies to the toy encoder, not to --model",
                format!("drop {flag} or --model"),
            ));
        }
    }
    let dir = hf::resolve(&spec)?;
    let model = HfModel::open(&dir)?;
    let c = model.config.clone();
    let w = format!("--model {spec}");
    let d_model = agree("--d-model", nonzero("--d-model", cli.d_model)?, c.hidden_size, &w)?;
    let heads = agree("--heads", nonzero("--heads", cli.heads)?, c.num_attention_heads, &w)?;
    let d_head = d_model / heads;
    let d_k = agree("--d-k", nonzero("--d-k", cli.d_k)?, d_head, &w)?;
    let d_v = agree("--d-v", nonzero("--d-v", cli.d_v)?, d_head, &w)?;
    let d_ff = agree("--d-ff", nonzero("--d-ff", cli.d_ff)?, c.intermediate_size, &w)?;
    let layers = agree("--layers", nonzero("--layers", cli.layers)?, c.num_hidden_layers, &w)?;
    let max_len = agree("--max-len", nonzero("--max-len", cli.max_len)?, c.max_position_embeddings, &w)?;
    if cli.positions.is_some_and(|p| p != cli::PositionsArg::Learned) {
        return Err(usage("--positions", format!("{w} has learned absolute positions"), "drop --positions"));
    }
    if cli.norm == Some(cli::NormArg::Pre) {
        return Err(usage("--norm", format!("{w} is post-norm (BERT)"), "drop --norm"));
    }
    let activation = match c.hidden_act.as_str() {
        "gelu" => Activation::Gelu,
        "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Activation::GeluTanh,
        "relu" => Activation::Relu,
        other => {
            return Err(usage(
                &w,
                format!("hidden_act {other:?} is not supported"),
                "use a model with gelu, gelu_new or relu",
            ))
        }
    };
    if let Some(a) = cli.activation {
        let asked = match a {
            cli::ActivationArg::Relu => Activation::Relu,
            cli::ActivationArg::Gelu => Activation::Gelu,
        };
        if asked != activation {
            return Err(usage("--activation", format!("{w} uses {}", c.hidden_act), "drop --activation"));
        }
    }
    if cli.attn_bias || cli.no_ffn_bias {
        return Err(usage("--attn-bias/--no-ffn-bias", format!("{w} fixes its biases"), "drop the flag"));
    }
    let sentence = cli.sentence.clone().ok_or_else(|| {
        usage("sentence", "none was given", "pass a sentence, e.g. attn-trace \"my shoes are small\" --model DIR")
    })?;
    if sentence.trim().is_empty() {
        return Err(usage("sentence", "it is empty", "pass a sentence with at least one word"));
    }
    if cli.pair.as_deref().is_some_and(|p| p.trim().is_empty()) {
        return Err(usage(
            "PAIR",
            "the second sentence is empty",
            "pass a second sentence with at least one word, or leave it out",
        ));
    }
    let enc = model.encode(&sentence, cli.pair.as_deref(), cli.truncate)?;
    if enc.truncated > 0 && !cli.quiet {
        eprintln!(
            "attn-trace: note: --truncate dropped the last {} tokens to fit max_position_embeddings {max_len}",
            enc.truncated
        );
    }
    let cfg = ModelConfig {
        d_model,
        heads,
        d_k,
        d_v,
        d_ff,
        layers,
        vocab_size: c.vocab_size,
        max_len,
        positions: Positions::Learned,
        causal: cli.causal,
        scale: cli.scale.unwrap_or(1.0 / (d_k as f64).sqrt()),
        norm: Norm::Post,
        activation,
        attn_bias: true,
        ffn_bias: true,
        eps: cli.eps.unwrap_or(c.layer_norm_eps),
        raw_input: false,
        model: Some(RealModel {
            path: dir.display().to_string(),
            model_type: c.model_type.clone(),
            type_vocab_size: c.type_vocab_size,
            truncated: enc.truncated,
        }),
        init: InitConfig::File { path: dir.join("model.safetensors").display().to_string() },
    };
    limits::check(&cfg, enc.ids.len(), limits::parse_size(&cli.max_memory)?)?;
    let selection = selection(&cli, layers, heads)?;
    let views = super::views::options(&cli, &enc.tokens, layers)?;
    let testing = super::testing::options(&cli, Some(&cfg))?;
    Ok(Settings {
        sentence: Some(match &cli.pair {
            Some(p) => format!("{sentence} ‖ {p}"),
            None => sentence,
        }),
        tokens: enc.tokens,
        input: Input::Ids { ids: enc.ids, type_ids: Some(enc.type_ids) },
        cfg,
        source: Source::Model(std::sync::Mutex::new(Some(model.weights)), c),
        output: Output {
            format: cli.format,
            precision: cli.precision,
            width: cli.width,
            summary: cli.format == cli::Format::Table && cli.steps.is_none(),
            color: super::use_color(cli.color),
            views,
        },
        selection,
        save_weights: None,
        testing,
    })
}
