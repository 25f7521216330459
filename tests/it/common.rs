//! Helpers shared by the integration tests: running the binary and reading its JSON.

use assert_cmd::Command;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::process::Output;

pub fn cmd() -> Command {
    let mut c = Command::cargo_bin("attn-trace").unwrap();
    c.env_remove("NO_COLOR").env_remove("RUST_BACKTRACE");
    c
}

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs attn-trace with `args` and returns its JSON document (asserting success).
pub fn trace_json(args: &[&str]) -> Value {
    let out = cmd().args(args).args(["--format", "json"]).output().unwrap();
    assert!(out.status.success(), "attn-trace {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON document")
}

/// Runs attn-trace with `args` from the repository root and asserts that it refuses them in
/// one line: exit 2 (the usage-error code), nothing on stdout, exactly one line on stderr,
/// containing `want` (which may be empty when the caller checks the line itself). Returns
/// that line, newline included, for any further check.
pub fn refused(args: &[&str], want: &str) -> String {
    refused_output(&cmd().current_dir(root()).args(args).output().unwrap(), args, want)
}

/// [`refused`]'s checks on a run the caller made itself (another current directory,
/// environment or standard input); `who` names the run (its args, a path, …) in failure
/// messages.
pub fn refused_output(out: &Output, who: impl Debug, want: &str) -> String {
    let err = String::from_utf8(out.stderr.clone()).unwrap_or_else(|e| panic!("{who:?}: stderr is not UTF-8: {e}"));
    assert_eq!(out.status.code(), Some(2), "{who:?}: exit code, not 2 (usage error); stderr: {err}");
    assert!(out.stdout.is_empty(), "{who:?} wrote to stdout: {}; stderr: {err}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(err.lines().count(), 1, "{who:?}: stderr is not one line: {err}");
    assert!(err.contains(want), "{who:?}: expected {want:?} in stderr: {err}");
    err
}

/// Flattens nested arrays of numbers (or "nan"/"inf"/"-inf" strings) into f64s.
pub fn flat(v: &Value) -> Vec<f64> {
    let mut out = Vec::new();
    fn go(v: &Value, out: &mut Vec<f64>) {
        match v {
            Value::Array(a) => a.iter().for_each(|x| go(x, out)),
            Value::Number(n) => out.push(n.as_f64().unwrap()),
            Value::String(s) => out.push(match s.as_str() {
                "nan" => f64::NAN,
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                other => panic!("unexpected string {other}"),
            }),
            Value::Bool(b) => out.push(*b as u8 as f64),
            other => panic!("unexpected value {other}"),
        }
    }
    go(v, &mut out);
    out
}

/// A trace's steps: id → (shape, flat values).
pub type Steps = BTreeMap<String, (Vec<usize>, Vec<f64>)>;

/// step id → (shape, flat values) from a JSON document.
pub fn steps(doc: &Value) -> Steps {
    doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["id"] != "tokens")
        .map(|s| {
            let shape = s["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
            (s["id"].as_str().unwrap().to_string(), (shape, flat(&s["values"])))
        })
        .collect()
}

/// |a − b| ≤ atol + rtol·|b|, with equal infinities and NaNs counted as equal.
pub fn close(a: f64, b: f64, atol: f64, rtol: f64) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    if a.is_infinite() || b.is_infinite() {
        return a == b;
    }
    (a - b).abs() <= atol + rtol * b.abs()
}

/// Reads a safetensors file by hand (8-byte header length, JSON header, little-endian f32
/// data), so that the reference test depends on nothing attn-trace itself uses.
pub fn read_safetensors(path: &Path) -> BTreeMap<String, (Vec<usize>, Vec<f64>)> {
    let bytes = std::fs::read(path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let data = &bytes[8 + n..];
    let mut out = BTreeMap::new();
    for (name, info) in header.as_object().unwrap() {
        if name == "__metadata__" {
            continue;
        }
        assert_eq!(info["dtype"], "F32", "{name}");
        let shape: Vec<usize> =
            info["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
        let off = info["data_offsets"].as_array().unwrap();
        let (a, b) = (off[0].as_u64().unwrap() as usize, off[1].as_u64().unwrap() as usize);
        let vals = data[a..b].chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64).collect();
        out.insert(name.clone(), (shape, vals));
    }
    out
}

/// One step an oracle script computed: its id, its shape where the fixture gives one, and its
/// values flattened.
pub struct Want {
    pub id: String,
    pub shape: Option<Vec<usize>>,
    pub values: Vec<f64>,
}

impl Want {
    /// A step the fixture holds as bare values (`hidden_states[l]`, `attentions[l]`, …): only
    /// the number of values is checked against the trace's shape.
    pub fn values(id: impl Into<String>, values: &Value) -> Want {
        Want { id: id.into(), shape: None, values: flat(values) }
    }

    /// The oracle scripts' steps, as a list `[{"id", "shape", "values"}]` or an object
    /// `{id: {"shape", "values"}}`, in the fixture's order.
    pub fn steps(v: &Value) -> Vec<Want> {
        let one = |id: &str, s: &Value| Want {
            id: id.to_string(),
            shape: Some(s["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect()),
            values: flat(&s["values"]),
        };
        match v {
            Value::Array(a) => a.iter().map(|s| one(s["id"].as_str().unwrap(), s)).collect(),
            Value::Object(o) => o.iter().map(|(id, s)| one(id, s)).collect(),
            other => panic!("oracle steps are a list or an object, not {other}"),
        }
    }
}

/// How much was compared: steps, and values within them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Compared {
    pub steps: usize,
    pub values: usize,
}

/// A step id's tolerance `(atol, rtol)`.
type PerStep = dyn Fn(&str) -> (f64, f64);

/// The one harness for oracle fixtures: compares what a PyTorch/transformers script computed
/// with a trace, value by value within a tolerance chosen per step id, and collects every
/// mismatch (case, step, index, attn-trace's value and the oracle's) so that one run names
/// them all. [`Oracle::finish`] fails the test if there was any; dropping an `Oracle` with
/// mismatches unreported fails it too, so a forgotten `finish` cannot pass silently.
pub struct Oracle {
    who: &'static str,
    tol: Box<PerStep>,
    lowest_is_masked: bool,
    failures: Vec<String>,
    worst: (f64, String),
    total: Compared,
}

impl Oracle {
    /// `who` names the oracle in messages; `(atol, rtol)` is every step's tolerance for
    /// [`close`] until [`Oracle::per_step`] says otherwise.
    pub fn new(who: &'static str, (atol, rtol): (f64, f64)) -> Oracle {
        Oracle {
            who,
            tol: Box::new(move |_| (atol, rtol)),
            lowest_is_masked: false,
            failures: Vec::new(),
            worst: (0.0, String::new()),
            total: Compared::default(),
        }
    }

    /// A tolerance `(atol, rtol)` for each step id.
    pub fn per_step(mut self, tol: impl Fn(&str) -> (f64, f64) + 'static) -> Oracle {
        self.tol = Box::new(tol);
        self
    }

    /// The oracle masks with torch.finfo(float32).min where attn-trace writes −inf: both hide
    /// the key, so any oracle value ≤ −3.4e38 agrees with −inf.
    pub fn lowest_is_masked(mut self) -> Oracle {
        self.lowest_is_masked = true;
        self
    }

    /// Every step of `want` against the trace's: a step missing from the trace, a different
    /// shape (or number of values, where the fixture gives no shape) or a value outside the
    /// step's tolerance is a mismatch of `case`.
    pub fn compare(&mut self, case: &str, want: &[Want], got: &Steps) -> Compared {
        self.compare_rows(case, want, got, None)
    }

    /// [`Oracle::compare`] on the rows the oracle defines in a padded batch: `defined[p]` says
    /// whether position p's query sees a real key. Only those rows are compared (the axis
    /// before the last, where it has one entry per position), and for raw scores only those
    /// positions' keys (the others come from rows PyTorch leaves undefined).
    pub fn compare_rows(&mut self, case: &str, want: &[Want], got: &Steps, defined: Option<&[bool]>) -> Compared {
        let mut n = Compared::default();
        for w in want {
            let Some((shape, vals)) = got.get(&w.id) else {
                self.failures.push(format!("{case}: step {} missing from attn-trace's trace", w.id));
                continue;
            };
            if w.shape.as_ref().is_some_and(|s| s != shape) {
                self.failures.push(format!(
                    "{case}: {} shape {shape:?}, {} {:?}",
                    w.id,
                    self.who,
                    w.shape.as_ref().unwrap()
                ));
                continue;
            }
            let width = *shape.last().unwrap_or(&1);
            let rows = if shape.len() >= 2 { shape[shape.len() - 2] } else { 1 };
            let by_key = w.id.ends_with("attn.raw_scores");
            // A row is kept where its position is defined (when the axis before the last has one
            // entry per position); a raw score also needs its key's position defined.
            let row = |i: usize, d: &[bool]| shape.len() < 2 || rows != d.len() || d[(i / width) % rows];
            let key = |i: usize, d: &[bool]| !by_key || d[i % width];
            let keep = |i: usize| defined.is_none_or(|d| row(i, d) && key(i, d));
            let tol = (self.tol)(&w.id);
            n.values += self.values(&format!("{case}: {}", w.id), shape, vals, &w.values, tol, keep);
            n.steps += 1;
        }
        self.total.steps += n.steps;
        n
    }

    /// Values `got` against the oracle's `want` within `(atol, rtol)`, at the indices `keep`
    /// selects; `shape` (of `got`) only turns a flat index into a position for messages.
    /// Records one mismatch for `what` (its first index and how many are out) and returns
    /// how many values were compared.
    pub fn values(
        &mut self,
        what: &str,
        shape: &[usize],
        got: &[f64],
        want: &[f64],
        (atol, rtol): (f64, f64),
        keep: impl Fn(usize) -> bool,
    ) -> usize {
        if got.len() != want.len() {
            self.failures.push(format!("{what}: {} values, {} {}", got.len(), self.who, want.len()));
            return 0;
        }
        let (mut n, mut out, mut first) = (0, 0, None);
        for (i, (&a, &b)) in got.iter().zip(want).enumerate().filter(|(i, _)| keep(*i)) {
            n += 1;
            let masked = self.lowest_is_masked && a == f64::NEG_INFINITY && b <= -3.4e38;
            if !masked && !close(a, b, atol, rtol) {
                out += 1;
                first.get_or_insert((i, a, b));
            } else if a.is_finite() && (a - b).abs() > self.worst.0 {
                self.worst = ((a - b).abs(), format!("{what}{}", index(i, shape)));
            }
        }
        if let Some((i, a, b)) = first {
            self.failures.push(format!(
                "{what}{} = {a}, {} {b} (allowed {atol:e} + {rtol:e}·|{b}|; {out} of {n} values out)",
                index(i, shape),
                self.who
            ));
        }
        self.total.values += n;
        n
    }

    /// Reports what was compared and the largest difference, and fails on any mismatch.
    pub fn finish(mut self, label: &str) -> Compared {
        let (worst, at) = &self.worst;
        let at = if at.is_empty() { "no value (all equal)" } else { at };
        let Compared { steps, values } = self.total;
        eprintln!("{label}: {steps} steps, {values} values; largest difference {worst:.2e} at {at}");
        let failures = std::mem::take(&mut self.failures);
        assert!(
            failures.is_empty(),
            "{label}: {} mismatches with {}:\n{}",
            failures.len(),
            self.who,
            failures.join("\n")
        );
        self.total
    }
}

impl Drop for Oracle {
    fn drop(&mut self) {
        if !self.failures.is_empty() && !std::thread::panicking() {
            panic!("oracle mismatches never reported by finish():\n{}", self.failures.join("\n"));
        }
    }
}

/// `[h, q, k]` for a flat index into `shape` (the flat `[i]` when the shape does not fit).
fn index(i: usize, shape: &[usize]) -> String {
    if shape.is_empty() || shape.iter().product::<usize>() <= i {
        return format!("[{i}]");
    }
    let mut rest = i;
    let mut at: Vec<String> = shape
        .iter()
        .rev()
        .map(|d| {
            let p = rest % d;
            rest /= d;
            p.to_string()
        })
        .collect();
    at.reverse();
    format!("[{}]", at.join(", "))
}
