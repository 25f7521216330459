//! The diff input reader: any bytes as a trace file (JSON document, JSONL, named-tensor
//! JSON, safetensors or npz) must be read or refused with an error, never a panic.
#![no_main]
use attn_trace::diff::load;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = load::parse(data, "fuzz");
});
