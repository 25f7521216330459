//! GGUF files: the tiny Llama of fixtures/gguf (made by fixtures/gguf/make_tiny.py from the
//! transformers checkpoint fixtures/decoders/llama-gqa, laid out as llama.cpp lays it out,
//! Q/K rows permuted) traces exactly as the checkpoint it came from when stored in F32, and
//! within quantization error when stored as Q4_1/Q8_0; malformed files are one-line errors.
//! So do F32 files of the tiny Qwen2, GPT-NeoX and Phi-3 checkpoints (architectures `qwen2`,
//! `gptneox`, `phi3`) and of the mixtures of experts (make_moe.py: `llama` with experts,
//! `qwen2moe`).

use crate::common::*;

fn tiny(name: &str) -> String {
    root().join("fixtures/gguf").join(name).to_str().unwrap().to_string()
}

fn hf() -> String {
    root().join("fixtures/decoders/llama-gqa").to_str().unwrap().to_string()
}

/// Every step of `reference` (a trace of the checkpoint) against the GGUF file's trace, within
/// 1e-5 absolute plus 1e-5 relative.
fn same_steps(what: &'static str, reference: &Steps, gguf: &Steps) {
    let want: Vec<Want> = reference
        .iter()
        .map(|(id, (shape, v))| Want { id: id.clone(), shape: Some(shape.clone()), values: v.clone() })
        .collect();
    let mut oracle = Oracle::new(what, (1e-5, 1e-5));
    oracle.compare("gguf", &want, gguf);
    oracle.finish(what);
}

#[test]
fn an_f32_gguf_traces_as_its_checkpoint() {
    // Every step, so the Q/K permutation is undone exactly (q_rot, scores and weights agree).
    let a = steps(&trace_json(&["my shoes are small, my feet are big.", "--model", &hf(), "--steps", "all"]));
    let b = steps(&trace_json(&[
        "my shoes are small, my feet are big.",
        "--model",
        &tiny("tiny-llama-f32.gguf"),
        "--steps",
        "all",
    ]));
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    same_steps("checkpoint", &a, &b);
}

#[test]
fn a_qwen2_gguf_traces_as_its_checkpoint() {
    // Architecture qwen2: Q/K/V biases, and no Q/K permutation to undo.
    let hf = root().join("fixtures/decoders/qwen2");
    let a = steps(&trace_json(&[
        "my shoes are small, my feet are big.",
        "--model",
        hf.to_str().unwrap(),
        "--steps",
        "all",
    ]));
    let b = steps(&trace_json(&[
        "my shoes are small, my feet are big.",
        "--model",
        &tiny("tiny-qwen2-f32.gguf"),
        "--steps",
        "all",
    ]));
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    same_steps("checkpoint", &a, &b);
}

/// Mixtral (llama.cpp's `llama` with an `expert_count`, Q/K permuted) and Qwen2-MoE
/// (`qwen2moe`, with its shared expert) as fixtures/gguf/make_moe.py lays them out, each
/// projection's experts stacked into one 3-D tensor: every step as the checkpoint's.
#[test]
fn mixtures_of_experts_in_gguf_trace_as_their_checkpoints() {
    for (folder, file, model_type) in
        [("mixtral", "tiny-mixtral-f32.gguf", "mixtral"), ("qwen2_moe", "tiny-qwen2moe-f32.gguf", "qwen2_moe")]
    {
        let hf = root().join("fixtures/decoders").join(folder);
        let args = |m: &str| trace_json(&["my shoes are small, my feet are big.", "--model", m, "--steps", "all"]);
        let (a, b) = (args(hf.to_str().unwrap()), args(&tiny(file)));
        assert_eq!(b["config"]["model"]["model_type"], model_type, "{file}");
        assert_eq!(a["config"]["experts"], b["config"]["experts"], "{file}");
        let (a, b) = (steps(&a), steps(&b));
        assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>(), "{file}");
        same_steps("checkpoint", &a, &b);
    }
}

#[test]
fn gptneox_and_phi3_ggufs_trace_as_their_checkpoints() {
    // fixtures/gguf/make_neox_phi3.py. gptneox: the converter's [q | k | v] blocks are split
    // per head again, the rotary width is rope.dimension_count, the parallel layer
    // use_parallel_residual. phi3: fused qkv and gate_up, partial rotary, a tied head, and
    // LongRoPE's factors from the rope_factors tensors: the first sentence is longer than the
    // original 8 positions (long factors), the second shorter (short factors).
    let cases = [
        ("gpt_neox", "tiny-gptneox-f32.gguf", "my shoes are small, my feet are big."),
        ("phi3-partial", "tiny-phi3-f32.gguf", "my shoes are small, my feet are big."),
        ("phi3-partial", "tiny-phi3-f32.gguf", "The capital of France is"),
    ];
    for (hf, file, sentence) in cases {
        let hf = root().join("fixtures/decoders").join(hf);
        let a = trace_json(&[sentence, "--model", hf.to_str().unwrap(), "--steps", "all"]);
        let b = trace_json(&[sentence, "--model", &tiny(file), "--steps", "all"]);
        assert_eq!(a["input"]["token_ids"], b["input"]["token_ids"], "{file}: the metadata's tokenizer");
        // (Not eps: the file stores it as an f32.)
        for key in ["rope", "parallel", "lm_head", "kv_heads", "activation"] {
            assert_eq!(a["config"][key], b["config"][key], "{file}: config.{key}");
        }
        let (a, b) = (steps(&a), steps(&b));
        assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>(), "{file}");
        same_steps("checkpoint", &a, &b);
    }
}

#[test]
fn a_quantized_gguf_traces_as_the_gguf_packages_dequantization() {
    // tiny-llama-dequantized/ holds the same Q4_1/Q8_0 tensors dequantized (and un-permuted)
    // by the `gguf` Python package: candle's dequantization must give the same numbers.
    let dq = root().join("fixtures/gguf/tiny-llama-dequantized");
    let a = trace_json(&["my shoes are small", "--model", dq.to_str().unwrap(), "--steps", "all"]);
    let b = trace_json(&["my shoes are small", "--model", &tiny("tiny-llama.gguf"), "--steps", "all"]);
    assert_eq!(a["input"]["token_ids"], b["input"]["token_ids"], "the metadata's tokenizer");
    let types = &b["config"]["model"]["tensor_types"];
    assert_eq!(types["attn_q"], serde_json::json!({"q4_1": 2}));
    assert_eq!(types["token_embd"], serde_json::json!({"q8_0": 1}));
    let (sa, sb) = (steps(&a), steps(&b));
    assert!(sa.len() > 30);
    same_steps("dequantized checkpoint", &sa, &sb);
}

#[test]
fn malformed_gguf_files_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read(tiny("tiny-llama.gguf")).unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p.to_str().unwrap().to_string()
    };
    let mut wrong_magic = good.clone();
    wrong_magic[..4].copy_from_slice(b"GGUX");
    let mut wrong_version = good.clone();
    wrong_version[4..8].copy_from_slice(&99u32.to_le_bytes());
    // Version 3: magic, version, tensor count (u64), metadata count (u64); the first key's
    // length is at byte 24. An absurd metadata count and an absurd key length:
    let mut huge_count = good.clone();
    huge_count[16..24].copy_from_slice(&(1u64 << 60).to_le_bytes());
    let mut huge_string = good.clone();
    huge_string[24..32].copy_from_slice(&(1u64 << 60).to_le_bytes());
    // A metadata key that is not UTF-8 (the first key's text starts at byte 32).
    let mut not_utf8 = good.clone();
    not_utf8[32] = 0xff;
    let cases = [
        (write("utf8.gguf", &not_utf8), "is not UTF-8"),
        (write("truncated.gguf", &good[..good.len() / 2]), "the file is truncated"),
        (write("header.gguf", &good[..20]), "not a readable GGUF file"),
        (write("magic.gguf", &wrong_magic), "not a readable GGUF file"),
        (write("version.gguf", &wrong_version), "not a readable GGUF file"),
        (write("count.gguf", &huge_count), "not a readable GGUF file"),
        (write("string.gguf", &huge_string), "not a readable GGUF file"),
        (write("empty.gguf", b""), "not a readable GGUF file"),
    ];
    for (path, fragment) in cases {
        let err = refused(&["my shoes", "--model", &path], fragment);
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// SmolLM2-135M-Instruct as GGUF (Q4_1/Q8_0), fetched by tests/fetch-smollm2.sh; these tests
/// fail, not skip, when it is missing.
pub fn smollm2() -> String {
    let p = root().join(".cache/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(
        p.is_file(),
        "the test model is missing at {}: run tests/fetch-smollm2.sh (tests/run.sh does it)",
        p.display()
    );
    p.to_str().unwrap().to_string()
}

#[test]
fn smollm2_says_paris() {
    // transformers 4.46.3 on the same file (docs: MODELS facts in fixtures/oracle/gguf):
    // "The capital of France is" → ids 504 3575 282 4649 314, and " Paris" next.
    let doc = trace_json(&["The capital of France is", "--model", &smollm2(), "--steps", "output"]);
    assert_eq!(doc["input"]["token_ids"], serde_json::json!([504, 3575, 282, 4649, 314]));
    let last = &doc["predictions"][4]["top"][0];
    assert_eq!(last["token"], "ĠParis", "{last}");
    assert_eq!(last["text"], " Paris", "{last}");
    let c = &doc["config"];
    assert_eq!((c["layers"].as_u64(), c["heads"].as_u64(), c["kv_heads"].as_u64()), (Some(30), Some(9), Some(3)));
    assert_eq!(c["model"]["tensor_types"]["attn_q"], serde_json::json!({"q4_1": 30}));
}

#[test]
fn ollama_names_resolve_through_a_local_store() {
    // A store laid out as Ollama lays it out: a manifest naming the model layer's digest.
    let store = tempfile::tempdir().unwrap();
    let digest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    std::fs::create_dir_all(store.path().join("blobs")).unwrap();
    std::fs::copy(tiny("tiny-llama-f32.gguf"), store.path().join(format!("blobs/sha256-{digest}"))).unwrap();
    let manifests = store.path().join("manifests/registry.ollama.ai/library/tiny");
    std::fs::create_dir_all(&manifests).unwrap();
    let manifest = serde_json::json!({"schemaVersion": 2, "layers": [
        {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:ffff"},
        {"mediaType": "application/vnd.ollama.image.model", "digest": format!("sha256:{digest}")}]});
    std::fs::write(manifests.join("q4"), manifest.to_string()).unwrap();
    let run = |spec: &str| {
        cmd()
            .env("OLLAMA_MODELS", store.path())
            .args(["my shoes", "--model", spec, "--format", "json", "--steps", "output"])
            .output()
            .unwrap()
    };
    let out = run("ollama:tiny:q4");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let direct = trace_json(&["my shoes", "--model", &tiny("tiny-llama-f32.gguf"), "--steps", "output"]);
    let via: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(via["steps"], direct["steps"]);
    let out = run("ollama:tiny");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no Ollama manifest"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run("ollama:../../etc");
    assert_eq!(out.status.code(), Some(2));
}

/// SmolLM2 against transformers 4.46.3 on the same GGUF (fixtures/oracle/gguf, made by
/// gguf_oracle.py: lm_head tied by hand, no special tokens on either side): token ids, every
/// recorded layer's attention weights (≤ 1e-5), the first and last positions' hidden state
/// after every layer (≤ 1e-4 plus 1e-4 relative plus 4e-6 of the row's largest value: 30
/// layers of f32 sums in two orders), layer 0's intermediates, and the top-1 prediction at
/// every position.
#[test]
fn smollm2_matches_transformers() {
    let model = smollm2();
    let dir = root().join("fixtures/oracle/gguf");
    let layer0: Vec<String> = ["norm1.out", "attn.q", "attn.k", "attn.v", "attn.q_rot", "attn.k_rot", "attn.context"]
        .iter()
        .chain(&["attn.out", "add_norm1.sum", "norm2.out", "ffn.gate", "ffn.up", "ffn.act", "ffn.out"])
        .map(|s| format!("layers.0.{s}"))
        .collect();
    let list = format!("weights,add_norm2.sum,final_norm.out,embed.out,{}", layer0.join(","));
    // Attention weights against `attentions`; hidden-state rows and layer 0's steps at 1e-4.
    let mut weights = Oracle::new("transformers", (1e-5, 0.0));
    let mut others = Oracle::new("transformers", (1e-4, 1e-4));
    let mut cases = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !name.starts_with("smollm2_") {
            continue;
        }
        cases += 1;
        let case: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let doc = trace_json(&[case["sentence"].as_str().unwrap(), "--model", &model, "--steps", &list]);
        assert_eq!(doc["input"]["token_ids"], case["input_ids"], "{name}: ids");
        let ours = steps(&doc);
        let attentions: Vec<Want> = case["attentions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| Want::values(format!("layers.{}.attn.weights", a["layer"]), &a["values"]))
            .collect();
        weights.compare(&name, &attentions, &ours);
        hidden_rows(&mut others, &name, &case, &ours);
        let mut want = Want::steps(&case["steps"]);
        // The fixture holds all of layer 0: only the steps `list` records are compared (not
        // embed.token, rope.*, the scores or the mask), and final_norm.out, whose entry holds
        // only some rows, is checked by hidden_rows.
        want.retain(|w| ours.contains_key(&w.id) && w.id != "final_norm.out");
        others.compare(&name, &want, &ours);
        for (pos, want) in case["top_k"].as_array().unwrap().iter().enumerate() {
            assert_eq!(doc["predictions"][pos]["top"][0]["id"], want[0]["id"], "{name}: top-1 at {pos}");
        }
    }
    assert!(cases >= 4, "only {cases} SmolLM2 fixtures");
    weights.finish("SmolLM2 attention weights");
    others.finish("SmolLM2 hidden states and layer 0");
}

/// The fixture's `hidden_states` hold some positions' rows: [0] is the embeddings, [l] the
/// output of layer l − 1, and the last is after the final norm (transformers applies it to
/// the last entry).
fn hidden_rows(oracle: &mut Oracle, name: &str, case: &serde_json::Value, ours: &Steps) {
    let n = case["input_ids"].as_array().unwrap().len();
    let last = case["hidden_states"].as_array().unwrap().len() - 1;
    for h in case["hidden_states"].as_array().unwrap() {
        let id = match h["layer"].as_u64().unwrap() as usize {
            0 => "embed.out".to_string(),
            l if l == last => "final_norm.out".to_string(),
            l => format!("layers.{}.add_norm2.sum", l - 1),
        };
        let (_, vals) = &ours[&id];
        let d = vals.len() / n;
        for (row, pos) in h["positions"].as_array().unwrap().iter().enumerate() {
            let p = pos.as_u64().unwrap() as usize;
            let want = flat(&h["values"][row]);
            // Position 0 carries SmolLM2's massive activations (rows up to 2.4e4 from layer
            // 12 on); f32 sums in another order differ relative to the row's scale, so the
            // tolerance grows with it: 1e-4 + 4e-6 · max|row| (32 f32 epsilons).
            let scale = want.iter().fold(0f64, |m, v| m.max(v.abs()));
            let what = format!("{name}: {id} position {p} (row scale {scale})");
            oracle.values(&what, &[d], &vals[p * d..(p + 1) * d], &want, (1e-4 + 4e-6 * scale, 1e-4), |_| true);
        }
    }
}

/// candle's dequantization of SmolLM2's tensor types (Q8_0, Q4_1, F32) against the gguf
/// package's, value for value (before the Q/K permutation is undone).
#[test]
fn smollm2_dequantizes_as_the_gguf_package() {
    let model = smollm2();
    let fixture: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("fixtures/oracle/gguf/dequant.json")).unwrap())
            .unwrap();
    let g = attn_trace::sources::gguf::Gguf::open(std::path::Path::new(&model), "test").unwrap();
    let mut types = std::collections::BTreeSet::new();
    for t in fixture["tensors"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        let shape: Vec<usize> =
            t["numpy_shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
        let ours = g.get(name, &shape).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let first = flat(&t["first"]);
        let last = flat(&t["last"]);
        // The fixture holds each f32 as its shortest decimal: compare as f32, bit for bit.
        for (i, y) in first.iter().enumerate() {
            assert_eq!(ours[i].to_bits(), (*y as f32).to_bits(), "{name}[{i}]: {} vs {y}", ours[i]);
        }
        let off = ours.len() - last.len();
        for (i, y) in last.iter().enumerate() {
            assert_eq!(ours[off + i].to_bits(), (*y as f32).to_bits(), "{name}[{}]", off + i);
        }
        types.insert(t["type"].as_str().unwrap().to_string());
    }
    assert!(types.contains("Q4_1") && types.contains("Q8_0") && types.contains("F32"), "{types:?}");
}

/// A SentencePiece tokenizer from GGUF metadata (`tokenizer.ggml.model` "llama") against
/// transformers' GGUF converter on the same file (fixtures/oracle/gguf/spm.json, made by
/// fixtures/oracle/spm_oracle.py from fixtures/gguf/tiny-llama-spm.gguf): token strings and ids
/// with the BOS and without it, for sentences with repeated spaces, digits, tabs, characters the
/// vocabulary lacks (byte fallback) and a special token in the text; and the model's logits at
/// the last position, so the ids reach the model as transformers feeds them.
#[test]
fn a_sentencepiece_gguf_tokenizes_as_transformers() {
    let oracle: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("fixtures/oracle/gguf/spm.json")).unwrap()).unwrap();
    let model = tiny("tiny-llama-spm.gguf");
    for case in oracle["cases"].as_array().unwrap() {
        let s = case["sentence"].as_str().unwrap();
        let doc = trace_json(&[s, "--model", &model, "--steps", "tokens"]);
        assert_eq!(doc["input"]["tokens"], case["tokens"], "tokens of {s:?}");
        assert_eq!(doc["input"]["token_ids"], case["ids"], "ids of {s:?}");
        let doc = trace_json(&[s, "--model", &model, "--steps", "tokens", "--no-special-tokens"]);
        assert_eq!(doc["input"]["token_ids"], case["ids_without_special_tokens"], "ids of {s:?} without BOS");
    }
    let l = &oracle["logits"];
    let doc = trace_json(&[l["sentence"].as_str().unwrap(), "--model", &model, "--steps", "logits", "--top-k", "0"]);
    assert_eq!(doc["input"]["token_ids"], l["ids"]);
    let (dims, got) = steps(&doc)["logits"].clone();
    let want: Vec<f64> = l["last_position"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    let last = &got[got.len() - dims[1]..];
    let mut logits = Oracle::new("transformers", (1e-4, 1e-4));
    logits.values("spm.json: logits at the last position", &[dims[1]], last, &want, (1e-4, 1e-4), |_| true);
    logits.finish("SentencePiece GGUF logits");
}
