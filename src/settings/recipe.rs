//! The seeded-initialisation recipe (`--seed`, `--init`, `--reseed`, `--linear-init`,
//! `--rand-layout`, `--draw-order`, `--skip-draws`): parsed here, drawn by `sources::seeded`,
//! and described in the JSON document's `config.init`.

use crate::cli::{self, Cli};
use crate::config::InitConfig;
use crate::error::usage;
use crate::torch_rng::{self, Kernel};
use anyhow::Result;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinearInit {
    /// `nn.Linear`: weight uniform in ±1/√in (kaiming_uniform_ with a=√5), then bias.
    Kaiming,
    /// `torch.rand` for each weight, then `torch.rand(out)` for each bias.
    Rand,
    /// As `nn.TransformerEncoderLayer` initialises itself: the attention's `out_proj`
    /// (`nn.Linear`), then a xavier-uniform fused in-projection `[3·d_model, d_model]`, the
    /// attention biases zeroed, then `linear1`, `linear2`; and every layer a copy of the first,
    /// as `nn.TransformerEncoder` deep-copies the layer it is given.
    EncoderLayer,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RandLayout {
    /// `torch.rand(d_out, d_in)`, used as `W x` (seed 003).
    OutIn,
    /// `torch.rand(d_in, d_out)`, used as `x @ W` (seed 004).
    InOut,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proj {
    Q,
    K,
    V,
}

/// Where the generator is re-seeded, besides the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reseed {
    pub token: bool,
    pub position: bool,
    pub layers: bool,
}

/// Raw 32-bit draws discarded just before a point, to replay a notebook whose cell ran twice.
/// Each uniform value (one `nn.Linear` weight or bias element, one `torch.rand` element)
/// consumes one draw, so one whole FFN of seed 000 is 32 + 8 + 32 + 4 = 76.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Skip {
    pub token: u64,
    pub position: u64,
    pub layers: u64,
    /// Before every layer's FFN.
    pub ffn: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Recipe {
    pub seed: u64,
    pub kernel: Kernel,
    pub reseed: Reseed,
    pub linear: LinearInit,
    pub layout: RandLayout,
    pub draw_order: [Proj; 3],
    pub skip: Skip,
}

impl Recipe {
    /// The recipe as the JSON document's `config.init` states it.
    pub fn describe(&self) -> InitConfig {
        let r = self;
        InitConfig::Torch {
            seed: r.seed,
            kernel: match r.kernel {
                Kernel::Avx2 => "avx2",
                Kernel::Generic => "generic",
            },
            reseed: [("token", r.reseed.token), ("position", r.reseed.position), ("layers", r.reseed.layers)]
                .into_iter()
                .filter_map(|(n, on)| on.then_some(n))
                .collect(),
            linear: match r.linear {
                LinearInit::Kaiming => "kaiming",
                LinearInit::Rand => "rand",
                LinearInit::EncoderLayer => "encoder-layer",
            },
            rand_layout: match r.layout {
                RandLayout::OutIn => "out-in",
                RandLayout::InOut => "in-out",
            },
            skip_draws: [
                ("token", r.skip.token),
                ("position", r.skip.position),
                ("layers", r.skip.layers),
                ("ffn", r.skip.ffn),
            ]
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .collect(),
            draw_order: r
                .draw_order
                .iter()
                .map(|p| match p {
                    Proj::Q => "q",
                    Proj::K => "k",
                    Proj::V => "v",
                })
                .collect(),
        }
    }
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
                        format!("unknown point {}", crate::error::quote(other)),
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
                format!("{} is not POINT=N", crate::error::quote(item)),
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
        linear: linear_init(cli.linear_init),
        layout: match cli.rand_layout {
            cli::LayoutArg::OutIn => RandLayout::OutIn,
            cli::LayoutArg::InOut => RandLayout::InOut,
        },
        draw_order,
    })
}

fn linear_init(arg: cli::LinearInitArg) -> LinearInit {
    match arg {
        cli::LinearInitArg::Kaiming => LinearInit::Kaiming,
        cli::LinearInitArg::Rand => LinearInit::Rand,
        cli::LinearInitArg::EncoderLayer => LinearInit::EncoderLayer,
    }
}
