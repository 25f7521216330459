//! Gemma beyond the family fixtures (tests/it/families.rs) and the real Gemma 3
//! (tests/it/gemma3.rs): the tiny Gemma 2 as llama.cpp's converter writes it
//! (fixtures/gguf/make_gemma.py: renamed tensors, every norm weight + 1, the soft-caps and
//! window in the metadata) traces as its checkpoint does at llama.cpp's scale, and what a Gemma
//! config or GGUF file lacks or gets wrong is refused in one line that names the key and the
//! model (exit 2, nothing on stdout).

use crate::common::*;
use candle_core::quantized::gguf_file::{self, Value as Meta};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::Device;
use serde_json::Value;

/// llama.cpp reads a Gemma 2 file's scale as head_dim^-½ (its `f_attention_scale`), not the
/// checkpoint's query_pre_attn_scalar^-½: with `--scale` set to that, the checkpoint's trace
/// is the file's, step for step and bit for bit (names, the + 1 of every norm, no Q/K
/// permutation, the soft-caps and the window read from the metadata).
#[test]
fn the_tiny_gemma2_gguf_traces_as_its_checkpoint_at_llama_cpps_scale() {
    let gguf = root().join("fixtures/gguf/tiny-gemma2-f32.gguf");
    let folder = root().join("fixtures/decoders/gemma2");
    let sentence = "my shoes are small, my feet are big.";
    let file = trace_json(&[sentence, "--model", gguf.to_str().unwrap(), "--steps", "all"]);
    let checkpoint = trace_json(&[sentence, "--model", folder.to_str().unwrap(), "--steps", "all", "--scale", "0.25"]);
    assert_eq!(file["config"]["scale"], 0.25);
    assert_eq!(file["steps"], checkpoint["steps"]);
    // The predictions' ids and probabilities (the GGUF names the vocabulary's padding rows).
    let top = |d: &Value| -> Vec<(Value, Value)> {
        let rows = d["predictions"].as_array().unwrap().iter().flat_map(|p| p["top"].as_array().unwrap().clone());
        rows.map(|t| (t["id"].clone(), t["prob"].clone())).collect()
    };
    assert_eq!(top(&file), top(&checkpoint));
    let c = &file["config"];
    assert_eq!(
        (c["attn_softcap"].as_f64(), c["final_softcap"].as_f64(), c["window"].as_u64()),
        (Some(4.0), Some(6.0), Some(4))
    );
    assert_eq!(c["local_layers"], serde_json::json!([true, false]));
    // Without --scale the checkpoint's own scale: 24^-½.
    let own = trace_json(&[sentence, "--model", folder.to_str().unwrap(), "--steps", "output"]);
    assert_eq!(own["config"]["scale"], 24f64.powf(-0.5));
}

/// [`refused`]'s one line for `model`, which holds no panic.
fn refusal(model: &str) -> String {
    let err = refused(&["my shoes", "--model", model], "");
    assert!(!err.contains("panicked"), "{err}");
    err
}

/// A change to a config.json.
type Edit = dyn Fn(&mut Value);

/// A copy of a fixture checkpoint with its config.json edited.
fn edited(dir: &std::path::Path, from: &str, edit: &Edit) -> String {
    let folder = dir.join(format!("{from}-edited"));
    std::fs::create_dir_all(&folder).unwrap();
    for e in std::fs::read_dir(root().join("fixtures/decoders").join(from)).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, folder.join(p.file_name().unwrap())).unwrap();
    }
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(folder.join("config.json")).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(folder.join("config.json"), v.to_string()).unwrap();
    folder.to_str().unwrap().to_string()
}

#[test]
fn a_gemma_config_that_lacks_or_misstates_a_key_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &Edit, &str); 7] = [
        (
            "gemma2",
            &|v| drop(v.as_object_mut().unwrap().remove("query_pre_attn_scalar")),
            "config.json has no query_pre_attn_scalar, which gemma2 needs",
        ),
        (
            "gemma2",
            &|v| drop(v.as_object_mut().unwrap().remove("final_logit_softcapping")),
            "config.json has no final_logit_softcapping",
        ),
        (
            "gemma3",
            &|v| drop(v.as_object_mut().unwrap().remove("sliding_window_pattern")),
            "config.json has no sliding_window_pattern (or layer_types)",
        ),
        (
            "gemma3",
            &|v| v["rope_scaling"] = serde_json::json!({"rope_type": "weird", "factor": 2.0}),
            "rope_scaling type \"weird\" is not supported",
        ),
        (
            "gemma3",
            &|v| v["layer_types"] = serde_json::json!(["sliding_attention"]),
            "layer_types lists 1 layers, not 3",
        ),
        ("gemma3", &|v| v["attn_logit_softcapping"] = 50.0.into(), "attn_logit_softcapping is set"),
        (
            "gemma2",
            &|v| v["attn_logit_softcapping"] = "four".into(),
            "attn_logit_softcapping is the string \"four\"; expected a number",
        ),
    ];
    for (i, (from, edit, want)) in cases.into_iter().enumerate() {
        let model = edited(&dir.path().join(i.to_string()), from, edit);
        let err = refusal(&model);
        assert!(err.contains(want) && err.contains(&model), "{from}: {err}");
    }
    // Gemma 3's image-and-text checkpoint (model_type gemma3, the text model under
    // text_config) is refused as an architecture, naming the text model's.
    let model = edited(dir.path(), "gemma3", &|v| v["model_type"] = "gemma3".into());
    let err = refusal(&model);
    assert!(
        err.contains("architecture \"gemma3\" (config.json's model_type) is not supported")
            && err.contains("gemma3_text"),
        "{err}"
    );
}

/// The tiny Gemma 2 GGUF with `edit` applied to its metadata, written to `dir`.
fn gguf_edited(dir: &std::path::Path, edit: &dyn Fn(&mut std::collections::HashMap<String, Meta>)) -> String {
    let mut f = std::fs::File::open(root().join("fixtures/gguf/tiny-gemma2-f32.gguf")).unwrap();
    let mut content = gguf_file::Content::read(&mut f).unwrap();
    let mut names: Vec<String> = content.tensor_infos.keys().cloned().collect();
    names.sort();
    let tensors: Vec<(String, QTensor)> = names
        .into_iter()
        .map(|n| {
            let q = content.tensor_infos[&n].read(&mut f, content.tensor_data_offset, &Device::Cpu).unwrap();
            let t = QTensor::quantize(&q.dequantize(&Device::Cpu).unwrap(), GgmlDType::F32).unwrap();
            (n, t)
        })
        .collect();
    edit(&mut content.metadata);
    let mut keys: Vec<&String> = content.metadata.keys().collect();
    keys.sort();
    let metadata: Vec<(&str, &Meta)> = keys.iter().map(|k| (k.as_str(), &content.metadata[*k])).collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let path = dir.join("edited.gguf");
    gguf_file::write(&mut std::fs::File::create(&path).unwrap(), &metadata, &tensors).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn gguf_metadata_without_a_gemma_key_is_refused_by_name() {
    for key in ["gemma2.attention.sliding_window", "gemma2.attn_logit_softcapping", "gemma2.attention.key_length"] {
        let dir = tempfile::tempdir().unwrap();
        let model = gguf_edited(dir.path(), &|m| drop(m.remove(key)));
        let err = refusal(&model);
        assert!(err.contains(&format!("the GGUF metadata has no {key}")) && err.contains(&model), "{err}");
    }
    let dir = tempfile::tempdir().unwrap();
    let model =
        gguf_edited(dir.path(), &|m| drop(m.insert("gemma2.final_logit_softcapping".into(), Meta::String("6".into()))));
    let err = refusal(&model);
    assert!(err.contains("gemma2.final_logit_softcapping holds a string; expected an f32"), "{err}");
}
