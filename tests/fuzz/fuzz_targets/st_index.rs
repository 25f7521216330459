//! `model.safetensors.index.json` bytes through the index check a model folder's loader runs
//! before it opens a shard: strict JSON, a `weight_map` object, and every shard a plain file
//! name beside the index (no folder, no `..`, not a number). Every input must end in a list
//! of names or an error, never a panic; a name that passes is checked here to be plain.
#![no_main]
use attn_trace::sources::hf::checkpoint::index_shards;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(files) = index_shards(data, "fuzz") {
        assert!(!files.is_empty());
        for f in files {
            assert!(!f.is_empty() && !f.contains(['/', '\\']) && !f.contains(".."), "{f:?} escapes the folder");
        }
    }
});
