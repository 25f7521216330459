//! Direct logit attribution's data (`--attribute ANSWER [FOIL]`): what is asked
//! ([`Request`]) and the result the trace carries ([`Attribution`]): every term's share of the
//! logit (difference) at one position, each head's share split by source position, and the sum
//! check. The arithmetic is `analysis/attribute/`; docs/INTERVENTIONS.md defines every term.

/// What `--attribute` asks, checked against the model and its tokens (`settings::plan`).
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The position whose logits are attributed: the last, a masked LM's first `[MASK]`, or `--at`.
    pub position: usize,
    pub answer: u32,
    /// `None`: the answer's logit alone; else logit[answer] − logit[foil].
    pub foil: Option<u32>,
}

/// One answer token, named as predictions are (the token string and its text, filled in
/// after the run from the tokenizer).
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub id: u32,
    pub token: Option<String>,
    pub text: Option<String>,
}

/// One term of the decomposition: `layer` and `index` (a head, an expert) where it has them;
/// `name` says what it is (docs/INTERVENTIONS.md lists them): `embed.token`, `attn.head`,
/// `attn.bias`, `ffn`, `ffn.bias`, `ffn.expert`, `final_norm.bias`, ….
#[derive(Debug, Clone, PartialEq)]
pub struct Term {
    pub layer: Option<usize>,
    pub name: &'static str,
    pub index: Option<usize>,
    pub value: f64,
}

impl Term {
    /// The term's id: `embed.token`, `layers.3.ffn`, `layers.3.attn.head.4`.
    pub fn id(&self) -> String {
        let base = match self.layer {
            Some(l) => super::steps::layer_id(l, self.name),
            None => self.name.to_string(),
        };
        match self.index {
            Some(i) => format!("{base}.{i}"),
            None => base,
        }
    }
}

/// The finished decomposition.
#[derive(Debug, Clone, PartialEq)]
pub struct Attribution {
    pub position: usize,
    pub answer: Answer,
    pub foil: Option<Answer>,
    /// Every term, in the order the forward pass adds them to the residual stream.
    pub terms: Vec<Term>,
    /// Each head's term split by the key it read, `[layer, head, key_pos]`, row-major.
    pub sources: Vec<f64>,
    /// (layers, heads, keys) of `sources`.
    pub shape: (usize, usize, usize),
    /// Σ terms.
    pub total: f64,
    /// The model's own logit (difference) at `position`, before a final soft-cap.
    pub logit: f64,
    /// Soft-capped models (Gemma 2): the logit (difference) the model returns, after the cap;
    /// the terms add up to `logit`, since the cap is not linear.
    pub capped: Option<f64>,
}

impl Attribution {
    /// |total − logit| / max(|logit|, 1e-30): the sum check.
    pub fn relative_error(&self) -> f64 {
        (self.total - self.logit).abs() / self.logit.abs().max(1e-30)
    }

    /// The heads' terms as a `[layer × head]` grid (0 for a head without a term).
    pub fn heads(&self) -> Vec<f64> {
        let (layers, heads, _) = self.shape;
        let mut out = vec![0.0; layers * heads];
        for t in self.terms.iter().filter(|t| t.name == HEAD) {
            if let (Some(l), Some(h)) = (t.layer, t.index) {
                out[l * heads + h] = t.value;
            }
        }
        out
    }
}

/// The name of a head's term.
pub const HEAD: &str = "attn.head";

/// The relative error the sum check accepts.
pub const SUM_TOLERANCE: f64 = 1e-5;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_the_head_grid() {
        let t = |layer, name, index, value| Term { layer, name, index, value };
        let a = Attribution {
            position: 1,
            answer: Answer { id: 3, token: None, text: None },
            foil: None,
            terms: vec![
                t(None, "embed.token", None, 0.5),
                t(Some(1), HEAD, Some(0), 0.25),
                t(Some(1), "ffn", None, 1.0),
            ],
            sources: vec![0.0; 4],
            shape: (2, 2, 1),
            total: 1.75,
            logit: 1.75,
            capped: None,
        };
        assert_eq!(a.terms[1].id(), "layers.1.attn.head.0");
        assert_eq!(a.terms[2].id(), "layers.1.ffn");
        assert_eq!(a.heads(), vec![0.0, 0.0, 0.25, 0.0]);
        assert_eq!(a.relative_error(), 0.0);
    }
}
