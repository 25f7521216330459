//! Issue 47, item 9: less on screen by default. `--steps none` (only the summary and the
//! predictions), `--show-positions` (the printed views cut to some positions, files whole),
//! "did you mean" for a misspelt step, and TransformerLens hook names in `--steps`.

use crate::common::*;
use serde_json::Value;

const S: &str = "my shoes are small, my feet are big.";

fn ids(doc: &Value) -> Vec<String> {
    doc["steps"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap().to_string()).collect()
}

fn stdout(args: &[&str]) -> String {
    let out = cmd().current_dir(root()).args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn steps_none_shows_the_summary_line_and_no_step() {
    let text = stdout(&[S, "--steps", "none", "--lm-head", "tied"]);
    assert!(text.starts_with("attn-trace: 8 tokens, d_model 4"), "the run's summary: {text}");
    assert!(text.contains("next-token predictions"), "{text}");
    assert!(!text.contains("layers.0.") && !text.contains("tokens ["), "no step table: {text}");
    assert_eq!(ids(&trace_json(&[S, "--steps", "none"])), Vec::<String>::new());
    refused(&[S, "--steps", "none,weights"], "none shows no step");
    // The heatmap draws no attention map either (they are the weights step).
    let map = stdout(&[S, "--format", "heatmap", "--color", "never"]);
    let none = stdout(&[S, "--format", "heatmap", "--color", "never", "--steps", "none"]);
    assert!(map.contains("layers.0.attn.weights") && !none.contains("attn.weights"), "{none}");
}

#[test]
fn a_misspelt_step_gets_the_closest_name() {
    refused(&[S, "--steps", "wieghts"], "did you mean weights?");
    refused(&[S, "--steps", "layers.0.atn.q"], "did you mean layers.0.attn.q?");
    refused(&[S, "--steps", "blocks.0.attn.hook_patern"], "did you mean blocks.0.attn.hook_pattern?");
    let far = refused(&[S, "--steps", "zzzzzz"], "unknown step");
    assert!(!far.contains("did you mean"), "no guess when nothing is close: {far}");
}

#[test]
fn transformer_lens_hook_names_select_their_steps() {
    let two = [S, "--layers", "2"];
    let pick = |list: &str| ids(&trace_json(&[&two[..], &["--steps", list]].concat()));
    assert_eq!(pick("blocks.1.attn.hook_pattern"), ["layers.1.attn.weights"]);
    assert_eq!(pick("hook_embed,hook_pos_embed"), ["embed.token", "embed.position"]);
    // The residual stream before a block: the embeddings' output, then the previous block's
    // output (post-norm, as the toy is: the norm of the second sum).
    assert_eq!(pick("blocks.0.hook_resid_pre"), ["embed.out"]);
    assert_eq!(pick("blocks.1.hook_resid_pre"), ["layers.0.add_norm2.out"]);
    let pre = ids(&trace_json(&[&two[..], &["--norm", "pre", "--steps", "blocks.1.hook_resid_pre"]].concat()));
    assert_eq!(pre, ["layers.0.add_norm2.sum"]);
    refused(&[&two[..], &["--steps", "blocks.2.attn.hook_q"]].concat(), "names layer 2, but the model has 2");
}

/// Every name `--save-trace … --names transformer-lens` writes is accepted by `--steps` and
/// selects the tensor saved under it (the one table, read both ways).
#[test]
fn every_written_hook_name_reads_back() {
    let args = [S, "--heads", "2", "--layers", "2", "--causal"];
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tl.safetensors");
    let out = cmd().args(args).args(["--names", "transformer-lens", "--save-trace"]).arg(&file).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let saved = read_safetensors(&file);
    let names: Vec<String> = saved.keys().cloned().collect();
    assert!(names.len() > 20, "{names:?}");
    let doc = trace_json(&[&args[..], &["--steps", &names.join(",")]].concat());
    assert_eq!(ids(&doc).len(), names.len(), "one step per hook name: {:?}", ids(&doc));
    // Tensors TransformerLens lays out as attn-trace does hold the same numbers.
    let got = steps(&doc);
    for (hook, id) in [("blocks.1.attn.hook_pattern", "layers.1.attn.weights"), ("hook_embed", "embed.token")] {
        let want: Vec<f32> = saved[hook].1.iter().map(|&x| x as f32).collect();
        let have: Vec<f32> = got[id].1.iter().map(|&x| x as f32).collect();
        assert_eq!(want, have, "{hook}");
    }
}

#[test]
fn smollm2_takes_the_final_norm_hook_and_prints_little_with_steps_none() {
    let model = crate::gguf::smollm2();
    let base = ["The capital of France is", "--model", &model];
    let doc = trace_json(&[&base[..], &["--steps", "ln_final.hook_normalized,blocks.29.hook_resid_post"]].concat());
    assert_eq!(ids(&doc), ["layers.29.add_norm2.sum", "final_norm.out"]);
    let text = stdout(&[&base[..], &["--steps", "none"]].concat());
    assert!(text.contains("next-token predictions") && text.contains("·Paris"), "{text}");
    // Neither a step nor the per-layer summary of the default (30 layers × 9 heads).
    assert!(!text.contains("layers.0.") && !text.contains("strongest links"), "{text}");
    assert!(text.lines().count() <= 20, "{text}");
}

#[test]
fn show_positions_cuts_the_rows_printed_and_not_the_files() {
    let base = [S, "--heads", "2", "--layers", "2", "--steps", "tokens,weights,ffn.out,embed.out"];
    let all = trace_json(&base);
    let last = trace_json(&[&base[..], &["--show-positions", "last:3"]].concat());
    assert_eq!(last["positions"], serde_json::json!([5, 6, 7]));
    assert!(all.get("positions").is_none());
    let (a, l) = (steps(&all), steps(&last));
    for (id, (shape, values)) in &a {
        let (cut_shape, cut) = &l[id];
        // Rows (pos, or a map's query_pos) are cut to the last 3; a map keeps every key.
        let (rows_axis, n) = if id.ends_with("attn.weights") { (1, 8) } else { (0, 8) };
        assert_eq!(shape[rows_axis], n, "{id}");
        assert_eq!(cut_shape[rows_axis], 3, "{id}");
        let inner: usize = shape[rows_axis + 1..].iter().product();
        let outer: usize = shape[..rows_axis].iter().product();
        let want: Vec<f64> = (0..outer)
            .flat_map(|o| (5..8).flat_map(move |p| (0..inner).map(move |i| (o * n + p) * inner + i)))
            .map(|k| values[k])
            .collect();
        assert_eq!(cut, &want, "{id}");
    }
    // Tables label each row by its own position.
    let text = stdout(&[S, "--steps", "weights,ffn.out", "--show-positions", "last:3"]);
    assert!(text.contains("\n5 ") && text.contains("\n7 ") && !text.contains("\n4 "), "{text}");
    // The heatmap too: the last rows, each with its own position, and every key.
    let map = stdout(&[S, "--format", "heatmap", "--color", "never", "--show-positions", "last:2"]);
    assert!(
        map.contains("[query_pos × key_pos = 2 × 8]") && map.contains("\n6 are ") && map.contains("\n7 big. "),
        "{map}"
    );
    // A list or a range names positions; one past the end is refused.
    let some = trace_json(&[&base[..], &["--show-positions", "0,6-7"]].concat());
    assert_eq!(some["positions"], serde_json::json!([0, 6, 7]));
    refused(&[&base[..], &["--show-positions", "8"]].concat(), "position 8 is past the last token (8 tokens)");
    refused(&[&base[..], &["--show-positions", "last:0"]].concat(), "last:N takes a count of positions from 1");
    refused(
        &[S, "--show-positions", "last:2", "--format", "jsonl"],
        "--show-positions: --format jsonl writes each step",
    );
    refused(&["--batch", "sentences.txt", "--show-positions", "last:2"], "--batch traces several");
    // What is saved does not depend on what is printed.
    let dir = tempfile::tempdir().unwrap();
    let (whole, shown) = (dir.path().join("a.safetensors"), dir.path().join("b.safetensors"));
    stdout(&[&base[..], &["--save-trace", whole.to_str().unwrap()]].concat());
    stdout(&[&base[..], &["--show-positions", "last:3", "--save-trace", shown.to_str().unwrap()]].concat());
    assert_eq!(std::fs::read(&whole).unwrap(), std::fs::read(&shown).unwrap());
}

#[test]
fn smollm2_predictions_at_the_last_position_only() {
    let model = crate::gguf::smollm2();
    let base = ["The capital of France is", "--model", &model, "--steps", "none", "--show-positions", "last:1"];
    let text = stdout(&base);
    let table = &text[text.find("next-token predictions").unwrap()..];
    let rows: Vec<&str> = table.lines().filter(|l| l.contains('┆')).skip(1).collect();
    assert_eq!(rows.len(), 1, "{text}");
    assert!(rows[0].starts_with(" 4 ") && rows[0].contains("·Paris"), "{text}");
    let doc = trace_json(&[&base[..], &["--lens"]].concat());
    assert_eq!(doc["positions"], serde_json::json!([4]));
    assert_eq!(doc["predictions"].as_array().unwrap().len(), 1);
    assert_eq!(doc["predictions"][0]["pos"], 4);
    assert_eq!(doc["lens"][0]["top"].as_array().unwrap().len(), 1);
}
