//! Hostile input, round two (issue 19): each class of mishandled input, fixed at its root,
//! with one or more examples. Refusals are one short line, exit 1 or 2, nothing on stdout, no
//! panic and no file left behind; valid edge cases exit 0 with every line within --width and
//! no raw control byte.

use crate::common::{cmd, root};
use std::io::Write;
use std::process::Output;

/// Runs attn-trace with `args` and, if given, `stdin`.
pub fn run(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_attn-trace"));
    c.args(args).stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
    c.stderr(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or_default()).unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

/// A refusal: exit 1 or 2, a short message naming `fragment`, nothing on stdout, no panic.
pub fn refused(out: &Output, fragment: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(matches!(out.status.code(), Some(1 | 2)), "exit {:?}: {err}", out.status.code());
    assert!(out.stdout.is_empty(), "stdout: {}", String::from_utf8_lossy(&out.stdout));
    assert!(err.contains(fragment), "expected {fragment:?} in {err:?}");
    assert!(!err.contains("panicked") && !err.contains("RUST_BACKTRACE"), "{err}");
    assert!(err.lines().count() <= 4 && err.len() < 2500, "{} bytes on stderr: {err}", err.len());
}

/// A success whose every line fits `width` and holds no control byte but the newline.
fn clean(out: &Output, width: usize) -> String {
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    for line in text.lines() {
        assert!(line.chars().count() <= width, "a line of {} > {width}: {line:?}", line.chars().count());
        assert!(!line.chars().any(|c| c.is_control()), "a raw control character: {line:?}");
    }
    text
}

#[test]
fn control_characters_are_shown_escaped_in_every_text_view() {
    // ESC sequences that recolour and retitle a terminal, BEL and NUL, from stdin.
    let sentence = b"my \x1b[31mshoes\x1b[0m are \x07small \x1b]0;pwned\x07 x\x00y";
    for args in [
        vec!["-", "--heads", "2", "--max-len", "12"],
        vec!["-", "--heads", "2", "--max-len", "12", "--format", "heatmap", "--color", "never"],
        vec!["-", "--heads", "2", "--max-len", "12", "--focus", "1", "--explain"],
        vec!["-", "--heads", "2", "--max-len", "12", "--merge-pieces"],
    ] {
        let text = clean(&run(&args, Some(sentence)), 80);
        assert!(text.contains("\\u{1b}"), "{args:?}: the escape is not shown: {text}");
    }
    // JSON keeps the exact strings (escaped as JSON).
    let out = run(&["-", "--format", "json", "--max-len", "12"], Some(sentence));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["input"]["tokens"][1], "\u{1b}[31mshoes\u{1b}[0m");
    // Errors quote input too: a focus word with an escape sequence.
    let out = run(&["my shoes", "--focus", "\u{1b}[2J"], None);
    refused(&out, "\\u{1b}[2J");
    assert!(!out.stderr.contains(&0x1b), "a raw ESC on stderr");
}

#[test]
fn huge_tokens_and_values_stay_within_the_width() {
    // A 1 MB token (from stdin: one argument may not be that long).
    let sentence = format!("my {} shoes", "x".repeat(1 << 20));
    clean(&run(&["-", "--focus", "1", "--explain"], Some(sentence.as_bytes())), 80);
    clean(&run(&["-", "--focus", "1", "--explain", "--width", "40"], Some(sentence.as_bytes())), 40);
    // Values near f32's limits at 12 decimals: each number is wider than a short line.
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("m.json");
    std::fs::write(&m, "[[3e37, -2e37, 1e-30, 7], [1e36, 5e36, -3e37, 2e35], [1, 2, 3, 4]]").unwrap();
    let m = m.to_str().unwrap();
    let out = run(&["--input", m, "--focus", "0", "--explain", "--precision", "12", "--width", "40"], None);
    clean(&out, 40);
}

#[test]
fn messages_quote_a_short_prefix() {
    let name = "q".repeat(10_000);
    let out = run(&["my shoes", "--steps", &name], None);
    refused(&out, "unknown step");
    assert!(out.stderr.len() < 1500, "{} bytes on stderr", out.stderr.len());
    refused(&run(&["my shoes", "--focus", &name], None), "(10000 characters)");
}

#[test]
fn weight_files_that_say_a_thing_twice_or_hold_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let w = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let layer = r#""layers.0.attn.q_proj.weight": [[1, 0], [0, 1]], "layers.0.attn.k_proj.weight": [[1, 0], [0, 1]],
        "layers.0.attn.v_proj.weight": [[1, 0], [0, 1]], "layers.0.attn.out_proj.weight": [[1, 0], [0, 1]],
        "layers.0.ffn.linear1.weight": [[1, 0], [0, 1]], "layers.0.ffn.linear1.bias": [0, 0],
        "layers.0.ffn.linear2.weight": [[1, 0], [0, 1]], "layers.0.ffn.linear2.bias": [0, 0]"#;
    let table = r#""embed.token.weight": [[1, 2], [3, 4]]"#;
    let ok = w("ok.json", &format!("{{{table}, {layer}}}"));
    assert!(run(&["a b", "--weights", &ok], None).status.success());
    let twice = w("twice.json", &format!("{{{table}, {table}, {layer}}}"));
    refused(&run(&["a b", "--weights", &twice], None), "appears twice");
    let both =
        w("both.json", &format!(r#"{{{table}, "embed": {{"token": {{"weight": [[1, 2], [3, 4]]}}}}, {layer}}}"#));
    refused(&run(&["a b", "--weights", &both], None), "embed.token.weight is given twice");
    let empty_q =
        layer.replace(r#""layers.0.attn.q_proj.weight": [[1, 0], [0, 1]]"#, r#""layers.0.attn.q_proj.weight": [[]]"#);
    let zero = w("zero.json", &format!("{{{table}, {empty_q}}}"));
    refused(&run(&["a b", "--weights", &zero], None), "--weights");
    let scalar = w(
        "scalar.json",
        &format!(r#"{{"embed.token.weight": [[1, 2], [3, 4]], {}}}"#, layer.replace("[[1, 2], [3, 4]]", "5")),
    );
    let out = run(&["a b", "--weights", &scalar], None);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
}

#[test]
fn a_diff_input_with_one_step_twice_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.json");
    std::fs::write(&a, r#"{"layers.0.attn.weights": [[[1.0]]], "layers.0.attn.weights": [[[0.5]]]}"#).unwrap();
    let b = dir.path().join("b.json");
    std::fs::write(&b, r#"{"layers.0.attn.weights": [[[1.0]]]}"#).unwrap();
    refused(&run(&["diff", a.to_str().unwrap(), b.to_str().unwrap()], None), "appears twice");
}

#[test]
fn a_model_config_with_a_negative_eps_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for f in ["config.json", "model.safetensors", "tokenizer.json", "vocab.txt"] {
        std::fs::copy(root().join("fixtures/tiny-bert").join(f), dir.path().join(f)).unwrap();
    }
    let cfg = dir.path().join("config.json");
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&cfg).unwrap()).unwrap();
    v["layer_norm_eps"] = serde_json::json!(-1e-12);
    std::fs::write(&cfg, v.to_string()).unwrap();
    refused(&run(&["my shoes", "--model", dir.path().to_str().unwrap()], None), "layer_norm_eps");
}

#[test]
fn a_full_stdout_is_a_failure_not_a_panic() {
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full");
    let Ok(full) = full else { return };
    for args in [vec!["--completions", "bash"], vec!["--help"], vec!["--man"], vec!["my shoes"]] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_attn-trace"))
            .args(&args)
            .stdout(full.try_clone().unwrap())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(!err.contains("panicked") && err.lines().count() == 1, "{args:?}: {err}");
    }
}

#[test]
fn sizes_above_the_memory_the_process_has_are_refused_not_aborted() {
    // Under a 1.5 GB address-space limit, a 12 GiB run within --max-memory is refused.
    let bin = env!("CARGO_BIN_EXE_attn-trace");
    let out = std::process::Command::new("sh")
        .args(["-c", &format!("ulimit -v 1500000; exec {bin} 'a b c' --d-model 20000 --max-memory 100GiB")])
        .output()
        .unwrap();
    refused(&out, "available to this process");
}

#[test]
fn a_drawing_too_big_for_memory_is_refused_and_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("big.svg");
    let words: Vec<String> = (0..3000).map(|i| format!("w{i}")).collect();
    let out =
        run(&[&words.join(" "), "--max-len", "3000", "--max-memory", "2GiB", "--svg", svg.to_str().unwrap()], None);
    refused(&out, "--svg/--html");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "a file was left behind");
}

#[test]
fn files_are_whole_or_absent() {
    let dir = tempfile::tempdir().unwrap();
    // A folder that does not exist: an error, and nothing left anywhere.
    let missing = dir.path().join("no/such/dir/t.safetensors");
    refused(&run(&["my shoes", "--save-trace", missing.to_str().unwrap()], None), "--save-trace");
    // Two runs writing one path at once leave one run's whole file, and no temporary file.
    let path = dir.path().join("t.safetensors");
    let p = path.to_str().unwrap();
    let children: Vec<_> = [("my shoes are small", "1"), ("my feet are big and my shoes are small", "2")]
        .iter()
        .flat_map(|(s, h)| (0..3).map(move |_| (s.to_string(), h.to_string())))
        .map(|(s, h)| {
            std::process::Command::new(env!("CARGO_BIN_EXE_attn-trace"))
                .args([
                    &s,
                    "--heads",
                    &h,
                    "--max-len",
                    "12",
                    "--steps",
                    "weights",
                    "--save-steps",
                    "weights",
                    "--save-trace",
                    p,
                ])
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let steps = crate::common::read_safetensors(&path);
    let shape = &steps["layers.0.attn.weights"].0;
    assert!(shape == &[1, 4, 4] || shape == &[2, 9, 9], "a mix of two runs: {shape:?}");
    assert_eq!(steps.len(), 1);
    let names: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().to_string()).collect();
    assert_eq!(names, ["t.safetensors"], "temporary files left: {names:?}");
}

#[test]
fn a_number_beyond_f64_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("big.json");
    std::fs::write(&p, r#"{"embed.token.weight": [[1e400, 2]]}"#).unwrap();
    refused(&run(&["a b", "--weights", p.to_str().unwrap()], None), "number out of range at line 1 column 30");
}

/// Inputs found by reading the readers after a fuzzing round (fixtures/fuzz): a ragged JSON
/// array claiming a huge shape (a capacity overflow, or an 200 GB reservation), an npz of 10⁹
/// zero-width strings, and an empty TransformerLens tensor claiming 2^62 rows (an endless
/// loop). Each is refused in one line, under a 1.5 GB address-space limit and a time limit.
#[test]
fn diff_refuses_the_readers_hostile_files() {
    let dir = tempfile::tempdir().unwrap();
    let reference = dir.path().join("r.json");
    let out = cmd().args(["my shoes", "--format", "json"]).output().unwrap();
    std::fs::write(&reference, &out.stdout).unwrap();
    let bin = env!("CARGO_BIN_EXE_attn-trace");
    for name in [
        "diff_json_capacity_overflow.json",
        "diff_json_capacity.json",
        "diff_npz_u0.npz",
        "diff_st_swap_hang.safetensors",
        "diff_st_swap_hang2.safetensors",
    ] {
        let file = root().join("fixtures/fuzz").join(name);
        let script =
            format!("ulimit -v 1500000; exec timeout 20 {bin} diff {} {}", reference.display(), file.display());
        let out = std::process::Command::new("sh").args(["-c", &script]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(matches!(out.status.code(), Some(1 | 2)), "{name}: exit {:?}: {err}", out.status.code());
        assert!(!err.contains("panicked") && err.lines().count() <= 4, "{name}: {err}");
    }
}

#[test]
fn skipping_draws_before_every_layer_is_bounded_in_all() {
    let out = run(&["a", "--skip-draws", "ffn=4294967296", "--layers", "200", "--d-model", "1"], None);
    refused(&out, "draws in all");
}
