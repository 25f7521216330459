//! `--params`: the parameters themselves as tables, as tutorials print them.

use crate::params::Params;
use crate::trace::{self, Selection};
use anyhow::Result;

/// `--params`: the projections and FFN linears of the shown layers as tensors named by their
/// weight-file names, titled with the names tutorials give them (the embedding tables are
/// steps of the trace already).
pub fn steps(params: &Params, show: &Selection) -> Result<Vec<trace::Step>> {
    let mut out = Vec::new();
    for (name, t) in params.named() {
        let (layer, local) = trace::split_id(&name);
        if layer.is_some_and(|l| show.layer.as_ref().is_some_and(|ls| !ls.contains(&l))) {
            continue;
        }
        let alias = match local.trim_end_matches(".weight").trim_end_matches(".bias") {
            "attn.q_proj" => "W_Q",
            "attn.k_proj" => "W_K",
            "attn.v_proj" => "W_V",
            "attn.out_proj" => "W_O",
            "ffn.linear1" | "ffn.up" => "W_1",
            "ffn.linear2" => "W_2",
            "ffn.gate" => "W_gate",
            _ => "",
        };
        let alias = match (alias, name.ends_with(".bias")) {
            ("", _) => continue,
            (a, true) => format!("b{}", &a[1..]),
            (a, false) => a.to_string(),
        };
        let dims: &'static [&'static str] = if t.dims().len() == 2 { &["out", "in"] } else { &["out"] };
        out.push(trace::Step {
            id: format!("{alias} = {name}"),
            layer,
            name: local.to_string(),
            dims: dims.to_vec(),
            shape: t.dims().to_vec(),
            heads: None,
            values: trace::Values::F32(t.flatten_all()?.to_vec1::<f32>()?),
        });
    }
    Ok(out)
}
