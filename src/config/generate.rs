//! How a generation chooses its tokens (`--generate`, `--sample`): plain data shared by the
//! settings that check it, the model that follows it and the trace that records it.

use serde::Serialize;

/// A generation's settings: how many tokens, when to stop, how each is chosen.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Generate {
    /// At most this many new tokens (`--generate N`, N ≥ 1).
    pub max_new: usize,
    /// The ids that end a generation when chosen (the model's end-of-sequence tokens); the
    /// token is kept, as transformers' `generate` keeps it. Empty with `--ignore-eos`.
    pub stop_ids: Vec<u32>,
    pub strategy: Strategy,
}

/// How the next token is chosen from a step's logits.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Strategy {
    /// The most probable token; of equal ones the lowest id, as `torch.argmax`.
    Greedy,
    /// Drawn from softmax(logits / temperature), restricted to the `top_k` most probable (0:
    /// all) and then to the smallest set whose probability reaches `top_p`, in that order (as
    /// transformers' logits warpers), with a generator seeded by `seed`.
    Sample { temperature: f64, top_p: f64, top_k: usize, seed: u64 },
}
