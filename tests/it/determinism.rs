//! The same command gives the same bytes: a GGUF whose layers mix quantization types (written
//! here with candle's GGUF writer from the tiny F32 Llama) traced several times, each run a
//! new process with its own hash seed, gives the same JSON and the same table, and
//! `config.model.tensor_types` lists every type of every group with its count.

use crate::common::*;
use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::Device;

/// The tiny F32 Llama of fixtures/gguf written again as `file` in `dir`, each tensor stored as
/// `types` says and the metadata in `overrides` replaced.
pub fn rewrite_gguf(
    dir: &std::path::Path,
    file: &str,
    types: &dyn Fn(&str) -> GgmlDType,
    overrides: &[(&str, gguf_file::Value)],
) -> String {
    let src = root().join("fixtures/gguf/tiny-llama-f32.gguf");
    let mut f = std::fs::File::open(src).unwrap();
    let mut content = gguf_file::Content::read(&mut f).unwrap();
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    names.sort();
    let tensors: Vec<(&str, QTensor)> = names
        .iter()
        .map(|name| {
            let q = content.tensor_infos[*name].read(&mut f, content.tensor_data_offset, &Device::Cpu).unwrap();
            let t = q.dequantize(&Device::Cpu).unwrap();
            (name.as_str(), QTensor::quantize(&t, types(name)).unwrap())
        })
        .collect();
    for (k, v) in overrides {
        content.metadata.insert(k.to_string(), v.clone());
    }
    let mut keys: Vec<&String> = content.metadata.keys().collect();
    keys.sort();
    let metadata: Vec<(&str, &gguf_file::Value)> = keys.iter().map(|k| (k.as_str(), &content.metadata[*k])).collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (*n, t)).collect();
    let path = dir.join(file);
    let mut out = std::fs::File::create(&path).unwrap();
    gguf_file::write(&mut out, &metadata, &tensors).unwrap();
    path.to_str().unwrap().to_string()
}

/// The tiny Llama with `attn_v` in Q8_0 (layer 0) and Q5_0 (layer 1), `ffn_down` in Q4_1 and
/// Q8_0, everything else F32.
fn mixed_gguf(dir: &std::path::Path) -> String {
    let types = |name: &str| match name {
        "blk.0.attn_v.weight" | "blk.1.ffn_down.weight" => GgmlDType::Q8_0,
        "blk.1.attn_v.weight" => GgmlDType::Q5_0,
        "blk.0.ffn_down.weight" => GgmlDType::Q4_1,
        _ => GgmlDType::F32,
    };
    rewrite_gguf(dir, "mixed.gguf", &types, &[])
}

fn stdout(args: &[&str]) -> Vec<u8> {
    let out = cmd().args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

#[test]
fn a_mixed_quantization_gguf_gives_the_same_bytes_every_run() {
    let dir = tempfile::tempdir().unwrap();
    let model = mixed_gguf(dir.path());
    let json = ["my shoes are small", "--model", &model, "--format", "json", "--steps", "all", "--top-k", "3"];
    let table = ["my shoes are small", "--model", &model, "--steps", "attn.weights,output", "--top-k", "3"];
    let (first_json, first_table) = (stdout(&json), stdout(&table));
    for run in 1..5 {
        assert!(stdout(&json) == first_json, "run {run}: the JSON differs");
        assert!(stdout(&table) == first_table, "run {run}: the table differs");
    }
    let doc: serde_json::Value = serde_json::from_slice(&first_json).unwrap();
    let m = &doc["config"]["model"];
    let types = &m["tensor_types"];
    assert_eq!(types["attn_v"], serde_json::json!({"q5_0": 1, "q8_0": 1}));
    assert_eq!(types["ffn_down"], serde_json::json!({"q4_1": 1, "q8_0": 1}));
    assert_eq!(types["attn_q"], serde_json::json!({"f32": 2}));
    assert_eq!(types["token_embd"], serde_json::json!({"f32": 1}));
    assert_eq!(m["stored_dtype"], "gguf f32+q4_1+q5_0+q8_0");
    let header = String::from_utf8(first_table).unwrap();
    assert!(header.lines().take(4).collect::<String>().contains("f32+q4_1+q5_0+q8_0"), "{header}");
    crate::export::assert_valid("mixed GGUF", &doc);
}

/// The same bytes whatever the number of cores: gemm splits each product between the trace's
/// pool's threads (`model/pool.rs`), and `--arithmetic ggml` its rows, and neither split
/// changes how any one value is summed. SmolLM2, whose products are large enough for gemm to
/// split, on one thread (`RAYON_NUM_THREADS=1`, which also sizes candle's element-wise pool)
/// and on the machine's count; the one-thread run also shows that a pool of one worker cannot
/// stall on the layer reader it waits for.
#[test]
fn one_core_gives_the_same_bytes_as_every_core() {
    let model = crate::gguf::smollm2();
    for arithmetic in ["f32", "ggml"] {
        let args = [
            "The capital of France is Paris, and the capital of Italy is",
            "--model",
            &model,
            "--arithmetic",
            arithmetic,
            "--steps",
            "attn.weights,add_norm2.sum,output",
            "--format",
            "json",
        ];
        let run = |threads: Option<&str>| {
            let mut c = cmd();
            c.args(args);
            match threads {
                Some(n) => c.env("RAYON_NUM_THREADS", n),
                None => c.env_remove("RAYON_NUM_THREADS"),
            };
            let out = c.output().unwrap();
            assert!(out.status.success(), "{arithmetic}, {threads:?}: {}", String::from_utf8_lossy(&out.stderr));
            out.stdout
        };
        assert!(run(Some("1")) == run(None), "{arithmetic}: one thread and every core differ");
    }
}

/// No map or set with a per-process iteration order is declared in the source, except where
/// it is only looked up (never iterated into output) or its order is undone before writing.
/// A new one fails here: use a BTreeMap/BTreeSet, or add it below with the reason.
#[test]
fn no_unordered_map_reaches_output() {
    let allowed = [
        ("strict_json.rs", "the keys seen so far in one object: membership only"),
        ("export/safetensors.rs", "a comment on why the writer avoids one"),
        ("sources/gguf_tokenizer.rs", "token scores and the vocabulary: looked up; merges keep vocabulary order"),
        ("export/weights.rs", "safetensors' serializer takes one; the header is rewritten sorted"),
    ];
    let src = root().join("src");
    let mut stack = vec![src.clone()];
    let mut found = Vec::new();
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/");
                let text = std::fs::read_to_string(&p).unwrap();
                if (text.contains("HashMap") || text.contains("HashSet")) && !allowed.iter().any(|(f, _)| *f == rel) {
                    found.push(rel);
                }
            }
        }
    }
    assert!(found.is_empty(), "hash maps or sets in {found:?}: their iteration order changes from run to run");
}
