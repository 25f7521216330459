//! Issue 27, "Also": the fuzz targets' findings and the checks they cover, replayed on the
//! stable toolchain. `model.safetensors.index.json` (target `st_index`): every shard a plain
//! file name beside the index, refused in one line otherwise. Each fuzz finding's minimised
//! input is kept in `tests/fuzz/seeds/<target>/` and replayed here.

use crate::common::root;
use crate::hostile_files::{folder, refused_line, trace};

#[test]
fn a_shard_index_names_plain_files_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let good = folder(dir.path(), "decoders/llama-sharded", |_| {});
    let out = trace(&good);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let index = |tag: &str, text: &str| {
        let model = folder(&dir.path().join(tag), "decoders/llama-sharded", |_| {});
        std::fs::write(model.join("model.safetensors.index.json"), text).unwrap();
        model
    };
    let first = r#"{"weight_map":{"lm_head.weight":"#;
    for (tag, text, fragment) in [
        ("dotdot", format!(r#"{first}"../model-00002-of-00002.safetensors"}}}}"#), "\"../model-00002-of"),
        ("absolute", format!(r#"{first}"/etc/passwd"}}}}"#), "the file \"/etc/passwd\""),
        ("backslash", format!(r#"{first}"a\\b.safetensors"}}}}"#), "expected a shard's file name"),
        ("number", format!(r#"{first}7}}}}"#), "the non-string \"7\""),
        ("empty_name", format!(r#"{first}""}}}}"#), "gives \"lm_head.weight\" the file \"\""),
        ("empty_map", r#"{"weight_map":{}}"#.to_string(), "weight_map names no tensor"),
        ("list", r#"{"weight_map":[]}"#.to_string(), "has no weight_map"),
        ("twice", format!(r#"{first}"a","lm_head.weight":"b"}}}}"#), "model.safetensors.index.json"),
        ("missing", format!(r#"{first}"model-3.safetensors"}}}}"#), "the shard model-3.safetensors"),
    ] {
        refused_line(&trace(&index(tag, &text)), fragment);
    }
}

/// Every committed seed of the newer targets, replayed through the same pure checks the fuzz
/// targets call: each ends in a result or an error (the minimised crashes among them).
#[test]
fn fuzz_seeds_end_in_a_result_or_an_error() {
    type Check = fn(&[u8]) -> anyhow::Result<()>;
    let index: Check = |b| attn_trace::sources::hf::checkpoint::index_shards(b, "fuzz").map(|_| ());
    let checks: [(&str, Check); 3] = [
        ("pickle", attn_trace::sources::hf::pickle::check_bytes),
        ("gguf", attn_trace::sources::gguf::Gguf::check_bytes),
        ("st_index", index),
    ];
    for (target, check) in checks {
        let dir = root().join("tests/fuzz/seeds").join(target);
        for e in std::fs::read_dir(dir).unwrap() {
            let _ = check(&std::fs::read(e.unwrap().path()).unwrap());
        }
    }
    let ok = std::fs::read(root().join("tests/fuzz/seeds/st_index/two_shards.json")).unwrap();
    let files = attn_trace::sources::hf::checkpoint::index_shards(&ok, "fuzz").unwrap();
    assert_eq!(files, ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]);
}
