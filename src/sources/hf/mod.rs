//! Real pretrained encoders from Hugging Face model folders: `config.json`,
//! `model.safetensors` (memory-mapped through candle) and `tokenizer.json` (the `tokenizers`
//! crate). A folder is given as a path, or as `ORG/NAME` already in the local Hugging Face
//! cache; nothing is downloaded.

pub mod checkpoint;
pub mod dims;
pub(crate) mod fields;
mod folder;
pub mod load;
pub mod pickle;
mod pickle_ops;
mod readahead;
pub mod seq2seq;

pub use folder::{
    decoder_pad_id, encode, eos_ids, generation_eos, load_tokenizer, pad, resolve, truncation_note, Encoded, HfModel,
};
pub use load::open;
