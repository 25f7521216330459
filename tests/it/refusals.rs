//! The same refusal for the same problem, whichever file states it: an architecture that
//! attn-trace does not map, named by a GGUF file's metadata or by a folder's config.json.
//! And a long model path in the table header wraps between folders, never mid-name.

use crate::common::*;
use crate::determinism::rewrite_gguf;
use candle_core::quantized::gguf_file::Value;
use candle_core::quantized::GgmlDType;

#[test]
fn an_unsupported_architecture_is_refused_alike_from_gguf_and_folder() {
    let dir = tempfile::tempdir().unwrap();
    let arch = [("general.architecture", Value::String("falcon".into()))];
    let gguf = rewrite_gguf(dir.path(), "falcon.gguf", &|_| GgmlDType::F32, &arch);
    let folder = dir.path().join("falcon");
    std::fs::create_dir(&folder).unwrap();
    for e in std::fs::read_dir(root().join("fixtures/decoders/llama-gqa")).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, folder.join(p.file_name().unwrap())).unwrap();
    }
    let cfg = std::fs::read_to_string(folder.join("config.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&cfg).unwrap();
    v["model_type"] = "falcon".into();
    std::fs::write(folder.join("config.json"), v.to_string()).unwrap();
    let folder = folder.to_str().unwrap();
    let a = refused(&["my shoes", "--model", &gguf], "");
    let b = refused(&["my shoes", "--model", folder], "");
    let form = |model: &str, whence: &str, list: &str| {
        format!(
            "attn-trace: --model {model}: architecture \"falcon\" ({whence}) is not supported (use a model of a \
             supported architecture: {list})\n"
        )
    };
    assert_eq!(
        a,
        form(&gguf, "the GGUF's general.architecture", "llama, qwen2, gemma2, gemma3, gptneox, phi3, qwen2moe")
    );
    let list =
        "bert, gpt2, llama, qwen2, mistral, qwen3, gemma2, gemma3_text, gpt_neox, phi3, mixtral, qwen2_moe, qwen3_moe, t5, bart";
    assert_eq!(b, form(folder, "config.json's model_type", list));
}

#[test]
fn a_long_model_path_wraps_between_folders() {
    let dir = tempfile::tempdir().unwrap();
    let deep = dir.path().join("a-folder-with-a-long-name").join("another-long-folder-name-here");
    std::fs::create_dir_all(&deep).unwrap();
    let model = deep.join("tiny-llama-quantized-as-q4_1-and-q8_0.gguf");
    std::fs::copy(root().join("fixtures/gguf/tiny-llama.gguf"), &model).unwrap();
    let model = model.to_str().unwrap();
    for width in [50, 60, 80] {
        let w = width.to_string();
        let out = cmd().args(["my shoes", "--model", model, "--steps", "tokens", "--width", &w]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        let header: Vec<&str> = text.lines().take_while(|l| !l.is_empty()).collect();
        assert!(header.iter().all(|l| l.chars().count() <= width), "{header:#?}");
        // Every folder and the file name are whole on one line.
        for name in model.split('/').filter(|n| !n.is_empty()) {
            assert!(header.iter().any(|l| l.contains(name)), "{name} is broken at width {width}: {header:#?}");
        }
    }
}
