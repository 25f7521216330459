//! The safetensors loader behind --weights (candle's reader plus our dtype handling).
#![no_main]
use attn_trace::sources::file;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(named) = file::parse(data, false, "fuzz") {
        let _ = file::infer(&named, "fuzz");
    }
});
