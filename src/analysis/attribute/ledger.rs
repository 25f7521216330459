//! The attribution's run state between the hooks ([`Ledger`]).

use crate::trace::attribute::{Request, Term};
use candle_core::Tensor;

/// The attribution's run state: the request, the terms so far, and how they are held. When
/// the direction the final residual stream is read along is known before the run (a pre-norm
/// stack read by a linear head), each term is projected on it as it is made and only numbers
/// are kept (`direction`); otherwise (a post-norm stack, whose later norms rescale every
/// earlier term, or BERT's masked-LM head) each term's vector at the position is kept
/// (`kept`) and carried through each later norm, frozen at the run's own scale.
#[derive(Debug, Clone)]
pub struct Ledger {
    pub request: Request,
    /// [d_model] f64: the direction terms are projected on (before the final norm's scale).
    pub direction: Option<Tensor>,
    pub terms: Vec<Term>,
    /// Keep mode: the terms' vectors, [count, d_model] f64 per push, in `terms`' order.
    pub kept: Vec<Tensor>,
    /// Project mode: each layer's sources, [head × key] values appended layer by layer.
    pub sources: Vec<f64>,
    /// Keep mode: each layer's sources' vectors, [head·key, d_model] f64.
    pub kept_sources: Vec<Tensor>,
    /// The run's (layers, heads, keys).
    pub shape: (usize, usize, usize),
}

impl Ledger {
    pub fn new(request: Request, direction: Option<Tensor>, shape: (usize, usize, usize)) -> Ledger {
        Ledger {
            request,
            direction,
            terms: Vec::new(),
            kept: Vec::new(),
            sources: Vec::new(),
            kept_sources: Vec::new(),
            shape,
        }
    }
}
