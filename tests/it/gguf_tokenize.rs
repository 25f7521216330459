//! GGUF byte-level BPE tokenizers against llama.cpp itself (fixtures/gguf/tokenize, made by
//! fixtures/oracle/gguf_tokenize_oracle.py with llama-cpp-python, vocabulary-only loading):
//! SmolLM2's real file (`tokenizer.ggml.pre` "smollm") through the command, and every
//! `tokenizer.ggml.pre` name attn-trace supports through the tokenizer builder, on that file's
//! metadata with the key rewritten (or removed: llama.cpp's `default`) and the vocabulary the
//! oracle used (SmolLM2's, its last merges replaced by merges across word boundaries, so that
//! a wrong split shows as other ids).

use crate::common::*;
use crate::gguf::smollm2;
use attn_trace::params::Input;
use attn_trace::sources::gguf_tokenizer;
use attn_trace::{cli::Cli, cli::Env, settings::Settings};
use candle_core::quantized::gguf_file::{Content, Value};
use clap::Parser;
use serde_json::Value as Json;
use std::collections::HashMap;

fn fixture(name: &str) -> Json {
    let p = root().join("fixtures/gguf/tokenize").join(name);
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

fn ids(v: &Json) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

/// The real file: the hand-picked texts' ids through `sources::open` (as the command
/// tokenizes; no BOS: llama.cpp's were taken with `add_bos=False`), the random ones' through
/// the tokenizer it built, are llama.cpp's; and the binary shows them for the line of
/// code (a trace per text would only repeat the forward pass).
#[test]
fn smollm2_tokenizes_as_llama_cpp() {
    let model = smollm2();
    let doc = fixture("smollm2.json");
    assert_eq!(doc["pre"], "smollm");
    let cases = doc["cases"].as_array().unwrap();
    let hand = doc["hand_picked"].as_u64().unwrap() as usize;
    let mut tokenizer = None;
    for case in &cases[..hand] {
        let text = case["text"].as_str().unwrap();
        let args = ["attn-trace", text, "--model", &model, "--no-special-tokens"];
        let settings = Settings::from_cli(Cli::try_parse_from(args).unwrap(), &Env::default()).unwrap();
        let (loaded, _) = attn_trace::sources::open(&settings).unwrap();
        let Input::Ids { ids: got, .. } = &loaded.input else { panic!("no ids for {text:?}") };
        assert_eq!(got, &ids(&case["ids"]), "{text:?}");
        tokenizer = loaded.tokenizer;
    }
    let tok = tokenizer.unwrap();
    for case in &cases[hand..] {
        let text = case["text"].as_str().unwrap();
        assert_eq!(tok.encode(text, false).unwrap().get_ids(), &ids(&case["ids"])[..], "{text:?}");
    }
    let case = cases.iter().find(|c| c["text"].as_str().unwrap().starts_with("print(x)")).unwrap();
    let text = case["text"].as_str().unwrap();
    let out = trace_json(&[text, "--model", &model, "--steps", "tokens", "--no-special-tokens"]);
    assert_eq!(ids(&out["input"]["token_ids"]), ids(&case["ids"]), "{text:?}");
}

/// Every supported name, and the metadata without the key: each text's ids are llama.cpp's.
/// The names are the ones the refusal of an unknown name lists, so a name added to the table
/// without an oracle fails here.
#[test]
fn every_pre_tokenizer_splits_as_llama_cpp() {
    let doc = fixture("pretok.json");
    let texts: Vec<&str> = doc["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    let extra: Vec<&str> = doc["extra_merges"].as_array().unwrap().iter().map(|m| m.as_str().unwrap()).collect();
    let mut meta = oracle_vocabulary(&extra);
    let mut checked = Vec::new();
    for group in doc["groups"].as_array().unwrap() {
        for name in group["names"].as_array().unwrap() {
            let name = name.as_str().unwrap();
            meta.insert("tokenizer.ggml.pre".into(), Value::String(name.into()));
            assert_ids(&meta, &texts, &group["ids"], name);
            checked.push(name.to_string());
        }
    }
    meta.remove("tokenizer.ggml.pre");
    assert_ids(&meta, &texts, &doc["absent"], "(absent)");
    meta.insert("tokenizer.ggml.pre".into(), Value::String("no-such-pre-tokenizer".into()));
    let err = gguf_tokenizer::build(&meta, "--model m.gguf").err().unwrap();
    assert_eq!(attn_trace::error::exit_code(&err), 2, "a usage error");
    let err = format!("{err:#}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("--model m.gguf: tokenizer.ggml.pre \"no-such-pre-tokenizer\" is not supported"), "{err}");
    let listed = err.split("supported: ").nth(1).unwrap().split(" (").next().unwrap();
    let mut listed: Vec<&str> = listed.split(", ").collect();
    listed.sort();
    checked.sort();
    assert_eq!(listed, checked, "the supported names against the oracle's");
    meta.insert("tokenizer.ggml.pre".into(), Value::U32(3));
    let err = format!("{:#}", gguf_tokenizer::build(&meta, "--model m.gguf").err().unwrap());
    assert!(err.contains("tokenizer.ggml.pre is not a string"), "{err}");
}

fn assert_ids(meta: &HashMap<String, Value>, texts: &[&str], want: &Json, name: &str) {
    let (tok, bos) = gguf_tokenizer::build(meta, name).unwrap_or_else(|e| panic!("{name}: {e:#}"));
    assert!(!bos, "SmolLM2's file asks for no BOS");
    for (text, want) in texts.iter().zip(want.as_array().unwrap()) {
        let got = tok.encode(*text, false).unwrap().get_ids().to_vec();
        assert_eq!(got, ids(want), "{name}: {text:?}");
    }
}

/// SmolLM2's metadata with the oracle's vocabulary: its last `extra.len()` merges, and the
/// tokens they make (the last tokens, in the same order), replaced by `extra` and theirs.
fn oracle_vocabulary(extra: &[&str]) -> HashMap<String, Value> {
    let mut f = std::fs::File::open(smollm2()).unwrap();
    let mut meta = Content::read(&mut f).unwrap().metadata;
    let strings =
        |v: &Value| -> Vec<String> { v.to_vec().unwrap().iter().map(|s| s.to_string().unwrap().clone()).collect() };
    let mut tokens = strings(&meta["tokenizer.ggml.tokens"]);
    let mut merges = strings(&meta["tokenizer.ggml.merges"]);
    let (n, m, k) = (tokens.len(), merges.len(), extra.len());
    let joined: Vec<String> = merges[m - k..].iter().map(|x| x.replace(' ', "")).collect();
    assert_eq!(tokens[n - k..], joined[..], "the last merges make the last tokens");
    tokens.truncate(n - k);
    tokens.extend(extra.iter().map(|x| x.replace(' ', "")));
    merges.truncate(m - k);
    merges.extend(extra.iter().map(|x| x.to_string()));
    let array = |v: Vec<String>| Value::Array(v.into_iter().map(Value::String).collect());
    meta.insert("tokenizer.ggml.tokens".into(), array(tokens));
    meta.insert("tokenizer.ggml.merges".into(), array(merges));
    meta
}
