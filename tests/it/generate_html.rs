//! `--generate` with `--html` (issue 31, item 4): the page's generation section holds, for
//! every generated token, every recorded layer's and head's row of the step that chose it,
//! equal to the JSON document's weights (the prompt's last row for the first token, decode
//! step t's one row for token t + 1), with the means over heads and layers; tokens are text
//! however hostile; a batch's page gives each sentence its own. The browser half (hover,
//! click, colours) is tests/browser/check_generation.py.

use crate::common::*;
use serde_json::Value;
use std::path::Path;

fn llama() -> String {
    root().join("fixtures/decoders/llama-gqa").display().to_string()
}

/// Runs attn-trace writing `page`, and returns the same run's JSON document.
fn run(args: &[&str], page: &Path) -> Value {
    let out = cmd().args(args).args(["--html", page.to_str().unwrap(), "--format", "json"]).output().unwrap();
    assert!(out.status.success(), "attn-trace {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The `<script id="ID" type="application/json">` block of a page, parsed.
fn block(page: &str, id: &str) -> Value {
    let open = format!("<script id=\"{id}\" type=\"application/json\">");
    let start = page.find(&open).unwrap_or_else(|| panic!("no {id} block")) + open.len();
    serde_json::from_str(&page[start..start + page[start..].find("</script>").unwrap()]).unwrap()
}

/// Layer `l`'s weights of the step that chose generated token `i`, one row per head:
/// `[head][key]`, from the JSON document.
fn json_rows(doc: &Value, i: usize, l: u64) -> Vec<Vec<f64>> {
    let n = doc["generation"]["prompt_tokens"].as_u64().unwrap() as usize;
    let (steps, id, row) = if i == 0 {
        (&doc["steps"], format!("layers.{l}.attn.weights"), n - 1)
    } else {
        (&doc["generation"]["steps"][i - 1]["steps"], format!("gen.{i}.layers.{l}.attn.weights"), 0)
    };
    let step = steps.as_array().unwrap().iter().find(|s| s["id"] == id.as_str()).unwrap_or_else(|| panic!("{id}"));
    step["values"].as_array().unwrap().iter().map(|h| flat(&h[row])[..n + i].to_vec()).collect()
}

/// Every row of the page's `gen-data` block equals the JSON's weights; the means are the
/// means over the recorded heads and then layers. Returns the number of tokens checked.
fn assert_rows_match(data: &Value, doc: &Value) -> usize {
    let layers: Vec<u64> = data["layers"].as_array().unwrap().iter().map(|l| l.as_u64().unwrap()).collect();
    let tokens = data["tokens"].as_array().unwrap();
    assert_eq!(tokens.len(), doc["generation"]["tokens"].as_array().unwrap().len());
    assert_eq!(data["prompt"], doc["generation"]["prompt_tokens"]);
    for (i, t) in tokens.iter().enumerate() {
        let mut over_layers = Vec::new();
        for (li, &l) in layers.iter().enumerate() {
            let want = json_rows(doc, i, l);
            let got: Vec<Vec<f64>> = t["heads"][li].as_array().unwrap().iter().map(flat).collect();
            assert_eq!(got, want, "token {i}, layer {l}: the page's rows are not the JSON's weights");
            let mean: Vec<f64> =
                (0..want[0].len()).map(|k| want.iter().map(|h| h[k]).sum::<f64>() / want.len() as f64).collect();
            let page_mean = flat(&t["mean_heads"][li]);
            assert!(page_mean.iter().zip(&mean).all(|(a, b)| (a - b).abs() < 1e-6), "token {i}, layer {l}: mean");
            over_layers.push(page_mean);
        }
        let mean: Vec<f64> = (0..over_layers[0].len())
            .map(|k| over_layers.iter().map(|r| r[k]).sum::<f64>() / layers.len() as f64)
            .collect();
        assert!(flat(&t["mean"]).iter().zip(&mean).all(|(a, b)| (a - b).abs() < 1e-6), "token {i}: mean over layers");
    }
    tokens.len()
}

#[test]
fn the_page_holds_every_generated_tokens_rows_as_the_json_has_them() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p.html");
    let doc = run(&["The capital of France is", "--model", &llama(), "--generate", "5"], &p);
    let page = std::fs::read_to_string(&p).unwrap();
    assert!(page.contains("<section id=\"generation\" class=\"generation\">\n<h2>Generation</h2>"));
    let data = block(&page, "gen-data");
    assert_eq!(data["layers"], serde_json::json!([0, 1]));
    assert_eq!(data["heads"], serde_json::json!([0, 1, 2, 3]));
    assert_eq!(assert_rows_match(&data, &doc), 5);
    // One span per position; the generated ones titled with their probability.
    let n = doc["generation"]["prompt_tokens"].as_u64().unwrap() as usize;
    assert_eq!(page.matches("<span class=\"tok\" data-pos=").count(), n);
    assert_eq!(page.matches("<span class=\"tok gen\" data-pos=").count(), 5);
    let first = &doc["generation"]["tokens"][0];
    let title = format!("generated token 1 at position {n}, probability {:.4}", first["prob"].as_f64().unwrap());
    assert!(page.contains(&title), "{title}");
    // --head keeps its heads' rows only; the same page without --generate has no section.
    let doc = run(&["The capital of France is", "--model", &llama(), "--generate", "3", "--head", "2"], &p);
    let data = block(&std::fs::read_to_string(&p).unwrap(), "gen-data");
    assert_eq!(data["heads"], serde_json::json!([2]));
    assert_rows_match(&data, &doc);
    run(&["The capital of France is", "--model", &llama()], &p);
    let page = std::fs::read_to_string(&p).unwrap();
    assert!(!page.contains("id=\"generation\"") && !page.contains("gen-data\" type"), "a section without --generate");
}

#[test]
fn hostile_tokens_stay_text_and_a_batch_gives_each_sentence_its_section() {
    let dir = tempfile::tempdir().unwrap();
    let hostile = "a \"quote\" </script><img src=x onerror=alert(1)> it's \u{7}";
    let batch = dir.path().join("b.txt");
    std::fs::write(&batch, format!("The capital of France is\n{hostile}\n")).unwrap();
    let p = dir.path().join("b.html");
    let docs = run(&["--batch", batch.to_str().unwrap(), "--model", &llama(), "--generate", "4"], &p);
    let page = std::fs::read_to_string(&p).unwrap();
    assert!(!page.contains("<img"), "a token's markup reached the page");
    assert!(page.contains("\\u{7}") && !page.contains('\u{7}'), "a control character is shown, not sent");
    assert_eq!(page.matches("gen-data-s").count(), 2);
    for (i, doc) in docs.as_array().unwrap().iter().enumerate() {
        let data = block(&page, &format!("gen-data-s{}", i + 1));
        assert_eq!(assert_rows_match(&data, doc), 4, "sentence {}", i + 1);
        // The section's generation view is the single run's, its ids suffixed.
        let single = dir.path().join(format!("s{i}.html"));
        let sentence = doc["input"]["sentence"].as_str().unwrap();
        run(&[sentence, "--model", &llama(), "--generate", "4"], &single);
        assert_eq!(data, block(&std::fs::read_to_string(&single).unwrap(), "gen-data"));
    }
}
