//! Issue 47, item 8: ranked views. Patching and `--stats` tables end with their cells ranked
//! (as `--attribute`'s do), the patching header names its metric by the answers' labels, and
//! `--lens-track` follows chosen tokens through the layers with their exact rank.

use crate::common::*;
use serde_json::Value;

fn run(args: &[&str]) -> String {
    let out = cmd().current_dir(root()).args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn json(args: &[&str]) -> Value {
    serde_json::from_str(&run(&[args, &["--format", "json"]].concat())).unwrap()
}

/// The table rows after `title`: each row's cells, split on the column rule.
fn ranked_rows(text: &str, title: &str) -> Vec<Vec<String>> {
    let after = &text[text.find(title).unwrap_or_else(|| panic!("no {title:?} in {text}"))..];
    after
        .lines()
        .skip(4)
        .take_while(|l| l.contains('┆'))
        .map(|l| l.split('┆').map(|c| c.trim().to_string()).collect())
        .collect()
}

const GPT2: [&str; 8] = [
    "my shoes are small, my feet are",
    "--model",
    "fixtures/decoders/gpt2",
    "--patch",
    "my shoes are big, my feet are",
    "--metric",
    " big",
    " small",
];

#[test]
fn patching_names_its_metric_by_text_and_ranks_its_cells() {
    let text = run(&[&GPT2[..], &["--steps", "none", "--width", "200"]].concat());
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains("metric logit[·big] − logit[·small] at position 7 (·are):"), "{text}");
    let doc = json(&GPT2);
    let mut want: Vec<(u64, u64, f64)> = doc["patching"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["effect"].is_f64())
        .map(|r| (r["layer"].as_u64().unwrap(), r["head"].as_u64().unwrap(), r["effect"].as_f64().unwrap()))
        .collect();
    want.sort_by(|x, y| y.2.abs().total_cmp(&x.2.abs()));
    let title = format!("top {} of {} heads by |effect|, largest first", want.len().min(10), want.len());
    let rows = ranked_rows(&text, &title);
    assert_eq!(rows.len(), want.len().min(10), "{text}");
    for (i, (row, (layer, head, effect))) in rows.iter().zip(&want).enumerate() {
        assert_eq!(row[..3], [(i + 1).to_string(), layer.to_string(), head.to_string()], "{text}");
        assert_eq!(row[3], format!("{effect:.4}"));
    }
}

#[test]
fn stats_end_with_the_heads_ranked() {
    let args = ["my shoes are small, my feet are big.", "--heads", "2", "--layers", "2", "--stats"];
    let text = run(&[&args[..], &["--steps", "none"]].concat());
    let doc = json(&args);
    let mut want: Vec<(u64, u64, f64)> = doc["stats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["layer"].as_u64().unwrap(), s["head"].as_u64().unwrap(), s["previous_token"].as_f64().unwrap()))
        .collect();
    want.sort_by(|x, y| y.2.total_cmp(&x.2));
    let rows = ranked_rows(&text, "top 4 of 4 heads by previous-token score, largest first");
    let got: Vec<(String, String)> = rows.iter().map(|r| (r[1].clone(), r[2].clone())).collect();
    let want: Vec<(String, String)> = want.iter().map(|w| (w.0.to_string(), w.1.to_string())).collect();
    assert_eq!(got, want, "{text}");
}

/// SmolLM2's lens is softmax(lm_head(final_norm(resid_l))): after the last layer it is the
/// model's own prediction, so a tracked token's probability there is exactly the
/// predictions' probability of that token, and its rank is 1 where it is the top prediction.
/// At every layer, a tracked token that is the lens's top-1 has rank 1 and the same
/// probability; one that is not has a rank above 1 and no larger a probability.
#[test]
fn lens_track_ranks_follow_the_lens_and_end_at_the_predictions() {
    let model = crate::gguf::smollm2();
    let base = ["The capital of France is", "--model", &model, "--lens", "--steps", "none", "--top-k", "10"];
    let doc = json(&[&base[..], &["--lens-track", " Paris", "--lens-track", " the"]].concat());
    let tracked = doc["lens_track"].as_array().unwrap();
    assert_eq!(tracked.len(), 2);
    assert_eq!(tracked[0]["token"], "ĠParis");
    let (lens, predictions) = (doc["lens"].as_array().unwrap(), doc["predictions"].as_array().unwrap());
    for t in tracked {
        let (ranks, probs) = (t["rank"].as_array().unwrap(), t["prob"].as_array().unwrap());
        assert_eq!(ranks.len(), 30, "one row per layer");
        for (l, layer) in lens.iter().enumerate() {
            for (pos, top) in layer["top"].as_array().unwrap().iter().enumerate() {
                let (rank, p) = (ranks[l][pos].as_u64().unwrap(), probs[l][pos].as_f64().unwrap());
                let first = &top[0];
                if first["id"] == t["id"] {
                    assert_eq!((rank, p), (1, first["prob"].as_f64().unwrap()), "layer {l} position {pos}");
                } else {
                    assert!(rank > 1 && p <= first["prob"].as_f64().unwrap(), "layer {l} position {pos}");
                }
            }
        }
        // After the last layer: the model's predictions, to the bit.
        for (pos, row) in predictions.iter().enumerate() {
            let top = row["top"].as_array().unwrap();
            let (rank, p) = (ranks[29][pos].as_u64().unwrap(), probs[29][pos].as_f64().unwrap());
            match top.iter().position(|x| x["id"] == t["id"]) {
                Some(i) => assert_eq!((rank, p), (i as u64 + 1, top[i]["prob"].as_f64().unwrap()), "position {pos}"),
                None => assert!(rank > 10, "position {pos}: rank {rank} is outside the top 10"),
            }
        }
    }
    // " Paris" is the top prediction after "is".
    assert_eq!(tracked[0]["rank"][29][4], 1);
    let text = run(&[&base[..], &["--lens-track", " Paris", "--width", "100"]].concat());
    assert!(text.contains("logit lens · ·Paris · its rank over the vocabulary"), "{text}");
}

#[test]
fn lens_track_takes_one_token() {
    let model = crate::gguf::smollm2();
    let args = ["The capital of France is", "--model", &model, "--lens", "--lens-track", " Parisss"];
    refused(&args, "--lens-track \" Parisss\": it is 3 tokens of this model's tokenizer (·Par iss s)");
    refused(&["a b", "--lm-head", "tied", "--lens", "--lens-track", "a"], "this model has no tokenizer");
}
