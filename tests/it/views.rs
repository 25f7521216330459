//! The views: `--format heatmap`, `--focus`/`--explain`, `--merge-pieces`, `--average-heads`,
//! `--html` and `--svg`. The goldens here are **stability goldens** like golden.rs's (they
//! catch accidental changes, not wrong numbers; regenerate with `UPDATE_GOLDEN=1 cargo test
//! views` and review the diff); the other tests check the numbers: the focus arithmetic of
//! seed notebook 003 and its agreement with the trace's own steps, the derived maps against
//! the steps they come from, and that the SVG is XML with one cell per weight.

use crate::common::*;

const SEED000: &str = "my shoes are small, my feet are big.";
const SEED003: &[&str] = &[
    "My shoes are small, my feet are big.",
    "--vocab-order",
    "sorted",
    "--d-model",
    "2",
    "--d-k",
    "3",
    "--d-v",
    "4",
    "--positions",
    "none",
    "--linear-init",
    "rand",
];
const MINILM: &str = ".cache/models/all-MiniLM-L6-v2";

/// Runs attn-trace with `env` set, asserting success; returns stdout.
fn run(args: &[&str], env: &[(&str, &str)]) -> Vec<u8> {
    let mut c = cmd();
    c.current_dir(root()).args(args).env_remove("COLORTERM");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    assert!(out.status.success(), "attn-trace {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

fn golden(name: &str, args: &[&str], env: &[(&str, &str)]) {
    let got = run(args, env);
    let path = root().join("fixtures/golden").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &got).unwrap();
        return;
    }
    let want = std::fs::read(&path)
        .unwrap_or_else(|_| panic!("{} is missing; run UPDATE_GOLDEN=1 cargo test views", path.display()));
    assert!(
        want == got,
        "output of attn-trace {args:?} differs from {}; if intended, run UPDATE_GOLDEN=1 cargo test views and review the diff\n--- got ---\n{}",
        path.display(),
        String::from_utf8_lossy(&got)
    );
}

fn with(base: &[&'static str], more: &[&'static str]) -> Vec<&'static str> {
    base.iter().chain(more).copied().collect()
}

#[test]
fn golden_heatmap_truecolor() {
    let args = [SEED000, "--heads", "2", "--format", "heatmap", "--color", "always"];
    golden("views-heatmap-truecolor.txt", &args, &[("COLORTERM", "truecolor")]);
}

#[test]
fn golden_heatmap_256_colours() {
    let args = [SEED000, "--format", "heatmap", "--color", "always", "--precision", "2"];
    golden("views-heatmap-256.txt", &args, &[]);
}

#[test]
fn golden_heatmap_without_colour() {
    let args = [SEED000, "--heads", "2", "--format", "heatmap", "--color", "never", "--precision", "2"];
    golden("views-heatmap-plain.txt", &args, &[("COLORTERM", "truecolor")]);
}

#[test]
fn golden_focus_seed003_explained() {
    golden("views-focus-003.txt", &with(SEED003, &["--focus", "shoes", "--explain", "--steps", "tokens"]), &[]);
}

#[test]
fn golden_focus_json_causal_two_heads() {
    let args = [SEED000, "--heads", "2", "--causal", "--focus", "3", "--steps", "weights", "--format", "json"];
    golden("views-focus-causal.json", &args, &[]);
}

#[test]
fn golden_views_tiny_bert_words_and_mean() {
    let args = ["unbelievable embeddings", "--model", "fixtures/tiny-bert", "--steps", "weights"];
    golden("views-tiny-bert-merged.txt", &with(&args, &["--merge-pieces", "--average-heads", "--layer", "1"]), &[]);
}

/// Rounds to the notebook's 4 decimals.
fn r4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

#[test]
fn focus_arithmetic_matches_seed_notebook_003() {
    // The notebook's printed raw scores, softmax weights and context vector for "shoes".
    let raw = [-0.0879, 4.3783, 1.7863, 1.0502, -2.4988, -1.9530, 1.7863, -1.0434];
    let weights = [0.0432, 0.5687, 0.1273, 0.0832, 0.0107, 0.0147, 0.1273, 0.0249];
    let context = [0.2593, 0.5718, 1.0390, 0.9041];
    let doc = trace_json(&with(SEED003, &["--focus", "1", "--explain"]));
    let h = &doc["focus"]["heads"][0];
    assert_eq!(doc["focus"]["token"], "shoes");
    assert_eq!(flat(&h["raw_scores"]).into_iter().map(r4).collect::<Vec<_>>(), raw);
    assert_eq!(flat(&h["weights"]).into_iter().map(r4).collect::<Vec<_>>(), weights);
    assert_eq!(flat(&h["context"]).into_iter().map(r4).collect::<Vec<_>>(), context);
    // The notebook's first hand sum: 0.0279·1.0321 − 0.0671·1.3501 − 0.0158·1.6555 = −0.0879.
    let text = String::from_utf8(run(&with(SEED003, &["--focus", "1", "--explain", "--width", "200"]), &[])).unwrap();
    assert!(text.contains("q·k_0 = 1.0321×0.0279 + 1.3501×(-0.0671) + 1.6555×(-0.0158) = -0.0879"), "{text}");
    assert!(text.contains("× 0.5774 (= 1/√d_k = 1/√3)"), "{text}");
    for (d, c) in context.iter().enumerate() {
        assert!(text.contains(&format!("c[{d}] = 0.0432×")), "{text}");
        assert!(text.contains(&format!("= {c:.4}\n")), "context {c} not shown: {text}");
    }
}

#[test]
fn focus_numbers_are_the_traces_own() {
    // Causal, two heads, token 3: every field agrees with the steps and with its own sums.
    let doc = trace_json(&[SEED000, "--heads", "2", "--causal", "--focus", "3", "--d-k", "3", "--d-v", "5"]);
    let s = steps(&doc);
    let (i, n) = (3, 8);
    for h in doc["focus"]["heads"].as_array().unwrap() {
        let g = h["head"].as_u64().unwrap() as usize;
        let row = |id: &str, width: usize| s[id].1[(g * n + i) * width..(g * n + i + 1) * width].to_vec();
        assert_eq!(flat(&h["raw_scores"]), row("layers.0.attn.raw_scores", n));
        assert_eq!(flat(&h["scores"]), row("layers.0.attn.scores", n));
        assert_eq!(flat(&h["weights"]), row("layers.0.attn.weights", n));
        assert_eq!(flat(&h["context"]), row("layers.0.attn.context", 5));
        assert_eq!(flat(&h["query"]), row("layers.0.attn.q", 3));
        let products: Vec<f64> = h["products"].as_array().unwrap().iter().map(|p| flat(p).iter().sum()).collect();
        let (exps, sum) = (flat(&h["exp"]), h["exp_sum"].as_f64().unwrap());
        let terms = h["weighted_values"].as_array().unwrap();
        for j in 0..n {
            assert!(close(products[j], flat(&h["raw_scores"])[j], 1e-5, 1e-5), "q·k_{j}");
            assert!(close(exps[j] / sum, flat(&h["weights"])[j], 1e-6, 1e-5), "softmax {j}");
            let hidden = h["mask"][j].as_bool().unwrap();
            assert_eq!(hidden, j > i, "mask {j}");
            if hidden {
                assert_eq!(h["scores"][j], "-inf");
                assert_eq!(exps[j], 0.0);
            }
        }
        for d in 0..5 {
            let c: f64 = terms.iter().map(|t| flat(t)[d]).sum();
            assert!(close(c, flat(&h["context"])[d], 1e-5, 1e-5), "context {d}");
        }
        assert_eq!(flat(&h["shifted"]).iter().copied().fold(f64::NEG_INFINITY, f64::max), 0.0);
    }
}

#[test]
fn focus_records_its_steps_when_steps_narrows_the_output() {
    let doc = trace_json(&[SEED000, "--focus", "shoes", "--steps", "embed.sum", "--layers", "2", "--layer", "1"]);
    let ids: Vec<&str> = doc["steps"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["embed.sum"]);
    assert_eq!(doc["focus"]["layer"], 1);
    assert_eq!(doc["focus"]["heads"].as_array().unwrap().len(), 1);
    // The same focus with every step shown: identical numbers.
    let all = trace_json(&[SEED000, "--focus", "shoes", "--layers", "2", "--layer", "1"]);
    assert_eq!(all["focus"], doc["focus"]);
}

/// [`refused`]'s one line, which starts with the program's name.
fn usage_error(args: &[&str]) -> String {
    let err = refused(args, "");
    assert!(err.starts_with("attn-trace: "), "{err}");
    err
}

#[test]
fn focus_errors_are_usage_errors_that_list_the_tokens() {
    let e = usage_error(&[SEED000, "--focus", "my"]);
    assert!(e.contains("ambiguous") && e.contains("positions 0, 4"), "{e}");
    assert!(e.contains("0 my, 1 shoes, 2 are, 3 small, 4 my, 5 feet, 6 are, 7 big."), "{e}");
    let e = usage_error(&[SEED000, "--focus", "hat"]);
    assert!(e.contains("not a token") && e.contains("7 big."), "{e}");
    assert!(usage_error(&[SEED000, "--focus", "8"]).contains("past the last token"));
    assert!(usage_error(&[SEED000, "--explain"]).contains("--focus"));
    assert!(usage_error(&[SEED000, "--heads", "2", "--head", "1", "--average-heads"]).contains("--head"));
    assert!(usage_error(&["my shoes", "--model", "fixtures/tiny-bert", "--focus", "hat"]).contains("[CLS]"));
    for flag in ["--merge-pieces", "--average-heads"] {
        assert!(usage_error(&[SEED000, "--format", "jsonl", flag]).contains("--format json"));
    }
    assert!(usage_error(&[SEED000, "--format", "jsonl", "--focus", "1"]).contains("whole trace"));
    let e = usage_error(&[SEED000, "--html", "/nonexistent-dir/x.html"]);
    assert!(e.contains("--html /nonexistent-dir/x.html"), "{e}");
}

#[test]
fn derived_views_sit_beside_unchanged_steps() {
    let args = ["the unbelievable embeddings", "--model", "fixtures/tiny-bert", "--steps", "weights"];
    let plain = trace_json(&args);
    let doc = trace_json(&with(&args, &["--merge-pieces", "--average-heads"]));
    assert_eq!(plain["steps"], doc["steps"], "a view changed a step");
    assert!(plain.get("views").is_none());
    let v = &doc["views"];
    let tokens = doc["input"]["tokens"].as_array().unwrap();
    let pieces: Vec<Vec<usize>> = serde_json::from_value(v["word_pieces"].clone()).unwrap();
    assert!(pieces.iter().any(|p| p.len() > 1), "no word was split: {tokens:?}");
    let (n, m) = (tokens.len(), pieces.len());
    let s = steps(&doc);
    for map in v["maps"].as_array().unwrap() {
        let l = map["layer"].as_u64().unwrap();
        assert_eq!(map["head"], "mean");
        let (shape, w) = &s[&format!("layers.{l}.attn.weights")];
        let heads = shape[0];
        let got = flat(&map["values"]);
        for (a, qa) in pieces.iter().enumerate() {
            assert!(close(got[a * m..(a + 1) * m].iter().sum(), 1.0, 1e-5, 0.0), "row {a} sums to 1");
            for (b, kb) in pieces.iter().enumerate() {
                // mean over heads and query pieces, sum over key pieces
                let mut want = 0.0;
                for h in 0..heads {
                    for &q in qa {
                        want += kb.iter().map(|&k| w[(h * n + q) * n + k]).sum::<f64>();
                    }
                }
                want /= (heads * qa.len()) as f64;
                assert!(close(got[a * m + b], want, 1e-6, 1e-5), "layer {l} [{a}][{b}]");
            }
        }
    }
}

/// The `<rect class="cell">`s of an SVG, which must parse as XML.
fn svg_cells(path: &std::path::Path) -> usize {
    let text = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{}: not XML: {e}", path.display()));
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    doc.descendants().filter(|n| n.has_tag_name("rect") && n.attribute("class") == Some("cell")).count()
}

#[test]
fn svg_is_xml_with_one_cell_per_weight() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name);
    let arg = |name: &str| p(name).to_str().unwrap().to_string();
    // All heads of layer 1 of 2: 3 heads × 8 × 8; the markup-laden sentence must be escaped.
    let s = "my <shoes> & \"feet\" are 'big' ok yes";
    run(&[s, "--heads", "3", "--d-model", "6", "--layers", "2", "--layer", "1", "--svg", &arg("all.svg")], &[]);
    assert_eq!(svg_cells(&p("all.svg")), 3 * 8 * 8);
    run(&[s, "--heads", "3", "--d-model", "6", "--head", "2", "--svg", &arg("one.svg")], &[]);
    assert_eq!(svg_cells(&p("one.svg")), 8 * 8);
    run(&[s, "--heads", "3", "--d-model", "6", "--average-heads", "--svg", &arg("mean.svg")], &[]);
    assert_eq!(svg_cells(&p("mean.svg")), 8 * 8);
    // Real model, words: "[CLS] the unbelievable embeddings [SEP]" has 5 words.
    let args = ["the unbelievable embeddings", "--model", "fixtures/tiny-bert", "--merge-pieces"];
    run(&with(&args, &["--head", "0", "--svg"]).into_iter().chain([arg("w.svg").as_str()]).collect::<Vec<_>>(), &[]);
    assert_eq!(svg_cells(&p("w.svg")), 5 * 5);
    // Same command, same bytes.
    let again = arg("all2.svg");
    run(&[s, "--heads", "3", "--d-model", "6", "--layers", "2", "--layer", "1", "--svg", &again], &[]);
    assert_eq!(std::fs::read(p("all.svg")).unwrap(), std::fs::read(p("all2.svg")).unwrap());
}

#[test]
fn html_is_one_offline_deterministic_file() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.html");
    let b = dir.path().join("b.html");
    let args = |p: &std::path::Path| {
        let p = p.to_str().unwrap().to_string();
        vec![SEED000.to_string(), "--heads".into(), "2".into(), "--focus".into(), "2".into(), "--html".into(), p]
    };
    let stdout = run(&args(&a).iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    run(&args(&b).iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    let (ha, hb) = (std::fs::read_to_string(&a).unwrap(), std::fs::read_to_string(&b).unwrap());
    assert_eq!(ha, hb, "two runs wrote different bytes");
    // Written in addition to the normal output.
    assert!(String::from_utf8(stdout).unwrap().contains("layers.0.attn.weights · head 1"));
    for remote in ["http://", "https://", "src=", "<link rel=\"stylesheet\"", "@import"] {
        assert!(!ha.contains(remote), "the page refers to {remote}");
    }
    assert!(ha.contains("<section id=\"focus\">") && ha.contains("focus &quot;are&quot; (position 2)"));
    // The walkthrough keeps its lines (a line break is not a control character to show).
    let focus = &ha[ha.find("<section id=\"focus\">").unwrap()..ha.find("<section id=\"steps\">").unwrap()];
    assert!(!focus.contains("\\n") && focus.lines().count() > 10, "{focus}");
    assert!(ha.contains("layers.0.ffn.hidden") && ha.contains("id=\"data\""));
}

#[test]
fn html_of_a_real_model_has_step_tables_only_when_steps_asks() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("p.html");
    let p = page.to_str().unwrap();
    run(&["the cats played", "--model", "fixtures/tiny-bert", "--html", p], &[]);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("<table") && html.contains("step tables are left out"));
    run(&["the cats played", "--model", "fixtures/tiny-bert", "--steps", "q", "--html", p], &[]);
    let html = std::fs::read_to_string(&page).unwrap();
    // Two layers of two heads of q, one table each.
    assert_eq!(html.matches("<table").count(), 4, "{html}");
}

#[test]
fn heatmap_fits_the_width_and_notes_cut_labels() {
    let sentence = "the extraordinarily unbelievable tokenization of internationalization happened today";
    for width in ["40", "80", "120"] {
        for color in ["never", "always"] {
            let args = [sentence, "--heads", "2", "--format", "heatmap", "--width", width];
            let out = String::from_utf8(run(&with(&args, &["--color", color]), &[("COLORTERM", "24bit")])).unwrap();
            let w: usize = width.parse().unwrap();
            for line in out.lines() {
                let visible: String = strip_ansi(line);
                assert!(visible.chars().count() <= w, "--width {width} --color {color}: {visible:?}");
            }
            assert!(out.contains("labels cut to fit") && out.contains("internationalization"), "{out}");
            assert_eq!(out.contains("\x1b["), color == "always");
            if width == "40" {
                assert!(out.contains("keys 0–"), "no key blocks at --width 40");
            }
        }
    }
}

#[test]
fn heatmap_of_minilm_words() {
    let args = ["my shoes are small, my feet are big.", "--model", MINILM, "--format", "heatmap", "--color", "never"];
    let out = String::from_utf8(run(&with(&args, &["--layer", "5", "--merge-pieces"]), &[])).unwrap();
    let heads: std::collections::BTreeSet<&str> =
        out.lines().filter_map(|l| l.strip_prefix("layers.5.attn.weights · head ")).map(|l| &l[..2]).collect();
    assert_eq!(heads.len(), 12, "{heads:?}");
    assert!(out.contains("view: word pieces"), "{out}");
}

#[test]
fn focus_fits_the_width() {
    for width in ["40", "80"] {
        let args = [SEED000, "--heads", "2", "--causal", "--focus", "2", "--explain", "--steps", "tokens"];
        let out = String::from_utf8(run(&with(&args, &["--width", width]), &[])).unwrap();
        let w: usize = width.parse().unwrap();
        for line in out.lines() {
            assert!(line.chars().count() <= w, "--width {width}: {line:?}");
        }
        // At 40 columns the softmax table is split in two, the second starting at "− max".
        assert_eq!(out.contains("key j   ┆   − max"), w == 40, "{out}");
    }
}

#[test]
fn heatmap_draws_the_weights_whatever_steps_says() {
    let out =
        String::from_utf8(run(&[SEED000, "--steps", "q", "--format", "heatmap", "--color", "never"], &[])).unwrap();
    assert!(out.contains("layers.0.attn.weights · head 0"), "{out}");
    assert!(!out.contains("attn.q"), "{out}");
    // With --focus the walkthrough follows the maps.
    let out =
        String::from_utf8(run(&[SEED000, "--format", "heatmap", "--focus", "feet", "--color", "never"], &[])).unwrap();
    let (maps, walk) = out.split_once("focus \"feet\" (position 5)").expect("no walkthrough");
    assert!(maps.contains("layers.0.attn.weights · head 0") && walk.contains("= context"), "{out}");
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::new();
    let mut esc = false;
    for c in s.chars() {
        match (esc, c) {
            (false, '\x1b') => esc = true,
            (true, 'm') => esc = false,
            (true, _) => {}
            (false, c) => out.push(c),
        }
    }
    out
}

#[test]
fn values_json_is_what_the_heatmap_shows() {
    // The JSON views agree with the heatmap cells at the shown precision.
    let args = [SEED000, "--heads", "2", "--average-heads", "--precision", "3"];
    let doc = trace_json(&args);
    let values = flat(&doc["views"]["maps"][0]["values"]);
    let out = String::from_utf8(run(&with(&args, &["--format", "heatmap", "--color", "never"]), &[])).unwrap();
    let row0 = out.lines().find(|l| l.starts_with("0 my")).unwrap();
    let cells: Vec<String> =
        row0.split_whitespace().skip(2).map(|c| c.trim_start_matches(['░', '▒', '▓', '█']).to_string()).collect();
    let want: Vec<String> = values[..8].iter().map(|v| format!("{v:.3}")).collect();
    assert_eq!(cells, want);
    assert!(out.contains("view: mean over heads 0–1."));
}
