//! `--steer L:FILE[@ALPHA[@FROM]]` and `--steer-from A B --at-layer L --alpha A` (activation
//! addition, Turner et al. 2023; docs/INTERVENTIONS.md): the vectors read (a `.npy` file, or a
//! row of a step of a saved JSON trace) or made by running the model on the two prompts, then
//! checked by the settings and put in the configuration's interventions before the run is
//! recorded. Here, beside `generating`, because `--steer-from` needs the parameters, the
//! tokenizer and a forward pass, all of which exist only once the sources are open.

use crate::config::Steer;
use crate::error::{quote, usage};
use crate::params::{Input, Params};
use crate::settings::analysis::steer::{self, SteerFile};
use crate::settings::Settings;
use crate::sources::Loaded;
use anyhow::Result;

/// The parameters `make` makes, with `loaded`'s configuration given the steering vectors the
/// settings ask for (read and checked first, so that a bad file is refused before any
/// parameter is read).
pub(crate) fn params(
    settings: &Settings,
    loaded: &mut Loaded,
    make: impl FnOnce(&Loaded) -> Result<Params>,
) -> Result<Params> {
    let asked = &settings.analysis.steer;
    if asked.is_empty() {
        return make(loaded);
    }
    let mut vectors = Vec::new();
    for f in &asked.files {
        steer::check_layer(&loaded.cfg, "--steer", f.layer)?;
        let vector = read(f)?;
        let s = Steer { layer: f.layer, alpha: f.alpha, from: f.from, source: f.file.clone(), vector };
        vectors.push(steer::check(&loaded.cfg, "--steer", s)?);
    }
    if let Some(p) = &asked.from_prompts {
        steer::check_layer(&loaded.cfg, "--at-layer", p.layer)?;
    }
    let params = make(loaded)?;
    if let Some(p) = &asked.from_prompts {
        let mut alone = Vec::new();
        let mut resid = |text: &str| -> Result<Vec<f32>> {
            let input = prompt(settings, loaded, text)?;
            if matches!(&input, Input::Ids { ids, .. } if ids.len() == 1) {
                alone.push(quote(text));
            }
            crate::model::steer::resid_after(&loaded.cfg, &params, &input, p.layer)
        };
        let (a, b) = (resid(&p.positive)?, resid(&p.negative)?);
        if !alone.is_empty() {
            loaded.notes.push(format!(
                "--steer-from: {} is one token, read at position 0, where the residual stream is usually many times \
                 larger than elsewhere (the first token is an attention sink), so the vector may swamp the run: a \
                 prompt of a few words (\"I love you\") reads a later position",
                alone.join(" and ")
            ));
        }
        let vector = a.iter().zip(&b).map(|(x, y)| x - y).collect();
        let source = format!("{} - {} after layer {}", quote(&p.positive), quote(&p.negative), p.layer);
        let s = Steer { layer: p.layer, alpha: p.alpha, from: 0, source, vector };
        vectors.push(steer::check(&loaded.cfg, "--steer-from", s)?);
    }
    loaded.cfg.interventions.steer = vectors;
    Ok(params)
}

/// One `--steer-from` prompt's ids, as the run's tokenizer splits the sentence (with its
/// special tokens unless `--no-special-tokens`).
fn prompt(settings: &Settings, loaded: &Loaded, text: &str) -> Result<Input> {
    let Some(tok) = &loaded.tokenizer else {
        return Err(usage(
            "--steer-from",
            "the model has no tokenizer to read the prompts with",
            "use a Hugging Face folder or a GGUF model, or save the vector and pass --steer L:FILE",
        ));
    };
    let special = matches!(settings.model, crate::settings::ModelChoice::Pretrained { special: true, .. });
    let e = tok.encode(text, special).map_err(|e| usage("--steer-from", e.to_string(), "pass plain text"))?;
    if e.get_ids().is_empty() {
        return Err(usage("--steer-from", format!("{} has no tokens", quote(text)), "pass a word or more"));
    }
    Ok(Input::Ids { ids: e.get_ids().to_vec(), type_ids: None })
}

/// A `--steer` vector: a `.npy` of shape [d_model] or [1, d_model] (float32 or float64), or
/// `TRACE.json#STEP[ROW]` / `TRACE.safetensors#STEP[ROW]`, one row of a step of a saved
/// trace (`#STEP` alone for a step of one row, e.g. a [d_model] step).
fn read(f: &SteerFile) -> Result<Vec<f32>> {
    let lower = f.file.to_ascii_lowercase();
    let (path, step) = match f.file.rsplit_once('#') {
        Some((p, s)) if [".json", ".safetensors"].iter().any(|e| p.to_ascii_lowercase().ends_with(e)) => (p, Some(s)),
        _ => (f.file.as_str(), None),
    };
    let cant = |why: String| {
        usage(
            "--steer",
            format!("{}: {why}", quote(path)),
            "pass a .npy file of d_model values, or TRACE.json#STEP[ROW] or TRACE.safetensors#STEP[ROW]",
        )
    };
    if std::path::Path::new(path).is_dir() {
        return Err(cant("is a folder".into()));
    }
    let bytes = std::fs::read(path).map_err(|e| cant(format!("cannot be read ({e})")))?;
    let table = match step {
        Some(_) if path.to_ascii_lowercase().ends_with(".json") => json_steps(&bytes).map_err(cant)?,
        Some(_) => crate::export::safetensors::read(&bytes, "--steer")?
            .into_iter()
            .filter_map(|n| match n.data {
                crate::export::Data::Num(v) => Some((n.name, n.shape, v.iter().map(|&x| x as f32).collect())),
                crate::export::Data::Str(_) => None,
            })
            .collect(),
        None if lower.ends_with(".npy") => return from_npy(&bytes).map_err(cant),
        None => return Err(cant("is neither a .npy file nor a saved trace with #STEP".into())),
    };
    pick(&table, step.unwrap_or_default()).map_err(cant)
}

/// A `.npy` array of shape [d] or [1, d].
fn from_npy(bytes: &[u8]) -> Result<Vec<f32>, String> {
    let (shape, data) = crate::export::npy::read(bytes)?;
    let crate::export::Data::Num(values) = data else { return Err("holds strings, not numbers".into()) };
    match shape[..] {
        [_] | [1, _] => Ok(values.iter().map(|&v| v as f32).collect()),
        _ => Err(format!("has shape {shape:?}; a steering vector is [d_model] or [1, d_model]")),
    }
}

/// A saved trace's steps: (id, shape, flat values).
type Table = Vec<(String, Vec<usize>, Vec<f32>)>;

/// A JSON trace's numeric steps.
fn json_steps(bytes: &[u8]) -> Result<Table, String> {
    let doc: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| format!("is not a JSON trace ({e})"))?;
    let steps = doc.get("steps").and_then(|s| s.as_array()).ok_or("is not a JSON trace (no steps)")?;
    let mut out = Vec::new();
    for s in steps {
        let (Some(id), Some(shape), Some(values)) = (s["id"].as_str(), s["shape"].as_array(), s.get("values")) else {
            continue;
        };
        let shape = shape.iter().map(|d| d.as_u64().unwrap_or(0) as usize).collect();
        let mut flat = Vec::new();
        if flatten(values, &mut flat).is_ok() {
            out.push((id.to_string(), shape, flat));
        }
    }
    Ok(out)
}

/// Nested arrays of numbers (or the strings nan, inf, -inf) in order.
fn flatten(v: &serde_json::Value, out: &mut Vec<f32>) -> Result<(), ()> {
    let x = match v {
        serde_json::Value::Array(a) => return a.iter().try_for_each(|x| flatten(x, out)),
        serde_json::Value::Number(n) => n.as_f64().ok_or(())? as f32,
        serde_json::Value::String(s) => match s.as_str() {
            "nan" => f32::NAN,
            "inf" => f32::INFINITY,
            "-inf" => f32::NEG_INFINITY,
            _ => return Err(()),
        },
        _ => return Err(()),
    };
    out.push(x);
    Ok(())
}

/// `STEP[ROW]` of a saved trace: the step's row ROW, or the step itself when it is one row.
fn pick(table: &Table, step: &str) -> Result<Vec<f32>, String> {
    let (id, row) = match step.strip_suffix(']').and_then(|s| s.rsplit_once('[')) {
        Some((id, r)) => (id, Some(r.trim().parse::<usize>().map_err(|_| format!("[{r}] is not a row number"))?)),
        None => (step, None),
    };
    let (_, shape, values) =
        table.iter().find(|(name, ..)| name == id).ok_or_else(|| format!("has no numeric step {}", quote(id)))?;
    match (&shape[..], row) {
        ([_], None) => Ok(values.clone()),
        ([_], Some(_)) => Err(format!("step {id} is one row: drop [ROW]")),
        ([1, _], None) => Ok(values.clone()),
        ([rows, d], Some(r)) if r < *rows => Ok(values[r * d..(r + 1) * d].to_vec()),
        ([rows, _], Some(r)) => Err(format!("step {id} has {rows} rows, no row {r}")),
        ([rows, _], None) => Err(format!("step {id} has {rows} rows: name one, e.g. {id}[0]")),
        _ => Err(format!("step {id} has shape {shape:?}; a steering vector is one row of a [pos, d_model] step")),
    }
}
