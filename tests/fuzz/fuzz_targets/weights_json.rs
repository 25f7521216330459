//! The hand-typed JSON weights parser and the shape checks behind --weights.
#![no_main]
use attn_trace::sources::file;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(named) = file::parse(data, true, "fuzz") {
        let _ = file::infer(&named, "fuzz");
        let _ = file::non_finite(&named);
    }
});
