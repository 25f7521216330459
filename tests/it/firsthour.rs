//! A learner's first hour (issue 18, item 5): the flags and views a newcomer reaches for
//! first, as a newcomer would type them.

use crate::cli::assert_usage_error;
use crate::common::*;
use serde_json::Value;

const S: &str = "my shoes are small, my feet are big.";

fn step<'a>(doc: &'a Value, id: &str) -> Option<&'a Value> {
    doc["steps"].as_array().unwrap().iter().find(|s| s["id"] == id)
}

#[test]
fn layer_and_head_take_lists_and_ranges() {
    let model = [S, "--d-model", "8", "--heads", "4", "--layers", "4", "--steps", "weights"];
    let all = trace_json(&model);
    let some = trace_json(&[&model[..], &["--layer", "0,3", "--head", "1-2"]].concat());
    let ids: Vec<&str> = some["steps"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["layers.0.attn.weights", "layers.3.attn.weights"]);
    for l in [0, 3] {
        let id = format!("layers.{l}.attn.weights");
        let (got, full) = (step(&some, &id).unwrap(), step(&all, &id).unwrap());
        assert_eq!(got["heads"], serde_json::json!([1, 2]));
        assert_eq!(got["shape"], serde_json::json!([2, 8, 8]));
        assert_eq!(got["values"][0], full["values"][1]);
        assert_eq!(got["values"][1], full["values"][2]);
    }
    // A range and the list it spells select the same; repeats and order do not matter.
    let range = trace_json(&[&model[..], &["--layer", "1-3"]].concat());
    let list = trace_json(&[&model[..], &["--layer", "3,1,2,2"]].concat());
    assert_eq!(range["steps"], list["steps"]);
    assert_eq!(range["steps"].as_array().unwrap().len(), 3);
}

#[test]
fn bad_layer_and_head_lists_are_refused() {
    assert_usage_error(&[S, "--layer", "1-0"], "the range 1-0 runs backwards");
    assert_usage_error(&[S, "--layer", "zero"], "\"zero\" is not a number");
    assert_usage_error(&[S, "--head", "0,"], "is not a number");
    assert_usage_error(&[S, "--layers", "2", "--layer", "0,2"], "--layer: layer 2 does not exist; the model has 2");
    assert_usage_error(&[S, "--heads", "2", "--head", "0-5"], "--head: head 2 does not exist");
    assert_usage_error(&[S, "--layers", "2", "--layer", "0,1", "--focus", "shoes"], "--focus: it shows one layer");
}

fn stdout(args: &[&str]) -> String {
    let out = cmd().args(args).output().unwrap();
    assert!(out.status.success(), "attn-trace {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn focus_alone_prints_the_walkthrough_after_the_tokens() {
    let text = stdout(&[S, "--heads", "2", "--focus", "shoes"]);
    let first_focus = text.find("focus \"shoes\"").expect("the walkthrough");
    assert!(text[..first_focus].contains("tokens [pos = 8]"), "{text}");
    assert!(!text.contains("embed.sum") && !text.contains("layers.0.ffn.out"), "the whole trace came too:\n{text}");
    // The header and the tokens table come first: the walkthrough starts within 20 lines.
    assert!(text[..first_focus].lines().count() < 20, "{text}");
    // --steps brings steps back, before the walkthrough as before.
    let with_steps = stdout(&[S, "--heads", "2", "--focus", "shoes", "--steps", "weights"]);
    assert!(with_steps.find("layers.0.attn.weights").unwrap() < with_steps.find("focus \"shoes\"").unwrap());
}

#[test]
fn explain_ranks_the_terms_of_the_largest_score() {
    let doc = trace_json(&[S, "--heads", "2", "--d-model", "8", "--focus", "feet", "--explain"]);
    for h in doc["focus"]["heads"].as_array().unwrap() {
        let scores = flat(&h["scores"]);
        let top = h["top_key"].as_u64().unwrap() as usize;
        assert!(scores.iter().all(|&s| s <= scores[top]), "key {top} is not the largest of {scores:?}");
        let products = flat(&h["products"][top]);
        let order: Vec<usize> =
            h["top_terms"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
        assert_eq!(order.len(), products.len());
        assert!(order.windows(2).all(|w| products[w[0]] >= products[w[1]]), "{order:?} over {products:?}");
    }
    let text = stdout(&[S, "--heads", "2", "--d-model", "8", "--focus", "feet", "--explain"]);
    assert_eq!(text.matches("scores highest (q·k = ").count(), 2, "one ranking per head:\n{text}");
}

#[test]
fn focus_finds_a_word_the_tokenizer_split_into_pieces() {
    let args = ["the unbelievable embeddings", "--model", "fixtures/tiny-bert", "--focus", "embeddings"];
    let doc = trace_json(&args);
    let tokens: Vec<&str> = doc["input"]["tokens"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    let pos = doc["focus"]["position"].as_u64().unwrap() as usize;
    // The first piece, and the pieces after it spell the word.
    assert!(!tokens[pos].starts_with("##"));
    let spelled: String = std::iter::once(tokens[pos])
        .chain(tokens[pos + 1..].iter().take_while(|t| t.starts_with("##")).map(|t| &t[2..]))
        .collect();
    assert_eq!(spelled, "embeddings", "{tokens:?}");
    let text = stdout(&[&args[..], &["--head", "0"]].concat());
    assert!(text.contains("The tokenizer splits this word into"), "{text}");
    assert!(text.contains(&format!("--focus {}", pos + 1)), "{text}");
}

#[test]
fn a_real_models_walkthrough_shows_its_strongest_head_and_says_how_to_see_the_rest() {
    let args = ["the cat sat on the mat", "--model", "fixtures/tiny-bert", "--focus", "cat", "--explain"];
    let text = stdout(&args);
    assert_eq!(text.matches("focus \"cat\" (position 2)").count(), 1, "{text}");
    let doc = trace_json(&args);
    // JSON keeps every head; the table shows the one with the highest peak weight.
    let peak = |h: &Value| flat(&h["weights"]).into_iter().fold(f64::MIN, f64::max);
    let heads = doc["focus"]["heads"].as_array().unwrap();
    let best = (0..heads.len()).fold(0, |b, g| if peak(&heads[g]) > peak(&heads[b]) { g } else { b });
    assert!(text.contains(&format!("Head {best} of {} is shown", heads.len())), "{text}");
    assert!(text.contains(&format!("--head 0-{} every head", heads.len() - 1)));
    let all = stdout(&[&args[..], &["--head", "0-1"]].concat());
    assert_eq!(all.matches("focus \"cat\" (position 2)").count(), 2);
    assert!(!all.contains("is shown"));
}

#[test]
fn tables_use_the_terminals_width_only_on_a_terminal() {
    use attn_trace::cli::{Cli, Env};
    use attn_trace::settings::Settings;
    use clap::Parser;
    let width = |args: &[&str], env: Env| {
        let cli = Cli::try_parse_from(std::iter::once("attn-trace").chain(args.iter().copied())).unwrap();
        Settings::from_cli(cli, &env).unwrap().output.width
    };
    let terminal = |cols| Env { stdout_is_terminal: true, terminal_width: Some(cols), ..Env::default() };
    assert_eq!(width(&[S], terminal(132)), 132);
    assert_eq!(width(&[S], terminal(20)), 40, "never narrower than a table can be");
    // Not a terminal (a pipe, a file, CI): 80, whatever the terminal would say.
    assert_eq!(width(&[S], Env { terminal_width: Some(132), ..Env::default() }), 80);
    assert_eq!(width(&[S], Env::default()), 80);
    assert_eq!(width(&[S, "--width", "100"], terminal(132)), 100);
}

#[test]
fn an_eight_token_square_table_splits_evenly() {
    // Raw scores with minus signs need 88 columns for 8 keys: two blocks of 4, not 7 + 1.
    let text = stdout(&[S, "--heads", "2", "--steps", "raw_scores", "--head", "0"]);
    assert!(text.contains("columns 0–3 of 8") && text.contains("columns 4–7 of 8"), "{text}");
    assert!(!text.contains("columns 0–6 of 8"));
    // Wide enough, one block.
    let wide = stdout(&[S, "--heads", "2", "--steps", "raw_scores", "--head", "0", "--width", "90"]);
    assert!(!wide.contains("columns"), "{wide}");
}

#[test]
fn help_names_tutorials_not_fixture_numbers() {
    let help = stdout(&["--help"]);
    for jargon in ["seed 000", "seed 003", "seed 004", "seeds 003"] {
        assert!(!help.contains(jargon), "--help says {jargon:?}, which means nothing to a newcomer");
    }
    assert!(help.contains("Life is short, eat dessert first") && help.contains("MultiHeadAttentionWrapper"));
}

#[test]
fn params_prints_the_weights_as_tables_tutorials_do() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.safetensors");
    let args = [S, "--layers", "2", "--layer", "1", "--steps", "tokens", "--params"];
    let text = stdout(&[&args[..], &["--save-weights", w.to_str().unwrap()]].concat());
    for name in ["W_Q", "W_K", "W_V", "W_O", "W_1", "b_1", "W_2", "b_2"] {
        assert!(text.contains(&format!("{name} = layers.1.")), "{name} missing:\n{text}");
    }
    assert!(!text.contains("layers.0."), "layer 0 was not asked for:\n{text}");
    // The numbers are the parameters' own: W_Q's first row, as saved by --save-weights.
    let saved = read_safetensors(&w);
    let (_, wq) = &saved["layers.1.attn.q_proj.weight"];
    let row0: Vec<String> = wq[..4].iter().map(|v| format!("{v:.4}")).collect();
    let table = &text[text.find("W_Q = layers.1.attn.q_proj.weight").unwrap()..];
    let line = table.lines().find(|l| l.starts_with("0 ")).unwrap();
    let cells: Vec<&str> = line.split('┆').skip(1).map(str::trim).collect();
    assert_eq!(cells, row0);
    assert_usage_error(&[S, "--params", "--format", "json"], "--params: it prints the parameters as tables");
}

#[test]
fn a_toy_language_models_predictions_are_words() {
    let doc = trace_json(&[S, "--heads", "2", "--norm", "pre", "--causal", "--lm-head", "tied"]);
    let words: Vec<&str> = doc["input"]["tokens"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    let ids: Vec<u64> = doc["input"]["token_ids"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap()).collect();
    for pos in doc["predictions"].as_array().unwrap() {
        for p in pos["top"].as_array().unwrap() {
            let id = p["id"].as_u64().unwrap();
            let word = words[ids.iter().position(|&i| i == id).unwrap()];
            assert_eq!(p["token"], word);
        }
    }
}
