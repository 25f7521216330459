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
        let resid = |text: &str| -> Result<Vec<f32>> {
            let input = prompt(settings, loaded, text)?;
            crate::model::steer::resid_after(&loaded.cfg, &params, &input, p.layer)
        };
        let (a, b) = (resid(&p.positive)?, resid(&p.negative)?);
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
/// `TRACE.json#STEP[ROW]`, one row of a step of a saved JSON trace (`#STEP` alone for a step
/// of one row, e.g. a [d_model] step).
fn read(f: &SteerFile) -> Result<Vec<f32>> {
    let (path, step) = match f.file.rsplit_once('#') {
        Some((p, s)) if p.to_ascii_lowercase().ends_with(".json") => (p, Some(s)),
        _ => (f.file.as_str(), None),
    };
    let cant = |why: String| {
        usage(
            "--steer",
            format!("{}: {why}", quote(path)),
            "pass a .npy file of d_model values or TRACE.json#STEP[ROW]",
        )
    };
    if std::path::Path::new(path).is_dir() {
        return Err(cant("is a folder".into()));
    }
    let bytes = std::fs::read(path).map_err(|e| cant(format!("cannot be read ({e})")))?;
    match step {
        Some(step) => from_trace(&bytes, step).map_err(cant),
        None if path.to_ascii_lowercase().ends_with(".npy") => from_npy(&bytes).map_err(cant),
        None => Err(cant("is neither a .npy file nor a .json trace with #STEP".into())),
    }
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

/// `STEP[ROW]` of a saved JSON trace: the step's row ROW (or the step itself, one row).
fn from_trace(bytes: &[u8], step: &str) -> Result<Vec<f32>, String> {
    let (id, row) = match step.strip_suffix(']').and_then(|s| s.rsplit_once('[')) {
        Some((id, r)) => (id, Some(r.trim().parse::<usize>().map_err(|_| format!("[{r}] is not a row number"))?)),
        None => (step, None),
    };
    let doc: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| format!("is not a JSON trace ({e})"))?;
    let steps = doc.get("steps").and_then(|s| s.as_array()).ok_or("is not a JSON trace (no steps)")?;
    let found = steps.iter().find(|s| s.get("id").and_then(|i| i.as_str()) == Some(id));
    let values = found.and_then(|s| s.get("values")).ok_or_else(|| format!("has no step {}", quote(id)))?;
    let rows = values.as_array().ok_or("the step is not an array")?;
    let vector = match (row, rows.first().is_some_and(|r| r.is_array())) {
        (Some(r), true) => rows
            .get(r)
            .and_then(|x| x.as_array())
            .ok_or_else(|| format!("the step has {} rows, no row {r}", rows.len()))?,
        (None, false) => rows,
        (None, true) if rows.len() == 1 => rows[0].as_array().ok_or("the step is not a matrix")?,
        (None, true) => return Err(format!("the step has {} rows: name one, e.g. {id}[0]", rows.len())),
        (Some(_), false) => return Err("the step is one row: drop [ROW]".into()),
    };
    vector.iter().map(number).collect()
}

/// A trace's number: a JSON number or the strings nan, inf, -inf.
fn number(v: &serde_json::Value) -> Result<f32, String> {
    match (v.as_f64(), v.as_str()) {
        (Some(x), _) => Ok(x as f32),
        (None, Some("nan")) => Ok(f32::NAN),
        (None, Some("inf")) => Ok(f32::INFINITY),
        (None, Some("-inf")) => Ok(f32::NEG_INFINITY),
        _ => Err(format!("the step holds {v}, not a number")),
    }
}
