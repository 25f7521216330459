//! A real Gemma 3: google/gemma-3-270m as a Q4_K_M GGUF (tests/fetch-gemma3.sh fetches it into
//! .cache/; Gemma terms of use, never committed), against transformers 4.51.0's
//! Gemma3ForCausalLM built from the same file's tensors as llama.cpp reads them
//! (fixtures/oracle/gemma3, made by fixtures/oracle/gemma3_gguf_oracle.py; token ids from
//! llama.cpp). Four prompts, one of them (578 tokens) longer than the 512-token window of the
//! local layers: ids equal; attention weights within 1e-4 (all layers for the short prompts,
//! layers 0, 5 and 17 at four queries for the long one, where the window cuts the local
//! layers' rows and not the global layer's); hidden-state rows of every recorded layer;
//! layer 0 step by step for one prompt; the top-1 token at every position.

use crate::common::*;
use serde_json::Value;

/// The fetched model; these tests fail, not skip, when it is missing.
pub fn gemma3() -> String {
    let p = root().join(".cache/models/gemma3/gemma-3-270m-q4_k_m.gguf");
    assert!(
        p.is_file(),
        "the test model is missing at {}: run tests/fetch-gemma3.sh (tests/run.sh does it)",
        p.display()
    );
    p.to_str().unwrap().to_string()
}

fn fixture(name: &str) -> Value {
    let text = std::fs::read_to_string(root().join("fixtures/oracle/gemma3").join(name)).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// What each case records: every layer's weights and hidden states for the short prompts
/// (and layer 0's steps where the fixture has them); for the long one only the attention of
/// the fixture's layers and the final norm, so the debug build's JSON stays small.
fn steps_for(case: &Value) -> String {
    let layers: Vec<u64> = case["attention_layers"].as_array().unwrap().iter().map(|l| l.as_u64().unwrap()).collect();
    if layers.len() < 18 {
        let mut list: Vec<String> = layers.iter().map(|l| format!("layers.{l}.attn.weights")).collect();
        list.push("final_norm.out".into());
        return list.join(",");
    }
    let mut list = vec!["weights".to_string(), "add_norm2.sum".into(), "final_norm.out".into(), "embed.out".into()];
    list.extend(case["steps"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap().to_string()));
    list.join(",")
}

#[test]
fn gemma3_270m_matches_transformers() {
    let model = gemma3();
    let mut weights = Oracle::new("transformers", (1e-4, 0.0));
    // Layer 0's steps: 1e-4 plus 1e-4 relative, as every family fixture.
    let mut steps_oracle = Oracle::new("transformers", (1e-4, 1e-4));
    let mut hidden = Oracle::new("transformers", (1e-4, 1e-4));
    for name in ["capital", "shoes", "spaces", "long"] {
        let case = fixture(&format!("gemma3_{name}.json"));
        let n = case["input_ids"].as_array().unwrap().len();
        let top_k = if name == "long" { "2" } else { "5" };
        let doc = trace_json(&[
            case["sentence"].as_str().unwrap(),
            "--model",
            &model,
            "--steps",
            &steps_for(&case),
            "--top-k",
            top_k,
        ]);
        assert_eq!(doc["input"]["token_ids"], case["input_ids"], "{name}: ids");
        let ours = steps(&doc);
        for a in case["attentions"].as_array().unwrap() {
            let id = format!("layers.{}.attn.weights", a["layer"]);
            let (shape, vals) = &ours[&id];
            let queries: Vec<usize> =
                a["queries"].as_array().unwrap().iter().map(|q| q.as_u64().unwrap() as usize).collect();
            // The fixture's rows: [head][query in `queries`][key].
            let got: Vec<f64> = (0..shape[0])
                .flat_map(|h| queries.iter().flat_map(move |&q| (0..n).map(move |k| (h * n + q) * n + k)))
                .map(|i| vals[i])
                .collect();
            weights.values(
                &format!("{name}: {id}"),
                &[shape[0], queries.len(), n],
                &got,
                &flat(&a["values"]),
                (1e-4, 0.0),
                |_| true,
            );
        }
        hidden_rows(&mut hidden, name, &case, &ours, n);
        steps_oracle.compare(name, &Want::steps(&case["steps"]), &ours);
        top1(name, &case, &doc);
    }
    weights.finish("Gemma 3 270M attention weights");
    hidden.finish("Gemma 3 270M hidden states");
    steps_oracle.finish("Gemma 3 270M layer 0");
}

/// The fixture's hidden-state rows where the trace recorded them: [0] is `embed.out`, [l] the
/// output of layer l − 1, the last one after the final norm. Rows grow to a few hundred (the
/// embeddings are scaled by √640), so the tolerance grows with the row's largest value, as
/// SmolLM2's: 1e-4 + 4e-6 · max|row| on top of 1e-4 relative.
fn hidden_rows(oracle: &mut Oracle, name: &str, case: &Value, ours: &Steps, n: usize) {
    let last = case["hidden_states"].as_array().unwrap().len() - 1;
    for h in case["hidden_states"].as_array().unwrap() {
        let id = match h["layer"].as_u64().unwrap() as usize {
            0 => "embed.out".to_string(),
            l if l == last => "final_norm.out".to_string(),
            l => format!("layers.{}.add_norm2.sum", l - 1),
        };
        let Some((_, vals)) = ours.get(&id) else { continue };
        let d = vals.len() / n;
        for (row, pos) in h["positions"].as_array().unwrap().iter().enumerate() {
            let p = pos.as_u64().unwrap() as usize;
            let want = flat(&h["values"][row]);
            let scale = want.iter().fold(0f64, |m, v| m.max(v.abs()));
            let what = format!("{name}: {id} position {p}");
            oracle.values(&what, &[d], &vals[p * d..(p + 1) * d], &want, (1e-4 + 4e-6 * scale, 1e-4), |_| true);
        }
    }
}

/// The most probable next token at every position is transformers'; a position whose two
/// best tokens transformers itself cannot tell apart in f32 (within 1e-6) accepts either.
fn top1(name: &str, case: &Value, doc: &Value) {
    for (pos, want) in case["top_k"].as_array().unwrap().iter().enumerate() {
        let got = &doc["predictions"][pos]["top"][0]["id"];
        let tie = (want[0]["prob"].as_f64().unwrap() - want[1]["prob"].as_f64().unwrap()).abs() < 1e-6;
        assert!(
            got == &want[0]["id"] || (tie && got == &want[1]["id"]),
            "{name}: top-1 at {pos}: {got} vs {}",
            want[0]
        );
    }
}

/// candle's dequantization of Gemma's tensor types (Q5_0, Q4_K, Q6_K, Q8_0, F32) against the
/// gguf package's, bit for bit.
#[test]
fn gemma3_dequantizes_as_the_gguf_package() {
    let model = gemma3();
    let g = attn_trace::sources::gguf::Gguf::open(std::path::Path::new(&model), "test").unwrap();
    for t in fixture("dequant.json")["tensors"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        let shape: Vec<usize> =
            t["numpy_shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
        let ours = g.get(name, &shape).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let (first, last) = (flat(&t["first"]), flat(&t["last"]));
        for (i, y) in first.iter().enumerate() {
            assert_eq!(ours[i].to_bits(), (*y as f32).to_bits(), "{name}[{i}]: {} vs {y}", ours[i]);
        }
        let off = ours.len() - last.len();
        for (i, y) in last.iter().enumerate() {
            assert_eq!(ours[off + i].to_bits(), (*y as f32).to_bits(), "{name}[{}]", off + i);
        }
    }
}
