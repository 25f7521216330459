//! GGUF bytes through the reader: our header scan (keys and tensors once, the alignment, tensor
//! offsets), candle's header and tensor table, the metadata as a config (types, the rotary
//! base, epsilon, block count against the blk.N tensors), the tokenizer from the metadata.
//! Every input must end in a result or an error, never a panic or an allocation beyond what
//! the bytes can back. Seeded with the tiny Llama of fixtures/gguf and the hostile headers of
//! tests/it/hostile_files.rs.
#![no_main]
use attn_trace::sources::gguf::Gguf;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = Gguf::check_bytes(data);
});
