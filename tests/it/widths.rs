//! Every table fits `--width` (issue 47, item 4): for a command per kind of table (the step
//! tables, parameters, the focus walkthrough, predictions, a generation, the real-model
//! summary, experts' routing, an encoder–decoder's alignment, attribution, patching grids,
//! statistics, the lens, rollout, the derived maps, the heatmap, a batch), at `--width` 60, 80
//! and 120, no line of stdout is wider (counted in characters: the box-drawing characters are
//! one column each). A table wraps its cells or splits into blocks to fit; what it still
//! cannot hold it marks with `…` or `+N`, never silently. And the predictions table shows as
//! many tokens per position as its header says.

use crate::common::*;
use crate::gguf::smollm2;

const WIDTHS: [usize; 3] = [60, 80, 120];
const SENTENCE: &str = "my shoes are small, my feet are big.";

/// Runs attn-trace with `args` and `--width width` from the repository root; its stdout.
fn table_at(args: &[&str], width: usize) -> String {
    let w = width.to_string();
    let out = cmd().current_dir(root()).args(args).args(["--width", &w]).output().unwrap();
    assert!(out.status.success(), "attn-trace {args:?} --width {w}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Asserts that no line of `text` is wider than `width` characters.
fn fits(text: &str, width: usize, who: &[&str]) {
    for (i, line) in text.lines().enumerate() {
        let n = line.chars().count();
        assert!(n <= width, "{who:?} at --width {width}: line {} is {n} columns:\n{line}", i + 1);
    }
}

#[test]
fn every_table_of_the_toy_and_fixture_models_fits_the_width() {
    let batch = tempfile::NamedTempFile::new().unwrap();
    let long = "a second sentence of the batch that is longer than the narrowest of the widths";
    std::fs::write(batch.path(), format!("{SENTENCE}\n{long}\n")).unwrap();
    let llama = "fixtures/decoders/llama-gqa";
    let cases: Vec<Vec<&str>> = vec![
        vec![SENTENCE, "--steps", "all", "--heads", "2"],
        vec!["my shoes", "--d-model", "2", "--params", "--steps", "q"],
        vec!["my shoes are small", "--heads", "2", "--head", "1", "--focus", "shoes", "--explain"],
        vec![SENTENCE, "--causal", "--lm-head", "tied", "--generate", "3"],
        vec![SENTENCE, "--model", "fixtures/tiny-bert"],
        vec!["my [MASK] is small.", "--model", "fixtures/tiny-bert-mlm", "--attribute", "feet", "shoes"],
        vec![
            "my [MASK] is small.",
            "--model",
            "fixtures/tiny-bert-mlm",
            "--patch",
            "my [MASK] is big.",
            "--steps",
            "tokens",
        ],
        vec![
            "my [MASK] is small.",
            "--model",
            "fixtures/tiny-bert-mlm",
            "--patch",
            "my [MASK] is big.",
            "--patch-what",
            "resid",
            "--steps",
            "tokens",
        ],
        vec![SENTENCE, "--model", llama],
        vec![SENTENCE, "--model", llama, "--stats", "--induction", "2", "--steps", "output"],
        vec![SENTENCE, "--model", llama, "--lens", "--steps", "output"],
        vec![SENTENCE, "--model", llama, "--format", "heatmap"],
        vec![SENTENCE, "--model", "fixtures/tiny-bert", "--rollout", "--steps", "tokens"],
        vec![SENTENCE, "--model", "fixtures/tiny-bert", "--merge-pieces", "--average-heads", "--steps", "weights"],
        vec![SENTENCE, "--model", "fixtures/decoders/mixtral"],
        vec![SENTENCE, "--model", "fixtures/seq2seq/t5", "--target", "the shoes are small."],
        vec!["--batch", batch.path().to_str().unwrap(), "--max-len", "32"],
    ];
    for args in &cases {
        for width in WIDTHS {
            fits(&table_at(args, width), width, args);
        }
    }
}

/// The cells of the predictions table, one string per position (a cell's lines joined).
fn prediction_cells(text: &str) -> Vec<String> {
    let start = text.find("next-token predictions").expect("a predictions table");
    let mut cells: Vec<String> = Vec::new();
    for line in text[start..].lines().skip_while(|l| !l.starts_with('═')).skip(1) {
        let cols: Vec<&str> = line.split('┆').collect();
        if cols.len() < 3 {
            break;
        }
        let cell = cols[2].trim();
        match cols[0].trim() {
            "" => cells.last_mut().expect("a first row").push_str(&format!("  {cell}")),
            _ => cells.push(cell.to_string()),
        }
    }
    cells
}

#[test]
fn smollm2_tables_fit_the_width_and_the_predictions_show_their_top_k() {
    let m = smollm2();
    let prompt = "The capital of France is";
    let cases: [&[&str]; 3] = [
        &[prompt, "--model", &m],
        &[prompt, "--model", &m, "--generate", "8", "--ablate", "3.0,3.1", "--baseline", "--steps", "tokens"],
        &[prompt, "--model", &m, "--attribute", " Paris", " London", "--steps", "tokens"],
    ];
    for args in cases {
        for width in WIDTHS {
            let text = table_at(args, width);
            fits(&text, width, args);
            if args.len() > 3 {
                continue;
            }
            // "top 5" and five tokens with their probabilities in every row, however narrow.
            assert!(text.contains("top 5 per position"), "{text}");
            let cells = prediction_cells(&text);
            assert_eq!(cells.len(), 5, "a row per position at --width {width}:\n{text}");
            for cell in &cells {
                let probs = cell.split_whitespace().filter(|w| w.len() == 4 && w.starts_with("0.")).count();
                assert_eq!(probs, 5, "--width {width}: {cell:?}\n{text}");
            }
            assert!(cells[4].starts_with("·Paris 0."), "{}", cells[4]);
        }
    }
}
