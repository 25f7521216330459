//! `pytorch_model.bin` bytes through attn-trace's own pickle reader: the zip directory,
//! data.pkl's opcodes, every tensor's shape, strides and offset against its storage, and each
//! tensor read. Every input must end in a result or an error, never a panic, a hang or an
//! allocation beyond what the bytes can back. Seeded with fixtures/decoders/llama-bin's
//! checkpoint and the hostile variants of tests/it/hostile_files.rs (tests/fuzz/seeds/pickle).
#![no_main]
use attn_trace::sources::hf::pickle::check_bytes;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = check_bytes(data);
});
