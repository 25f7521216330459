//! `--steer-from A B`: the residual stream after a layer at a prompt's last position, the run
//! unsteered and unrecorded, from which `A − B` is the steering vector (docs/INTERVENTIONS.md).

use super::{embed, pass::Pass, stack};
use crate::config::ModelConfig;
use crate::hook::Hooks;
use crate::params::{Input, Params};
use crate::trace::{Recorder, Selection};
use anyhow::{anyhow, Result};

/// Layer `layer`'s output at `input`'s last position, `[d_model]`, with no intervention (its
/// port has no hook).
pub fn resid_after(cfg: &ModelConfig, params: &Params, input: &Input, layer: usize) -> Result<Vec<f32>> {
    let n = match input {
        Input::Ids { ids, .. } => ids.len(),
        Input::Matrix(m) => m.dim(0)?,
    };
    let quiet = || {
        Recorder::new(
            vec![String::new(); n],
            cfg.clone(),
            Selection { steps: Some(Default::default()), ..Default::default() },
        )
    };
    // A row-gathered table holds the sentence's rows: another prompt needs the whole table.
    if params.token.is_none() && params.stored.is_none() {
        return Err(anyhow!("internal: --steer-from needs the whole token table"));
    }
    let table_only = Params { token_rows: None, ..params.clone() };
    let x = embed::embed(cfg, &table_only, input, &mut Hooks::new(&mut quiet()))?; // [pos, d_model]
    let mut got = None;
    stack::stack(cfg, &params.layers, (0, &mut Pass::default()), x, &mut Hooks::new(&mut quiet()), |i, _, out, _| {
        if i == layer {
            got = Some(out.get(n - 1)?.to_vec1::<f32>()?);
        }
        Ok(())
    })?;
    got.ok_or_else(|| anyhow!("internal: the model has no layer {layer}"))
}
