//! One recorded step: a named tensor with its dimension names, and how a head-first step is
//! narrowed to some heads.

/// One dimension name from the fixed vocabulary of TRACE.md.
pub type Dim = &'static str;

/// What a step holds. Most steps are f32 tensors; the first two are the tokenizer's output,
/// and a mask is boolean.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    F32(Vec<f32>),
    Bool(Vec<bool>),
    Int(Vec<i64>),
    Str(Vec<String>),
}

impl Values {
    pub fn len(&self) -> usize {
        match self {
            Values::F32(v) => v.len(),
            Values::Bool(v) => v.len(),
            Values::Int(v) => v.len(),
            Values::Str(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One traced tensor, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Full id, e.g. `layers.0.attn.weights`.
    pub id: String,
    /// The layer index for `layers.{i}.…` steps.
    pub layer: Option<usize>,
    /// The id without its `layers.{i}.` scope, e.g. `attn.weights`.
    pub name: String,
    pub dims: Vec<Dim>,
    pub shape: Vec<usize>,
    /// For per-head steps narrowed by `--head`: which heads the first dimension holds.
    pub heads: Option<Vec<usize>>,
    pub values: Values,
}

impl Step {
    /// Whether the first dimension is the head dimension.
    pub fn is_per_head(&self) -> bool {
        self.dims.first() == Some(&"head")
    }

    /// The f32 values, if this is a tensor step.
    pub fn f32s(&self) -> Option<&[f32]> {
        match &self.values {
            Values::F32(v) => Some(v),
            _ => None,
        }
    }
}

/// Keeps only heads `hs` of a head-first step, in that order (the caller has checked they
/// are in range).
pub(crate) fn narrow_heads(step: &mut Step, hs: &[usize]) {
    let per_head: usize = step.shape[1..].iter().product();
    fn pick<T: Clone>(v: &[T], hs: &[usize], n: usize) -> Vec<T> {
        hs.iter().flat_map(|&h| v[h * n..(h + 1) * n].iter().cloned()).collect()
    }
    step.values = match &step.values {
        Values::F32(v) => Values::F32(pick(v, hs, per_head)),
        Values::Bool(v) => Values::Bool(pick(v, hs, per_head)),
        Values::Int(v) => Values::Int(pick(v, hs, per_head)),
        Values::Str(v) => Values::Str(pick(v, hs, per_head)),
    };
    step.shape[0] = hs.len();
    step.heads = Some(hs.to_vec());
}
