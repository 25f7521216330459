//! GGUF bytes through the reader: header, tensor table, metadata as a config, the tokenizer
//! from the metadata. Every input must end in a result or an error, never a panic or an
//! allocation beyond what the bytes can back. Seeded with the tiny Llama of fixtures/gguf.
#![no_main]
use attn_trace::sources::gguf::Gguf;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = Gguf::check_bytes(data);
});
