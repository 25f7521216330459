//! Hostile input for GPT-NeoX and Phi-3 (issue 30): a config without a key the family needs,
//! a `rope_scaling` type the family does not define, LongRoPE factors of the wrong length, a
//! rotary width that cannot turn in pairs, and GGUF files whose metadata or LongRoPE tensors
//! do not fit: each one line naming the key (or tensor) and the model, exit 2, nothing on
//! stdout.

use crate::common::root;
use crate::hostile_files::{folder, refused_line, trace};
use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use serde_json::json;
use std::path::{Path, PathBuf};

/// A usage error naming `fragment` and the model, in one line, stdout empty.
fn refused_naming(model: &Path, fragment: &str) {
    let out = trace(model);
    refused_line(&out, fragment);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("--model {}", model.display())), "the model is not named: {err}");
}

#[test]
fn gpt_neox_and_phi3_configs_are_refused_by_key() {
    let dir = tempfile::tempdir().unwrap();
    let d = |tag: &str| dir.path().join(tag);
    type Edit = Box<dyn Fn(&mut serde_json::Value)>;
    let cases: Vec<(&str, &str, Edit, &str)> = vec![
        (
            "neox-no-ff",
            "decoders/gpt_neox",
            Box::new(|v| drop(v.as_object_mut().unwrap().remove("intermediate_size"))),
            "config.json has no intermediate_size",
        ),
        (
            "neox-odd",
            "decoders/gpt_neox",
            Box::new(|v| v["rotary_pct"] = json!(0.3125)),
            "config.json: rotary_pct turns 5 of the 16 dimensions of each head",
        ),
        (
            "neox-pct",
            "decoders/gpt_neox",
            Box::new(|v| v["rotary_pct"] = json!(1.5)),
            "config.json: rotary_pct is 1.5; expected a fraction above 0, at most 1",
        ),
        (
            "neox-dynamic",
            "decoders/gpt_neox",
            Box::new(|v| v["rope_scaling"] = json!({"type": "dynamic", "factor": 2.0})),
            "rope_scaling type \"dynamic\" is not supported",
        ),
        (
            "phi3-dynamic",
            "decoders/phi3-longrope",
            Box::new(|v| v["rope_scaling"]["type"] = json!("dynamic")),
            "config.json: rope_scaling type \"dynamic\" is not defined for phi3",
        ),
        (
            "phi3-no-long",
            "decoders/phi3-longrope",
            Box::new(|v| drop(v["rope_scaling"].as_object_mut().unwrap().remove("long_factor"))),
            "config.json: rope_scaling.long_factor is missing; expected a list of 8 numbers",
        ),
        (
            "phi3-short-3",
            "decoders/phi3-longrope",
            Box::new(|v| v["rope_scaling"]["short_factor"] = json!([1.0, 1.0, 1.0])),
            "config.json: rope_scaling.short_factor has 3 entries; expected 8",
        ),
        (
            // 8 factors are one per pair of the whole head; partial_rotary_factor 0.5 turns 8 dims.
            "phi3-partial-8",
            "decoders/phi3-partial",
            Box::new(|v| v["rope_scaling"]["long_factor"] = json!(vec![1.0; 8])),
            "config.json: rope_scaling.long_factor has 8 entries; expected 4",
        ),
        (
            "phi3-zero",
            "decoders/phi3-longrope",
            Box::new(|v| v["rope_scaling"]["long_factor"][2] = json!(0.0)),
            "config.json: rope_scaling.long_factor holds",
        ),
        (
            "phi3-original",
            "decoders/phi3-longrope",
            Box::new(|v| v["original_max_position_embeddings"] = json!(0)),
            "config.json: original_max_position_embeddings is 0",
        ),
    ];
    for (tag, fixture, edit, fragment) in cases {
        let model = folder(&d(tag), fixture, edit);
        refused_naming(&model, fragment);
    }
}

/// The GGUF `src` of fixtures/gguf written again in `dir`, with the metadata `set` and each
/// tensor as `tensor(name, values)` gives it (`None` leaves it out).
fn edited_gguf(
    dir: &Path,
    src: &str,
    set: &[(&str, gguf_file::Value)],
    tensor: &dyn Fn(&str, Tensor) -> Option<Tensor>,
) -> PathBuf {
    let mut f = std::fs::File::open(root().join("fixtures/gguf").join(src)).unwrap();
    let mut content = gguf_file::Content::read(&mut f).unwrap();
    let mut names: Vec<String> = content.tensor_infos.keys().cloned().collect();
    names.sort();
    let tensors: Vec<(String, QTensor)> = names
        .into_iter()
        .filter_map(|name| {
            let q = content.tensor_infos[&name].read(&mut f, content.tensor_data_offset, &Device::Cpu).unwrap();
            let t = tensor(&name, q.dequantize(&Device::Cpu).unwrap())?;
            Some((name, QTensor::quantize(&t, GgmlDType::F32).unwrap()))
        })
        .collect();
    for (k, v) in set {
        content.metadata.insert(k.to_string(), v.clone());
    }
    let mut keys: Vec<&String> = content.metadata.keys().collect();
    keys.sort();
    let metadata: Vec<(&str, &gguf_file::Value)> = keys.iter().map(|k| (k.as_str(), &content.metadata[*k])).collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let path = dir.join(src);
    gguf_file::write(&mut std::fs::File::create(&path).unwrap(), &metadata, &tensors).unwrap();
    path
}

#[test]
fn gptneox_and_phi3_ggufs_are_refused_by_key() {
    use gguf_file::Value as V;
    let dir = tempfile::tempdir().unwrap();
    let d = |tag: &str| {
        let p = dir.path().join(tag);
        std::fs::create_dir_all(&p).unwrap();
        p
    };
    let keep = |_: &str, t: Tensor| Some(t);
    let odd = edited_gguf(&d("odd"), "tiny-gptneox-f32.gguf", &[("gptneox.rope.dimension_count", V::U32(5))], &keep);
    refused_naming(
        &odd,
        "GGUF metadata gptneox.rope.dimension_count is 5; expected an even rotary width from 2 to the heads' 16",
    );
    let flag = [("gptneox.use_parallel_residual", V::String("yes".into()))];
    let flag = edited_gguf(&d("flag"), "tiny-gptneox-f32.gguf", &flag, &keep);
    refused_naming(&flag, "GGUF metadata gptneox.use_parallel_residual holds a string; expected a bool");
    let no_short = |name: &str, t: Tensor| (name != "rope_factors_short.weight").then_some(t);
    let half = edited_gguf(&d("half"), "tiny-phi3-f32.gguf", &[], &no_short);
    refused_naming(&half, "the GGUF has rope_factors_long.weight but not rope_factors_short.weight");
    let short_long = |name: &str, t: Tensor| {
        Some(if name == "rope_factors_long.weight" {
            Tensor::new(&t.to_vec1::<f32>().unwrap()[..3], &Device::Cpu).unwrap()
        } else {
            t
        })
    };
    let three = edited_gguf(&d("three"), "tiny-phi3-f32.gguf", &[], &short_long);
    refused_naming(
        &three,
        "GGUF tensor rope_factors_long.weight has shape [3]; expected [4], one factor per rotary pair",
    );
    // A family that turns every dimension still refuses a partial width.
    let llama = edited_gguf(&d("llama"), "tiny-llama-f32.gguf", &[("llama.rope.dimension_count", V::U32(4))], &keep);
    refused_naming(&llama, "GGUF metadata llama.rope.dimension_count is 4 but the heads are 8 wide");
}
