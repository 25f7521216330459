//! `attn_trace._native.Trace`: a finished run held by Python. The steps' f32 values stay in
//! the Rust trace and numpy arrays are read-only views of them (no copy); the JSON document,
//! the HTML page and the trace files are rendered on request by the library's own writers,
//! so each is byte for byte what the command writes.

use attn_trace::settings::{Output, Settings};
use attn_trace::trace::Values;
use numpy::ndarray::{ArrayViewD, IxDyn};
use numpy::{PyArray1, PyArrayDyn, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyList;
use std::path::PathBuf;

/// A step's labels as Python sees them: (id, layer, name, dims, heads).
type StepInfo = (String, Option<usize>, String, Vec<&'static str>, Option<Vec<usize>>);

/// One run: the shown steps, the views, `--check`'s report and the HTML page's maps.
#[pyclass(frozen, module = "attn_trace._native")]
pub struct Trace {
    done: attn_trace::Finished,
    output: Output,
}

impl Trace {
    /// Ends a run as the command does: a failed `--check` is an error (exit 1), after the
    /// files were written.
    pub fn new(py: Python<'_>, mut done: attn_trace::Finished, settings: Settings) -> PyResult<Trace> {
        if let Err(e) = std::mem::replace(&mut done.checked, Ok(())) {
            return Err(crate::fail(py, e));
        }
        Ok(Trace { done, output: settings.output })
    }

    /// The JSON document, as `--format json` prints it.
    pub fn json(&self) -> String {
        let mut out = Vec::new();
        let d = &self.done;
        // Writing into memory cannot fail.
        let _ = attn_trace::render::render(&d.trace, &d.views, &self.output, d.check.as_ref(), &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    /// The `--html` page (every recorded head, whatever `steps` shows), if the trace has
    /// attention weights.
    fn page(&self) -> Option<Vec<u8>> {
        let maps = self.done.maps.as_ref().filter(|m| !m.maps.is_empty())?;
        let mut out = Vec::new();
        let views = &self.done.views;
        attn_trace::render::html::write(&self.done.trace, maps, views, &self.output, &mut out).ok()?;
        Some(out)
    }
}

#[pymethods]
impl Trace {
    /// Token strings, one per position.
    #[getter]
    fn tokens(&self) -> Vec<String> {
        self.done.trace.tokens.clone()
    }

    /// What each token spells as text (` café`, `<0xE5>` for part of a character), or None
    /// for a vocabulary without a byte form (WordPiece, the toy vocabularies): JSON's
    /// `input.texts`.
    #[getter]
    fn texts(&self) -> Option<Vec<String>> {
        self.done.trace.texts.clone()
    }

    /// Each position's label, as tables, heatmaps and the page show it (`·café`).
    #[getter]
    fn labels(&self) -> Vec<String> {
        self.done.trace.labels()
    }

    /// The next-token predictions as JSON text (the document's `predictions`), or None for a
    /// model without a language-model head.
    fn predictions_json(&self) -> Option<String> {
        attn_trace::render::predictions::to_json(&self.done.trace)
    }

    /// `--generate`'s record as JSON text (the document's `generation` without the decode
    /// steps' values, which `generation_step_values` hands over as arrays), or None.
    fn generation_json(&self) -> Option<String> {
        let d = &self.done;
        attn_trace::render::generate::to_json_with(&d.trace, d.views.generation.as_deref(), false)
    }

    /// Each decode step as (step, position, [(id, value)]), values as `step_values` gives them.
    fn generation_step_values<'py>(this: Bound<'py, Self>) -> PyResult<Vec<GenStep<'py>>> {
        let me = this.get();
        let Some(g) = &me.done.trace.generation else { return Ok(Vec::new()) };
        let mut out = Vec::new();
        for d in &g.steps {
            let values = d.steps.iter().map(|s| Ok((s.id.clone(), value(&this, s)?))).collect::<PyResult<Vec<_>>>()?;
            out.push((d.step, d.position, values));
        }
        Ok(out)
    }

    /// Vocabulary ids, or None for a raw input matrix.
    #[getter]
    fn token_ids(&self) -> Option<Vec<u32>> {
        self.done.trace.token_ids.clone()
    }

    /// The JSON document's `config`, as JSON text.
    fn config_json(&self) -> String {
        self.done.trace.config_json().to_string()
    }

    /// The notes the command prints on stderr.
    #[getter]
    fn notes(&self) -> Vec<String> {
        self.done.notes.clone()
    }

    /// Each step as (id, layer, name, dims, heads): `heads` says which heads a step narrowed
    /// by `head=` holds.
    fn step_info(&self) -> Vec<StepInfo> {
        let steps = &self.done.trace.steps;
        steps.iter().map(|s| (s.id.clone(), s.layer, s.name.clone(), s.dims.clone(), s.heads.clone())).collect()
    }

    /// Each step as (id, value): f32 steps as read-only numpy views of the trace's own
    /// buffers, masks as bool and ids as int64 arrays, strings as (shape, list).
    fn step_values<'py>(this: Bound<'py, Self>) -> PyResult<Vec<(String, Bound<'py, PyAny>)>> {
        let me = this.get();
        me.done.trace.steps.iter().map(|s| Ok((s.id.clone(), value(&this, s)?))).collect()
    }

    /// The JSON document, byte for byte what `attn-trace … --format json` prints.
    fn to_json(&self) -> String {
        self.json()
    }

    /// The `--html` page, or None when the trace holds no attention weights.
    fn html(&self) -> Option<String> {
        self.page().map(|p| String::from_utf8_lossy(&p).into_owned())
    }

    /// Writes the trace to `path`, in the format its extension names: .json (the document),
    /// .html (the page), .safetensors or .npz (the steps as named tensors).
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        use attn_trace::error::usage;
        use attn_trace::settings::outputs::TraceKind;
        let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
        let what = format!("save {}", path.display());
        let t = &self.done.trace;
        let bytes = match ext.as_deref() {
            Some("json") => Ok(self.json().into_bytes()),
            Some("html") => self.page().ok_or_else(|| {
                usage(&what, "the trace holds no attention weights to draw", "trace a model with attention")
            }),
            Some("safetensors") => attn_trace::export::encode_trace(t, TraceKind::Safetensors, Default::default()),
            Some("npz") => attn_trace::export::encode_trace(t, TraceKind::Npz, Default::default()),
            _ => {
                Err(usage(&what, "the extension names no format", "end the name in .json, .html, .safetensors or .npz"))
            }
        };
        let written = bytes.and_then(|b| attn_trace::output::write_file("save", &path, &b));
        written.map_err(|e| crate::fail(py, e))
    }
}

/// A decode step as Python gets it: (step, position, [(id, value)]).
type GenStep<'py> = (usize, usize, Vec<(String, Bound<'py, PyAny>)>);

/// One step's values: f32 as a read-only numpy view of the trace's own buffer, masks as bool
/// and ids as int64 arrays, strings as (shape, list).
fn value<'py>(this: &Bound<'py, Trace>, s: &attn_trace::trace::Step) -> PyResult<Bound<'py, PyAny>> {
    let py = this.py();
    Ok(match &s.values {
        Values::F32(v) => {
            let view = ArrayViewD::from_shape(IxDyn(&s.shape), v.as_slice())
                .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
            // SAFETY: the values live in the frozen trace, which is never changed or moved,
            // and the array keeps `this` (their owner) alive as its base.
            let a: Bound<'py, PyArrayDyn<f32>> =
                unsafe { PyArrayDyn::borrow_from_array(&view, this.clone().into_any()) };
            a.call_method1("setflags", (false,))?;
            a.into_any()
        }
        Values::Bool(v) => PyArray1::from_vec(py, v.clone()).reshape(s.shape.clone())?.into_any(),
        Values::Int(v) => PyArray1::from_vec(py, v.clone()).reshape(s.shape.clone())?.into_any(),
        Values::Str(v) => (s.shape.clone(), PyList::new(py, v)?).into_pyobject(py)?.into_any(),
    })
}
