//! What [`super::open`] yields: the input and the model's shape ([`Loaded`]), and where the
//! parameters come from ([`Source`]), kept apart from the loaders that build them.

use super::{family, file, store, token_text};
use crate::config::ModelConfig;
use crate::params::Input;
use crate::settings::Recipe;

/// Everything known before the parameters are made: the input and the model's shape.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The sentence as given (a pair is joined with " ‖ ").
    pub sentence: Option<String>,
    /// One label per position.
    pub tokens: Vec<String>,
    pub input: Input,
    pub cfg: ModelConfig,
    /// How this run computes and holds the model (not in the trace): tiles, llama.cpp's
    /// arithmetic details, whether layers and the vocabulary stay in the file.
    pub run: crate::config::RunConfig,
    /// A real model's config.json (for `--check`).
    pub hf: Option<family::bert::BertConfig>,
    /// Notes for stderr (e.g. what `--truncate` dropped), printed by the output stage.
    pub notes: Vec<String>,
    /// A real model's tokenizer, to name predicted token ids.
    pub tokenizer: Option<tokenizers::Tokenizer>,
    /// The ids that end a generation: a language model's end-of-sequence tokens.
    pub stop_ids: Vec<u32>,
    /// `--chat`: the conversation the chat template rendered into the tokens.
    pub chat: Option<crate::trace::Chat>,
}

impl Loaded {
    /// A model made from flags or a weights file: no tokenizer, no config.json, no
    /// end-of-sequence token, no chat template.
    pub fn made(
        sentence: Option<String>,
        (tokens, input): (Vec<String>, Input),
        cfg: ModelConfig,
        notes: Vec<String>,
    ) -> Self {
        let run = Default::default();
        Loaded { sentence, tokens, input, cfg, run, hf: None, notes, tokenizer: None, stop_ids: Vec::new(), chat: None }
    }

    /// What each token spells as text, for a real model whose vocabulary spells bytes
    /// (byte-level BPE, SentencePiece); None for WordPiece and the toy vocabularies.
    pub fn texts(&self) -> Option<Vec<String>> {
        token_text::texts(self.tokenizer.as_ref(), &self.tokens)
    }
}

/// Where the parameters come from; consumed by [`Source::params`].
#[derive(Debug)]
pub enum Source {
    Seeded(Recipe),
    File(file::NamedTensors),
    /// A real model's memory-mapped checkpoint, unmapped once its parameters are copied out,
    /// so the mapped pages stop counting towards the run's memory.
    Model(Box<family::bert_weights::Weights>),
    /// A decoder's config and its tensors: a Hugging Face checkpoint, or a GGUF file under
    /// the same names.
    Decoder(Box<(family::DecoderConfig, Box<dyn store::TensorStore>)>),
    /// An encoder–decoder's config and checkpoint (T5, BART).
    Seq2Seq(Box<(family::seq2seq::Seq2SeqConfig, Box<dyn store::TensorStore>)>),
}
