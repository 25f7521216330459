//! What one run is asked for, checked: the plain data [`Settings`] holds (where the sentence
//! comes from, which model, what is shown), built by `Settings::from_cli` (check.rs).

use super::{generate, outputs, views, Analysis, Chat, Format, Recipe, Shape, Weights};
use std::path::PathBuf;

/// Where the sentence comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Text {
    /// No sentence: a raw `--input` matrix, or an error later.
    None,
    /// The first positional argument.
    Arg(String),
    /// `-`: standard input.
    Stdin,
    /// `--file FILE`.
    File(PathBuf),
    /// `--batch FILE`: one sentence per line, each traced on its own.
    Batch(PathBuf),
}

/// The toy tokenizer's flags (the vocabulary file is only named here; sources read it).
#[derive(Debug, Clone, PartialEq)]
pub struct ToyTokenizer {
    pub lowercase: bool,
    /// Characters deleted before splitting (seed 000 deletes ",").
    pub remove: String,
    pub remove_punctuation: bool,
    pub order: VocabOrder,
    /// `--vocab FILE`: a fixed vocabulary, token → id.
    pub vocab: Option<PathBuf>,
    pub unk: Option<String>,
    pub bos: Option<String>,
    pub eos: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VocabOrder {
    /// Ids in order of first appearance (seed 000).
    FirstSeen,
    /// Ids from the sorted word list, Python's `sorted` (seeds 003, 004): upper case first.
    Sorted,
}

/// The toy model's own inputs: where its parameters and input rows come from.
#[derive(Debug, Clone)]
pub struct Toy {
    pub tokenizer: ToyTokenizer,
    /// `--input FILE`: a raw `[pos, d_model]` matrix instead of embeddings.
    pub matrix: Option<PathBuf>,
    /// `--weights FILE` (or the Python API's `weights=` dict): parameters instead of seeded draws.
    pub weights: Option<Weights>,
    /// How seeded parameters are drawn (ignored with `--weights`).
    pub recipe: Recipe,
}

/// Which model runs.
#[derive(Debug, Clone)]
pub enum ModelChoice {
    /// The toy encoder, built from the flags.
    Toy(Box<Toy>),
    /// `--model DIR|ORG/NAME`: a pretrained checkpoint.
    Pretrained {
        spec: String,
        truncate: bool,
        /// Add the tokenizer's special tokens (BOS, [CLS], [SEP]); `--no-special-tokens` drops them.
        special: bool,
        /// `--arithmetic`: ggml applies to GGUF files (`sources` refuses it for others).
        arithmetic: crate::config::Arithmetic,
    },
}

/// `--steps`, `--layer`, `--head` as typed (the lists parsed, in increasing order);
/// [`super::plan::Plan`] checks them against the model.
#[derive(Debug, Clone, Default)]
pub struct Select {
    pub steps: Option<String>,
    pub layer: Option<Vec<usize>>,
    pub head: Option<Vec<usize>>,
}

/// How the trace is shown.
#[derive(Debug, Clone)]
pub struct Output {
    pub format: Format,
    pub precision: usize,
    pub width: usize,
    /// Tables as a summary (a real model without --steps): see `render::summary`.
    pub summary: bool,
    /// Whether views that can colour should (`--color`, NO_COLOR, a terminal).
    pub color: bool,
    /// The views' flags (`--focus`, `--html`, …), checked.
    pub views: views::ViewOptions,
    /// A language model's next-token predictions per position (`--top-k`; 0: none).
    pub top_k: usize,
    /// `--stats` and `--rollout`: derived views to show; `--params`: the parameters as tables.
    pub stats: bool,
    pub rollout: bool,
    pub params: bool,
}

/// Everything one run needs to know, checked. Plain data: `Clone`, no open files.
#[derive(Debug, Clone)]
pub struct Settings {
    pub text: Text,
    /// A second sentence: a BERT model's sentence pair, or the second sentence of a batch;
    /// `--target`: an encoder–decoder's decoder text (teacher forcing).
    pub pair: Option<String>,
    pub target: Option<String>,
    /// Third and later sentences: a batch (`sources::batch` decides).
    pub more: Vec<String>,
    pub model: ModelChoice,
    pub shape: Shape,
    pub select: Select,
    pub output: Output,
    /// Files written besides stdout (`--save-weights`, `--save-trace`) and `--check`.
    pub outputs: outputs::Outputs,
    /// `--max-memory` in bytes, and the machine's available memory if known (a second cap).
    pub max_memory: u128,
    pub memory_available: Option<u128>,
    /// `--max-output`: the most bytes the printed output may take (None: no cap).
    pub max_output: Option<u128>,
    /// `--query-tile`: queries per tile of an attention that runs in tiles (`config::tiles`).
    pub query_tile: Option<usize>,
    /// Bytes a batch holds for earlier sentences (output, page parts), counted against the caps.
    pub held: u128,
    /// `--quiet`: no notes on stderr.
    pub quiet: bool,
    /// Interventions and analyses (`--ablate`, `--knockout`, `--lens`, `--stats`, `--rollout`).
    pub analysis: Analysis,
    /// `--pad-to N` and `--padding`: (N, pads on the left).
    pub padding: Option<(usize, bool)>,
    /// `--generate N` and how its tokens are chosen.
    pub generate: Option<generate::Generation>,
    /// `--chat`: the sentence as the user's turn of the model's chat template.
    pub chat: Option<Chat>,
}

impl Settings {
    /// Whether a real model runs (`--model`).
    pub fn is_pretrained(&self) -> bool {
        matches!(self.model, ModelChoice::Pretrained { .. })
    }

    /// These settings for one sentence of a batch.
    pub fn for_sentence(&self, sentence: &str) -> Settings {
        Settings { text: Text::Arg(sentence.to_string()), pair: None, more: Vec::new(), ..self.clone() }
    }
}
