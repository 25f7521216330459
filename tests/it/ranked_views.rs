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
