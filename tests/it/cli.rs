//! The command line: every flag does something visible, and every bad input gets one line
//! on stderr naming the problem and the fix, exit code 2, and nothing on stdout.

use crate::common::*;
use std::io::Write;

/// (args, fragment the one-line error must contain). Every case must exit 2.
const BAD: &[(&[&str], &str)] = &[
    (&[], "sentence: none was given"),
    (&[""], "sentence: it is empty"),
    (&["   \t "], "sentence: it is empty"),
    (&[",,,"], "no words are left"),
    (&["a b c", "--heads", "3"], "d_model 4 is not divisible by 3 heads"),
    (&["a b", "--d-model", "0"], "--d-model: must be at least 1"),
    (&["a b", "--heads", "0"], "--heads: must be at least 1"),
    (&["a b", "--layers", "0"], "--layers: must be at least 1"),
    (&["a b", "--d-ff", "0"], "--d-ff: must be at least 1"),
    (&["a b", "--d-k", "0"], "--d-k: must be at least 1"),
    (&["a b", "--max-len", "0"], "--max-len: must be at least 1"),
    (&["a b", "--d-model", "100000", "--d-ff", "100000000"], "above --max-output's 1.0 GiB"),
    (&["a b", "--d-model", "100000", "--d-ff", "100000000", "--max-output", "none"], "above the cap"),
    (&["a b", "--d-model", "18446744073709551615", "--max-output", "none"], "above the cap"),
    (&["a b c d e f g h i j k"], "it has 11 tokens but the learned position table has 10 rows"),
    (&["a b", "--steps", "softmax"], "unknown step \"softmax\""),
    (&["a b", "--steps", "layers.3.attn.q"], "names layer 3, but the model has 1"),
    (&["a b", "--layer", "1"], "--layer: layer 1 does not exist"),
    (&["a b", "--head", "1"], "--head: head 1 does not exist"),
    (&["a b", "--format", "xml"], "invalid value 'xml' for '--format <FORMAT>' [possible values: table, json"),
    (&["a b", "--init", "numpy"], "invalid value 'numpy' for '--init <INIT>'"),
    (&["a b", "--rand-layout", "diagonal"], "invalid value 'diagonal'"),
    (&["a b", "--heads", "two"], "invalid value 'two' for '--heads <N>'"),
    (&["a b", "--bogus-flag"], "unexpected argument '--bogus-flag'"),
    (&["a b", "c", "d", "--save-trace", "x.npz"], "--save-trace: it applies to one run, and several sentences make"),
    (&["a b", "--skip-draws", "ffn"], "--skip-draws: \"ffn\" is not POINT=N"),
    (&["a b", "--max-memory", "1KiB"], "above the cap of 1.0 KiB"),
    (&["a b", "--max-len", "-1"], "unexpected argument '-1'"),
    (&["a b", "--precision", "-2"], "unexpected argument '-2'"),
    (&["a b", "--layers", "1.5"], "invalid value '1.5' for '--layers <N>'"),
    (&["a b", "--scale", "nan"], "--scale: NaN is not a finite number"),
    (&["a b", "--eps", "inf"], "--eps: inf is not a finite, non-negative number"),
    (&["a b", "--heads", "2", "--heads", "2"], "cannot be used multiple times"),
    (&["a b", "--steps", ","], "--steps: the list is empty"),
    (&["a b", "--steps", "layers.x.attn.q"], "unknown step \"layers.x.attn.q\""),
    (&["a b", "--layers", "2", "--layer", "2"], "--layer: layer 2 does not exist; the model has 2"),
    (&["a b", "--d-model", "6", "--heads", "4"], "d_model 6 is not divisible by 4 heads"),
    (&["a b", "--positions", "rotary"], "invalid value 'rotary' for '--positions"),
    (&["a b", "--norm", "middle"], "invalid value 'middle' for '--norm"),
    (&["a b", "--activation", "swish"], "invalid value 'swish' for '--activation"),
    (&["a b", "--draw-order", "q,k"], "--draw-order"),
    (&["a b", "--skip-draws", "ffn=-3"], "is not POINT=N"),
    (&["a b", "--skip-draws", "decoder=3"], "is not POINT=N"),
    (&["a b", "--seed", "-99999999999999999999"], "--seed"),
    (&["a b", "--truncate"], "--truncate: it applies to real models"),
    (&["a b", "--color", "rainbow"], "invalid value 'rainbow' for '--color"),
    (&["a b", "--completions", "tcsh"], "invalid value 'tcsh' for '--completions"),
    (&["a b", "--max-memory", "12 parsecs"], "--max-memory"),
    (&["?!", "--remove-punctuation"], "no words are left after removing characters"),
    (&["a b", "--precision", "40"], "--precision"),
    (&["a b", "--width", "10"], "--width"),
    (&["a b", "--scale", "inf"], "--scale"),
    (&["a b", "--eps", "-1"], "--eps"),
    (&["a b", "--seed", "99999999999999999999999"], "--seed"),
    (&["a b", "--reseed", "token,bogus"], "--reseed: unknown point"),
    (&["a b", "--draw-order", "q,q,v"], "--draw-order"),
    (&["a b", "--max-memory", "lots"], "--max-memory"),
    (&["a b", "--unk", "<pad>"], "--unk: it only applies to a fixed vocabulary"),
    (&["a b", "--weights", "/nonexistent/w.safetensors"], "--weights /nonexistent/w.safetensors"),
    (&["a b", "--vocab", "/nonexistent/vocab.json"], "--vocab /nonexistent/vocab.json"),
    (&["a b", "--input", "/nonexistent/x.json"], "--input /nonexistent/x.json"),
];

/// [`refused`], in a line that starts with the program's name and holds no panic.
pub(crate) fn assert_usage_error(args: &[&str], fragment: &str) {
    let stderr = refused(args, fragment);
    assert!(!stderr.contains("panicked") && !stderr.contains("backtrace"), "attn-trace {args:?} panicked: {stderr}");
    assert!(stderr.starts_with("attn-trace: "), "{stderr}");
}

#[test]
fn bad_inputs_get_one_line_and_exit_2() {
    for (args, fragment) in BAD {
        assert_usage_error(args, fragment);
    }
}

fn write(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> String {
    let p = dir.path().join(name);
    std::fs::File::create(&p).unwrap().write_all(bytes).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn bad_weight_files() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.safetensors");
    cmd().args(["my shoes are small", "--heads", "2", "--save-weights", good.to_str().unwrap()]).assert().success();
    let bytes = std::fs::read(&good).unwrap();
    let truncated = write(&dir, "truncated.safetensors", &bytes[..bytes.len() / 2]);
    let garbage = write(&dir, "garbage.safetensors", b"\x05\x00\x00\x00\x00\x00\x00\x00hello");
    let empty = write(&dir, "empty.safetensors", b"");
    let bad_json = write(&dir, "bad.json", b"{\"embed.token.weight\": [[1, 2], [3]]}");
    let not_json = write(&dir, "not.json", b"{ nope");
    let missing = write(&dir, "missing.json", b"{\"layers.0.attn.q_proj.weight\": [[1,0],[0,1]], \"layers.0.attn.v_proj.weight\": [[1,0],[0,1]], \"layers.0.ffn.linear1.weight\": [[1,0]]}");
    let g = good.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["a b", "--weights", &truncated], "not a readable safetensors file"),
        (vec!["a b", "--weights", &garbage], "not a readable safetensors file"),
        (vec!["a b", "--weights", &empty], "not a readable safetensors file"),
        (vec!["a b", "--weights", &bad_json], "rows of different lengths"),
        (vec!["a b", "--weights", &not_json], "not valid JSON"),
        (vec!["a b", "--weights", &missing], "tensor embed.token.weight"),
        (vec!["my shoes are small", "--weights", g, "--d-model", "8"], "--d-model 8 contradicts"),
        (vec!["my shoes are small", "--weights", g, "--heads", "3"], "--heads 3 contradicts --weights"),
        (vec!["my shoes are small", "--weights", g, "--heads", "2", "--layers", "2"], "--layers 2 contradicts"),
        (vec!["my shoes are small big feet", "--weights", g, "--heads", "2"], "token id 4 is out of range"),
        (
            vec!["my shoes are small", "--weights", g, "--heads", "2", "--positions", "none"],
            "--positions none contradicts",
        ),
        (vec!["my shoes are small", "--weights", g, "--heads", "2", "--attn-bias"], "no projection biases"),
    ];
    for (args, frag) in cases {
        assert_usage_error(&args, frag);
    }
}

#[test]
fn weights_round_trip_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.safetensors");
    let w = w.to_str().unwrap();
    let args =
        ["my shoes are small, my feet are big.", "--heads", "2", "--layers", "2", "--attn-bias", "--format", "json"];
    let first = cmd().args(args).args(["--save-weights", w]).output().unwrap();
    let second = cmd()
        .args(["my shoes are small, my feet are big.", "--heads", "2", "--format", "json", "--weights", w])
        .output()
        .unwrap();
    assert!(first.status.success() && second.status.success());
    let a: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    let b: serde_json::Value = serde_json::from_slice(&second.stdout).unwrap();
    assert_eq!(a["steps"], b["steps"], "loading saved weights must reproduce the trace exactly");
    assert_eq!(b["config"]["init"]["kind"], "file");
}

#[test]
fn seed_001_weights_typed_by_hand() {
    // Notebook 001's single-head weights, as a person would type them (no FFN or norms given
    // → the file must name them; LayerNorms may be left out).
    let dir = tempfile::tempdir().unwrap();
    let json = r#"{
      "embed": {"token": {"weight": [[0,0,0,0],[0.1,0.2,0.3,0.4],[0.2,0.1,-0.1,0],[0.5,0.1,0,-0.2],[0.3,-0.1,0.4,0.1],[0.05,0.6,-0.2,0.1]]},
                "position": {"weight": [[0,0,0,0],[0.01,0.02,0.03,0.04],[0.02,0.01,-0.01,0],[0.03,0,0.01,-0.02],[0.04,-0.01,0.02,-0.01],[0.05,0.02,0,0.01],[0.06,0.03,-0.02,0.02],[0.07,0.01,0.01,0.03]]}},
      "layers.0.attn.q_proj.weight": [[0.5,0,0.5,0],[0,0.5,0,-0.5]],
      "layers.0.attn.k_proj.weight": [[0.4,-0.1,0.3,0],[-0.2,0.6,0.1,0.2]],
      "layers.0.attn.v_proj.weight": [[0.3,0.1,-0.2,0.2],[0.1,-0.3,0.4,0]],
      "layers.0.attn.out_proj.weight": [[1,0],[0,1],[0,0],[0,0]],
      "layers.0.ffn.linear1.weight": [[1,0,0,0]], "layers.0.ffn.linear1.bias": [0],
      "layers.0.ffn.linear2.weight": [[1],[0],[0],[0]], "layers.0.ffn.linear2.bias": [0,0,0,0]
    }"#;
    let w = write(&dir, "w001.json", json.as_bytes());
    let vocab = write(&dir, "vocab.json", br#"{"<pad>":0,"<bos>":1,"<eos>":2,"time":3,"flies":4,"fast":5}"#);
    let doc = trace_json(&[
        "Time flies fast",
        "--weights",
        &w,
        "--vocab",
        &vocab,
        "--lowercase",
        "--unk",
        "<pad>",
        "--bos",
        "<bos>",
        "--eos",
        "<eos>",
    ]);
    assert_eq!(doc["input"]["token_ids"], serde_json::json!([1, 3, 4, 5, 2]));
    let s = steps(&doc);
    // The notebook prints Q row 1 = [0.2700, 0.1400], scores row 0 = [0.0007, 0.0326, 0.0401,
    // -0.0361, 0.0092], and Z row 0 = [0.0912, 0.0094].
    let q = &s["layers.0.attn.q"].1;
    assert!(close(q[2], 0.27, 5e-5, 0.0) && close(q[3], 0.14, 5e-5, 0.0), "{q:?}");
    let sc = &s["layers.0.attn.scores"].1;
    for (got, want) in sc[..5].iter().zip([0.0007, 0.0326, 0.0401, -0.0361, 0.0092]) {
        assert!(close(*got, want, 5e-5, 0.0), "score {got} vs notebook {want}");
    }
    let z = &s["layers.0.attn.context"].1;
    assert!(close(z[0], 0.0912, 5e-5, 0.0) && close(z[1], 0.0094, 5e-5, 0.0), "{z:?}");
}

#[test]
fn broken_pipe_exits_quietly() {
    use std::process::{Command, Stdio};
    let bin = assert_cmd::cargo::cargo_bin("attn-trace");
    let mut child = Command::new(bin)
        .args(["a b c d e f g h", "--d-model", "64", "--heads", "4", "--max-len", "8", "--quiet"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    {
        use std::io::BufRead;
        let mut r = std::io::BufReader::new(child.stdout.take().unwrap());
        r.read_line(&mut first).unwrap();
    } // reader dropped: the pipe closes, like `| head -1`
    let out = child.wait_with_output().unwrap();
    assert!(first.starts_with("attn-trace: "));
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn flags_change_the_output() {
    let base = trace_json(&["my shoes are small"]);
    let c = &base["config"];
    assert_eq!(
        (c["d_model"].as_u64(), c["heads"].as_u64(), c["d_ff"].as_u64(), c["max_len"].as_u64()),
        (Some(4), Some(1), Some(8), Some(10))
    );
    for (args, key, want) in [
        (vec!["--d-model", "6", "--heads", "3"], "d_k", serde_json::json!(2)),
        (vec!["--d-k", "3"], "d_v", serde_json::json!(3)),
        (vec!["--d-ff", "5"], "d_ff", serde_json::json!(5)),
        (vec!["--layers", "2"], "layers", serde_json::json!(2)),
        (vec!["--positions", "sinusoidal"], "positions", serde_json::json!("sinusoidal")),
        (vec!["--causal"], "causal", serde_json::json!(true)),
        (vec!["--scale", "0.25"], "scale", serde_json::json!(0.25)),
        (vec!["--norm", "pre"], "norm", serde_json::json!("pre")),
        (vec!["--activation", "gelu"], "activation", serde_json::json!("gelu")),
        (vec!["--attn-bias"], "attn_bias", serde_json::json!(true)),
        (vec!["--no-ffn-bias"], "ffn_bias", serde_json::json!(false)),
        (vec!["--eps", "1e-12"], "eps", serde_json::json!(1e-12)),
    ] {
        let mut a = vec!["my shoes are small"];
        a.extend(args.iter());
        let doc = trace_json(&a);
        assert_eq!(doc["config"][key], want, "{args:?}");
        assert!(doc["steps"] != base["steps"], "{args:?} changed nothing");
    }
    for init in [
        vec!["--seed", "1"],
        vec!["--init", "torch-generic", "--seed", "5"],
        vec!["--reseed", "none"],
        vec!["--linear-init", "rand"],
        vec!["--draw-order", "v,k,q"],
    ] {
        let mut a = vec!["my shoes are small"];
        a.extend(init.iter());
        assert!(trace_json(&a)["steps"] != base["steps"], "{init:?} changed nothing");
    }
    // The table's length changes PyTorch's draws only in its last rows (docs/TORCH_RNG.md: a size that is not
    // a multiple of 16 redraws the final 16 values), so 8 tokens see it and 4 do not.
    let s8 = "my shoes are small, my feet are big.";
    let (a, b) = (trace_json(&[s8]), trace_json(&[s8, "--max-len", "12"]));
    assert_eq!(b["config"]["max_len"], 12);
    let pos = |d: &serde_json::Value| {
        d["steps"].as_array().unwrap().iter().find(|s| s["id"] == "embed.position").unwrap()["values"].clone()
    };
    assert_eq!(pos(&a)[0], pos(&b)[0]);
    assert!(pos(&a)[7] != pos(&b)[7], "--max-len changed nothing");
    // Token options.
    let t = trace_json(&[
        "My shoes, my feet.",
        "--lowercase",
        "--remove-punctuation",
        "--vocab-order",
        "sorted",
        "--bos",
        "<s>",
        "--eos",
        "</s>",
    ]);
    assert_eq!(t["input"]["tokens"], serde_json::json!(["<s>", "my", "shoes", "my", "feet", "</s>"]));
    // Sorted as the notebooks do: repeats keep their last index in sorted(words) (my → 2 + 2).
    assert_eq!(t["input"]["token_ids"], serde_json::json!([0, 4, 5, 4, 2, 1]));
    let t = trace_json(&["a,b c", "--remove", ""]);
    assert_eq!(t["input"]["tokens"], serde_json::json!(["a,b", "c"]));
}

#[test]
fn selection_flags() {
    let doc = trace_json(&[
        "my shoes are small",
        "--heads",
        "2",
        "--layers",
        "2",
        "--steps",
        "weights,output",
        "--layer",
        "1",
        "--head",
        "0",
    ]);
    let ids: Vec<&str> = doc["steps"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["layers.1.attn.weights", "output"]);
    assert_eq!(doc["steps"][0]["shape"], serde_json::json!([1, 4, 4]));
    assert_eq!(doc["steps"][0]["heads"], serde_json::json!([0]));
    let out = cmd().args(["my shoes are small", "--steps", "tokens", "--precision", "2"]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("shoes") && !text.contains("embed"));
}

#[test]
fn raw_input_matrix() {
    // Notebook 002's input matrix, with --scale 0.5 as its √d_in scaling.
    let dir = tempfile::tempdir().unwrap();
    let x = write(&dir, "x.json", b"[[0.5159,0.4220,0.5786,0.9455],[0.8057,0.6775,0.6087,0.6179],[0.6932,0.4354,0.0353,0.1908],[0.9268,0.5299,0.0950,0.5789],[0.9131,0.0275,0.1634,0.3009]]");
    let doc = trace_json(&["--input", &x, "--d-k", "3", "--scale", "0.5", "--attn-bias"]);
    assert_eq!(doc["input"]["tokens"], serde_json::json!(["x0", "x1", "x2", "x3", "x4"]));
    assert_eq!(doc["config"]["positions"], "none");
    assert_usage_error(&["one two", "--input", &x], "the matrix has 5 rows but the sentence has 2 words");
    let bad = write(&dir, "bad.json", b"[[1, 2], [3]]");
    assert_usage_error(&["--input", &bad], "rows of different lengths");
    let nan = write(&dir, "nan.json", b"[[1, \"nan\"]]");
    assert_usage_error(&["--input", &nan], "not a finite number");
}

#[test]
fn same_bytes_every_run() {
    let args = ["my shoes are small, my feet are big.", "--heads", "2", "--format", "json"];
    let a = cmd().args(args).output().unwrap().stdout;
    let b = cmd().args(args).output().unwrap().stdout;
    assert_eq!(a, b);
}

#[test]
fn help_and_version_succeed() {
    cmd().arg("--help").assert().success().stdout(predicates::str::contains("--heads"));
    cmd().arg("--version").assert().success();
    // The first line says what attn-trace traces now, as Cargo.toml's description does.
    for flag in ["-h", "--help"] {
        let out = String::from_utf8(cmd().arg(flag).output().unwrap().stdout).unwrap();
        let first = out.lines().next().unwrap();
        assert!(first.starts_with("Trace transformer encoders and decoders step by step"), "{flag}: {first}");
    }
    assert!(env!("CARGO_PKG_DESCRIPTION").starts_with("Trace transformer encoders and decoders step by step"));
}

#[test]
fn tables_fit_the_width() {
    for (args, width) in [
        (vec!["my shoes are small, my feet are big.", "--heads", "2"], 80usize),
        (vec!["life is short eat dessert first", "--d-model", "24", "--heads", "3", "--d-ff", "100"], 80),
        (vec!["a much longer sentence with many tokens in it for sure", "--max-len", "12"], 60),
        (vec!["supercalifragilisticexpialidocious word", "--d-model", "8"], 40),
        (
            vec!["my shoes are small, my feet are big.", "the cats played with a dog", "--model", "fixtures/tiny-bert"],
            80,
        ),
        (
            vec!["my shoes are small, my feet are big.", "the cats played with a dog", "--model", "fixtures/tiny-bert"],
            60,
        ),
    ] {
        let out = cmd().current_dir(root()).args(&args).args(["--width", &width.to_string()]).output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        for line in text.lines() {
            assert!(line.chars().count() <= width, "{args:?}: {} > {width}: {line}", line.chars().count());
        }
    }
    // The 8×8 attention matrix of the README fits 80 columns in one block.
    let out =
        cmd().args(["my shoes are small, my feet are big.", "--heads", "2", "--steps", "weights"]).output().unwrap();
    assert!(!String::from_utf8(out.stdout).unwrap().contains("columns"));
}

#[test]
fn sentence_from_stdin_and_file() {
    let doc: serde_json::Value = serde_json::from_slice(
        &cmd()
            .args(["-", "--format", "json", "--steps", "tokens"])
            .write_stdin("my shoes are small\n")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert_eq!(doc["input"]["tokens"], serde_json::json!(["my", "shoes", "are", "small"]));
    let dir = tempfile::tempdir().unwrap();
    let f = write(&dir, "s.txt", "my feet\n".as_bytes());
    let doc = trace_json(&["--file", &f, "--steps", "tokens"]);
    assert_eq!(doc["input"]["tokens"], serde_json::json!(["my", "feet"]));
    // Not UTF-8: the error names the first bad byte and its offset.
    let out = cmd().arg("-").write_stdin(&b"my sh\xffoes"[..]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("standard input: not UTF-8: byte 0xff at offset 5"));
    assert!(out.stdout.is_empty());
    let bad = write(&dir, "latin1.txt", b"caf\xe9");
    assert_usage_error(&["--file", &bad], "not UTF-8: byte 0xe9 at offset 3");
    assert_usage_error(&["--file", "/nonexistent/s.txt"], "--file /nonexistent/s.txt");
    assert_usage_error(&["a b", "--file", &f], "cannot be used with");
    // Empty standard input is an empty sentence.
    let out = cmd().arg("-").write_stdin("").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn completions_and_man_page_come_from_the_cli() {
    for shell in ["bash", "zsh", "fish"] {
        let out = cmd().args(["--completions", shell]).output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        // fish writes "-l heads", the others "--heads".
        assert!(text.contains("max-memory") && text.contains("heads") && text.contains("attn-trace"), "{shell}");
    }
    let out = cmd().arg("--man").output().unwrap();
    let man = String::from_utf8(out.stdout).unwrap();
    assert!(man.starts_with(".ie") && man.contains(".TH attn-trace 1") && man.contains("\\-\\-heads"));
}

#[test]
fn a_million_tokens_is_refused_before_allocating() {
    let sentence = vec!["w"; 1_000_000].join(" ");
    // (Its output, 51 TiB of tables, is refused first without `--max-output none`.)
    let out =
        cmd().args(["-", "--positions", "sinusoidal", "--max-output", "none"]).write_stdin(sentence).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("above the cap") && err.contains("--max-memory"), "{err}");
}

/// Inputs that once crashed a fuzz target (tests/fuzz), kept so the fix stays fixed.
#[test]
fn fuzz_regressions() {
    // An npz whose local zip header claims a 2.8 GB member (the central directory has the
    // true size, so the file is readable): reading it once reserved 2.8 GB and ran out of
    // memory under the fuzzer. Now it is read like any other trace, in well under a second.
    let f = root().join("fixtures/fuzz/diff_input-oom-zip-size.npz");
    let f = f.to_str().unwrap();
    // Under a 1.5 GB address-space limit the old reservation aborts (exit 134, checked by
    // reverting the fix); the fixed reader needs a few MB.
    let bin = assert_cmd::cargo::cargo_bin("attn-trace");
    let script = format!("ulimit -v 1500000; exec '{}' diff '{f}' '{f}'", bin.display());
    let out = std::process::Command::new("bash").args(["-c", &script]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("3 common steps within tolerance"));
}

#[test]
fn timings_go_to_stderr_and_leave_stdout_alone() {
    let args = ["my shoes are small", "--heads", "2", "--format", "json"];
    let plain = cmd().args(args).output().unwrap();
    let timed = cmd().args(args).arg("--timings").output().unwrap();
    assert!(timed.status.success());
    assert_eq!(plain.stdout, timed.stdout, "--timings changed stdout");
    let err = String::from_utf8(timed.stderr).unwrap();
    let line = err.lines().find(|l| l.starts_with("attn-trace: timings: ")).expect("a timings line");
    for stage in ["open", "parameters", "forward pass", "views", "render and write", "total", "peak resident memory"] {
        assert!(line.contains(stage), "{stage} missing from {line}");
    }
    // Each stage's figure is a number of milliseconds; the peak is in MiB (Linux).
    assert!(line.split(", ").all(|part| part.contains(" ms") || part.contains("MiB")), "{line}");
    let jsonl = cmd().args(["my shoes", "--format", "jsonl", "--timings"]).output().unwrap();
    assert!(String::from_utf8(jsonl.stderr).unwrap().contains("forward pass and streaming"));
}

/// `--timings` counts the forward pass's floating-point operations (`config::flops`) and
/// prints them with their rate and share of the f32 peak it measures after the run, one line
/// per counted stage, on stderr only. The counts are checked against the fixture's shape by
/// hand; the times are not checked.
#[test]
fn timings_count_the_forward_pass_and_its_share_of_the_peak() {
    let moe = root().join("fixtures/decoders/qwen2_moe");
    let model = moe.to_str().unwrap();
    // Qwen2-MoE fixture: d_model 64, 4 heads over 2 of width 16, 2 layers, 4 experts of 8
    // (top 2), a shared expert of 24, a tied head over 416 tokens. Per position and layer:
    // projections 64·(64 + 32 + 32) + 64·64 = 12288, router 256, two experts 2·3·64·8 = 3072,
    // shared 3·64·24 + its gate 64 = 4672, scores and context 4·n·32; the head 64·416.
    let flops = |n: u64, heads: u64| 2 * 2 * n * (12288 + 256 + 3072 + 4672 + 128 * n) + heads * 2 * n * 64 * 416;
    let counted = |args: &[&str]| -> (Vec<u8>, u64, String) {
        let plain = cmd().args(args).output().unwrap();
        let timed = cmd().args(args).arg("--timings").output().unwrap();
        assert!(timed.status.success(), "{}", String::from_utf8_lossy(&timed.stderr));
        assert_eq!(plain.stdout, timed.stdout, "--timings changed stdout: {args:?}");
        assert!(!String::from_utf8_lossy(&plain.stderr).contains("peak"), "no --timings, no lines");
        let err = String::from_utf8(timed.stderr).unwrap();
        let peak = err.lines().find(|l| l.starts_with("attn-trace: f32 peak: ")).expect("a peak line").to_string();
        assert!(peak.contains(" GFLOP/s (candle matmul 1024×1024×1024, "), "{peak}");
        let line = err.lines().find(|l| l.starts_with("attn-trace: flops: forward pass")).expect("a flops line");
        let count = line.split(": ").nth(3).and_then(|c| c.split(" FLOP in ").next());
        assert!(line.contains(" GFLOP/s, ") && line.ends_with(" of the f32 peak"), "{line}");
        assert_eq!(err.lines().filter(|l| l.starts_with("attn-trace: flops: ")).count(), 1, "{err}");
        (timed.stdout, count.unwrap().parse().unwrap(), line.to_string())
    };
    let sentence = "my shoes are small";
    let (json, all, _) = counted(&[sentence, "--model", model, "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let n = doc["input"]["tokens"].as_array().unwrap().len() as u64;
    assert_eq!(all, flops(n, 1), "the default run computes the logits for its predictions");
    let (_, bare, _) = counted(&[sentence, "--model", model, "--steps", "output", "--top-k", "0", "--format", "json"]);
    assert_eq!(bare, flops(n, 0), "no logits asked for, no head");
    let (_, lens, _) = counted(&[sentence, "--model", model, "--lens"]);
    assert_eq!(lens, flops(n, 3), "the logit lens reads every layer through the head");
    let (_, _, streamed) = counted(&[sentence, "--model", model, "--format", "jsonl"]);
    assert!(streamed.starts_with("attn-trace: flops: forward pass and streaming: "), "{streamed}");
    // The seed toy encoder (d_model 4, 2 heads of 2, ReLU FFN of 8, one layer), 4 tokens:
    // projections 2·4·64, scores and context 2·4·2·4·4, FFN 2·4·64.
    let (_, toy, _) = counted(&[sentence, "--heads", "2"]);
    assert_eq!(toy, 512 + 256 + 512);
}

/// The memory estimate follows what is recorded: a long input whose every step would exceed
/// the cap runs when only the output is recorded, and streams as jsonl.
#[test]
fn the_memory_estimate_counts_only_recorded_steps() {
    let words = "my shoes are small ".repeat(100);
    let base = [
        words.as_str(),
        "--d-model",
        "16",
        "--heads",
        "4",
        "--layers",
        "12",
        "--positions",
        "sinusoidal",
        "--max-memory",
        "64MiB",
    ];
    let all = cmd().args(base).args(["--steps", "all", "--format", "json"]).output().unwrap();
    assert_eq!(all.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&all.stderr).contains("above the cap of 64.0 MiB"));
    assert!(all.stdout.is_empty());
    let out = cmd().args(base).args(["--steps", "output", "--format", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let jsonl = cmd().args(base).args(["--steps", "all", "--format", "jsonl"]).output().unwrap();
    assert!(jsonl.status.success(), "{}", String::from_utf8_lossy(&jsonl.stderr));
}
