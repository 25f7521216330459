//! `--steer L:FILE[@ALPHA[@FROM]]` and `--steer-from A B --at-layer L --alpha A` (activation
//! addition, Turner et al. 2023; docs/INTERVENTIONS.md): the vectors read (a `.npy` file, or a
//! row of a step of a saved JSON trace) or made by running the model on the two prompts, then
//! checked by the settings and put in the configuration's interventions before the run is
//! recorded. Here, in the run (`params.rs`), because `--steer-from` needs the parameters, the
//! tokenizer and a forward pass, all of which exist only once the sources are open.

use crate::config::Steer;
use crate::diff::json::Raw;
use crate::error::{quote, usage};
use crate::export::Data;
use crate::params::{Input, Params};
use crate::settings::analysis::steer::{self, SteerFile};
use crate::settings::Settings;
use crate::sources::Loaded;
use anyhow::Result;
use std::path::Path;

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
            super::pass::resid_after(&loaded.cfg, &params, &input, p.layer)
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

/// A `--steer` vector: a `.npy` of shape [d_model] or [1, d_model], or `FILE#NAME[ROW]`, one
/// row of a named tensor of a file `diff` reads (a saved JSON or JSONL trace, safetensors,
/// npz; `#NAME` alone for a tensor of one row, e.g. a [d_model] step). The file is read
/// through `input_file` (bounded, never a device) and its readers' checks (a header's claims
/// against the bytes present); the vector must be floats.
fn read(f: &SteerFile) -> Result<Vec<f32>> {
    const TRACES: [&str; 4] = [".json", ".jsonl", ".safetensors", ".npz"];
    let (path, name) = match f.file.rsplit_once('#') {
        Some((p, n)) if TRACES.iter().any(|e| p.to_ascii_lowercase().ends_with(e)) => (p, Some(n)),
        _ => (f.file.as_str(), None),
    };
    let what = format!("--steer {}", quote(path));
    let fix = "pass a .npy file of d_model floats, or FILE#NAME[ROW] of a saved trace (.json, .safetensors, .npz)";
    let cant = |why: String| usage(&what, why, fix);
    // What the path is (missing, a folder, a device) is said before what its name should be.
    crate::sources::input_file::open(&what, Path::new(path), fix)?;
    let is_npy = path.to_ascii_lowercase().ends_with(".npy");
    if name.is_none() && !is_npy {
        return Err(cant("is neither a .npy file nor a saved trace with #NAME".into()));
    }
    let bytes = crate::sources::input_file::read(&what, Path::new(path), fix)?;
    let Some(name) = name else {
        let (shape, data, dtype) = crate::export::npy::read(&bytes).map_err(cant)?;
        return vector(Raw { name: String::new(), shape, data, dims: None, heads: None, dtype: Some(dtype) }, None)
            .map_err(cant);
    };
    let raws = crate::diff::load::tensors(&bytes, &what)?.raws;
    pick(raws, name).map_err(cant)
}

/// `NAME[ROW]` of a file's tensors: the tensor of that name (or whose name means the same
/// step, e.g. a TransformerLens hook name), given once, and its row.
fn pick(raws: Vec<Raw>, spec: &str) -> Result<Vec<f32>, String> {
    let (id, row) = match spec.strip_suffix(']').and_then(|s| s.rsplit_once('[')) {
        Some((id, r)) => (id, Some(r.trim().parse::<usize>().map_err(|_| format!("[{r}] is not a row number"))?)),
        None => (spec, None),
    };
    if id.is_empty() {
        return Err("names no tensor after #".into());
    }
    let canonical = |n: &str| crate::diff::names::resolve(n).map(|r| r.id);
    let mut found = raws.into_iter().filter(|r| r.name == id || canonical(&r.name).is_some_and(|c| c == id));
    let raw = found.next().ok_or_else(|| format!("has no tensor {}", quote(id)))?;
    if found.next().is_some() {
        return Err(format!("holds {} twice", quote(id)));
    }
    vector(raw, row)
}

/// A tensor's row as a steering vector: floats, of shape [d] (no row), [1, d] or [rows, d]
/// (with a row; a leading batch dimension of 1 is dropped).
fn vector(raw: Raw, row: Option<usize>) -> Result<Vec<f32>, String> {
    let id = if raw.name.is_empty() { "the array".to_string() } else { raw.name.clone() };
    let Data::Num(values) = raw.data else { return Err(format!("{id} holds strings, not numbers")) };
    if let Some(d) = raw.dtype.filter(|d| !d.contains("float")) {
        return Err(format!("{id} holds {d} values; a steering vector is floats (save it as float32)"));
    }
    let shape = match raw.shape[..] {
        [1, rows, d] => vec![rows, d],
        _ => raw.shape.clone(),
    };
    let rows_of = |r: usize, d: usize| values.get(r * d..(r + 1) * d).map(|v| v.iter().map(|&x| x as f32).collect());
    match (&shape[..], row) {
        ([d], None) | ([1, d], None) => rows_of(0, *d).ok_or_else(|| format!("{id} is shorter than its shape")),
        ([_], Some(_)) => Err(format!("{id} is one row: drop [ROW]")),
        ([rows, d], Some(r)) if r < *rows => rows_of(r, *d).ok_or_else(|| format!("{id} is shorter than its shape")),
        ([rows, _], Some(r)) => Err(format!("{id} has {rows} rows, no row {r}")),
        ([rows, _], None) => Err(format!("{id} has {rows} rows: name one, e.g. {id}[0]")),
        _ => {
            Err(format!("{id} has shape {:?}; a steering vector is [d_model] or one row of [pos, d_model]", raw.shape))
        }
    }
}
