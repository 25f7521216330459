//! Hostile input, round four (issue 48), class 4: files passed as analysis inputs. A steering
//! vector (`--steer L:FILE`, `FILE#NAME[ROW]`) here; the traces `diff` reads and the archives
//! in `hostile_inputs_archives.rs`; a device, FIFO, folder or loop given to any option that
//! reads a file in `hostile_inputs_paths.rs`. Every case is refused in one line, exit 2,
//! nothing on stdout, no file left behind, under an address-space limit (so an allocation the
//! file cannot justify fails the test) and a time limit (so a hang does).

use crate::common::refused_output;
use std::path::{Path, PathBuf};
use std::process::Output;

/// attn-trace with `args` under a 1.5 GB address-space limit and 30 s, RUST_BACKTRACE=1 (so a
/// panic shows as many lines, never as one).
pub(super) fn bounded(args: &[&str]) -> Output {
    let bin = env!("CARGO_BIN_EXE_attn-trace");
    let quoted: Vec<String> = args.iter().map(|a| format!("'{}'", a.replace('\'', "'\\''"))).collect();
    let script = format!("ulimit -v 1500000; exec timeout 30 {bin} {}", quoted.join(" "));
    std::process::Command::new("sh").args(["-c", &script]).env("RUST_BACKTRACE", "1").output().unwrap()
}

/// A refusal of `args` in one line naming `fragment`: exit 2, empty stdout, no panic.
pub(super) fn refuses(args: &[&str], fragment: &str) {
    let err = refused_output(&bounded(args), args, fragment);
    assert!(!err.contains("panicked"), "{err}");
}

/// The file `name` in `dir` holding `bytes`.
pub(super) fn file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// A FIFO named `name` in `dir`, which nobody writes to.
pub(super) fn fifo(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    assert!(std::process::Command::new("mkfifo").arg(&p).status().unwrap().success());
    p
}

/// An `.npy` file: `header` (the dict) padded as numpy pads it, then `data`.
pub(super) fn npy(header: &str, data: &[u8]) -> Vec<u8> {
    let mut h = header.to_string();
    while !(10 + h.len() + 1).is_multiple_of(64) {
        h.push(' ');
    }
    h.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(data);
    out
}

/// The header of a C-ordered array of `descr` and `shape` (Python's tuple text, e.g. `(4,)`).
pub(super) fn header(descr: &str, shape: &str) -> String {
    format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}")
}

/// `n` little-endian f32s of value `x`.
pub(super) fn floats(n: usize, x: f32) -> Vec<u8> {
    (0..n).flat_map(|_| x.to_le_bytes()).collect()
}

/// A safetensors file from its header's JSON text (padded to 8 bytes) and data.
pub(super) fn safetensors(header: &str, data: &[u8]) -> Vec<u8> {
    let mut h = header.as_bytes().to_vec();
    while !h.len().is_multiple_of(8) {
        h.push(b' ');
    }
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&h);
    out.extend_from_slice(data);
    out
}

/// `--steer 0:SPEC` on the toy model (d_model 4), saving a trace that must not appear.
fn steer_refused(dir: &Path, spec: &str, fragment: &str) {
    let saved = dir.join("never.npz");
    let arg = format!("0:{spec}");
    refuses(&["my shoes", "--steer", &arg, "--save-trace", saved.to_str().unwrap()], fragment);
    assert!(!saved.exists(), "{spec}: a file was left behind");
}

#[test]
fn npy_steering_vectors_lying_or_wrong_are_refused_in_one_line() {
    let d = tempfile::tempdir().unwrap();
    let f4 = |shape: &str| header("<f4", shape);
    let mut nan = floats(4, 0.5);
    nan[4..8].copy_from_slice(&f32::NAN.to_le_bytes());
    let mut inf = floats(4, 0.5);
    inf[8..12].copy_from_slice(&f32::INFINITY.to_le_bytes());
    let fortran = "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 4), }";
    let twice = "{'descr': '<f4', 'descr': '<f8', 'fortran_order': False, 'shape': (4,), }";
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty.npy", Vec::new(), "the file is empty"),
        ("magic.npy", b"not numpy at all".to_vec(), "no \\x93NUMPY magic"),
        ("short.npy", npy(&f4("(4,)"), &floats(3, 1.0)), "claims shape [4] of float32 (16 bytes)"),
        ("huge.npy", npy(&f4("(1000000000000,)"), &floats(4, 1.0)), "claims shape [1000000000000]"),
        ("overflow.npy", npy(&f4("(4294967296, 4294967296, 16)"), &floats(4, 1.0)), "too large"),
        ("strings.npy", npy(&header("<U1000000000000", "(4,)"), &floats(4, 1.0)), "claims shape [4] of str"),
        ("negative.npy", npy(&f4("(-4,)"), &floats(4, 1.0)), "not a tuple of sizes"),
        ("twice.npy", npy(twice, &floats(4, 1.0)), "gives \"descr\" twice"),
        ("cut.npy", b"\x93NUMPY\x01\x00\xff\xff{'descr'".to_vec(), "header is cut short"),
        ("v3.npy", b"\x93NUMPY\x03\x00\xff\xff\xff\x7f{".to_vec(), "header is cut short"),
        ("trailing.npy", npy(&f4("(4,)"), &floats(5, 1.0)), "4 bytes follow the data"),
        ("fortran.npy", npy(fortran, &floats(8, 1.0)), "Fortran-ordered"),
        (
            "record.npy",
            npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4,), }", &[0; 16]),
            "structured",
        ),
        ("big.npy", npy(&header(">f4", "(4,)"), &floats(4, 1.0)), "big-endian"),
        ("complex.npy", npy(&header("<c8", "(4,)"), &[0; 32]), "<c8 is not read"),
        ("object.npy", npy(&header("|O", "(4,)"), &[0; 32]), "|O is not read"),
        ("ints.npy", npy(&header("<i8", "(4,)"), &[0; 32]), "holds int64 values; a steering vector is floats"),
        ("bools.npy", npy(&header("|b1", "(4,)"), &[1; 4]), "holds bool values"),
        ("words.npy", npy(&header("<U1", "(4,)"), &[65, 0, 0, 0].repeat(4)), "holds strings"),
        ("nan.npy", npy(&f4("(4,)"), &nan), "holds NaN at index 1"),
        ("inf.npy", npy(&f4("(4,)"), &inf), "holds inf at index 2"),
        ("cube.npy", npy(&f4("(2, 2, 4)"), &floats(16, 1.0)), "has shape [2, 2, 4]"),
        ("scalar.npy", npy(&f4("()"), &floats(1, 1.0)), "has shape []"),
        ("wide.npy", npy(&f4("(5,)"), &floats(5, 1.0)), "has 5 values, and the residual stream has 4"),
    ];
    for (name, bytes, fragment) in cases {
        let p = file(d.path(), name, &bytes);
        steer_refused(d.path(), p.to_str().unwrap(), fragment);
    }
    // float16 is a float: read, and steers.
    let half: Vec<u8> = [0.5f32; 4].iter().flat_map(|&x| half::f16::from_f32(x).to_le_bytes()).collect();
    let p = file(d.path(), "half.npy", &npy(&header("<f2", "(4,)"), &half));
    let out = bounded(&["my shoes", "--steer", &format!("0:{}", p.display()), "--steps", "none"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_saved_trace_as_steering_vector_is_checked_before_it_is_sliced() {
    let d = tempfile::tempdir().unwrap();
    let json = crate::common::trace_json(&["my shoes"]);
    let edited = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut doc = json.clone();
        let steps = doc["steps"].as_array_mut().unwrap();
        f(steps.iter_mut().find(|s| s["id"] == "layers.0.add_norm2.sum").unwrap());
        doc.to_string().into_bytes()
    };
    let step = "layers.0.add_norm2.sum";
    // Before: a shape larger than the values (or a ragged row) was trusted and the slice panicked.
    let cases: Vec<(&str, Vec<u8>, String, &str)> = vec![
        (
            "lie.json",
            edited(&|s| s["shape"] = serde_json::json!([3, 100])),
            format!("{step}[1]"),
            "does not match its values",
        ),
        (
            "lie2.json",
            edited(&|s| s["shape"] = serde_json::json!([1u64 << 62, 1u64 << 62])),
            format!("{step}[1]"),
            "does not match",
        ),
        (
            "ragged.json",
            edited(&|s| s["values"][1] = serde_json::json!([1.0])),
            format!("{step}[1]"),
            "ragged nested arrays",
        ),
        ("word.json", edited(&|s| s["values"][1][0] = "x".into()), format!("{step}[1]"), "\"x\" is not a number"),
        ("nan.json", edited(&|s| s["values"][1][0] = "nan".into()), format!("{step}[1]"), "holds NaN at index 0"),
        ("ok.json", json.to_string().into_bytes(), format!("{step}[7]"), "has 2 rows, no row 7"),
        (
            "ok2.json",
            json.to_string().into_bytes(),
            "layers.9.add_norm2.sum".into(),
            "has no tensor \"layers.9.add_norm2.sum\"",
        ),
        ("ok3.json", json.to_string().into_bytes(), String::new(), "names no tensor after #"),
        ("ok4.json", json.to_string().into_bytes(), format!("{step}[x]"), "[x] is not a row number"),
        ("ids.json", json.to_string().into_bytes(), "token_ids".into(), "has 2 values, and the residual stream has 4"),
        ("cut.json", json.to_string().as_bytes()[..200].to_vec(), format!("{step}[1]"), "not valid JSON"),
    ];
    for (name, bytes, spec, fragment) in cases {
        let p = file(d.path(), name, &bytes);
        steer_refused(d.path(), &format!("{}#{spec}", p.display()), fragment);
    }
    let text = json.to_string();
    let twice = text.replacen(&format!("\"id\":\"{step}\""), &format!("\"id\":\"{step}\",\"id\":\"{step}\""), 1);
    assert_ne!(twice, text);
    let p = file(d.path(), "twice.json", twice.as_bytes());
    steer_refused(d.path(), &format!("{}#{step}[1]", p.display()), "appears twice");
    let mut doubled = json.clone();
    let again = doubled["steps"].as_array().unwrap().iter().find(|s| s["id"] == step).unwrap().clone();
    doubled["steps"].as_array_mut().unwrap().push(again);
    let p = file(d.path(), "doubled.json", doubled.to_string().as_bytes());
    steer_refused(d.path(), &format!("{}#{step}[1]", p.display()), "holds \"layers.0.add_norm2.sum\" twice");
}

#[test]
fn safetensors_steering_vectors_are_checked_header_first() {
    let d = tempfile::tempdir().unwrap();
    let v = |dtype: &str, shape: &str, end: usize| {
        format!("\"v\":{{\"dtype\":\"{dtype}\",\"shape\":{shape},\"data_offsets\":[0,{end}]}}")
    };
    let f32s = floats(4, 0.5);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "twice.safetensors",
            safetensors(&format!("{{{},{}}}", v("F32", "[4]", 16), v("F32", "[4]", 16)), &f32s),
            "\"v\" appears twice",
        ),
        (
            "beyond.safetensors",
            safetensors(&format!("{{{}}}", v("F32", "[4]", 1600)), &f32s),
            "not a readable safetensors",
        ),
        (
            "huge.safetensors",
            safetensors(&format!("{{{}}}", v("F32", "[1000000000000]", 16)), &f32s),
            "not a readable safetensors",
        ),
        (
            "overflow.safetensors",
            safetensors(&format!("{{{}}}", v("F32", "[4294967296,4294967296,16]", 16)), &f32s),
            "overflow",
        ),
        ("ints.safetensors", safetensors(&format!("{{{}}}", v("I64", "[4]", 32)), &[0; 32]), "holds int64 values"),
        ("bools.safetensors", safetensors(&format!("{{{}}}", v("BOOL", "[4]", 4)), &[1; 4]), "holds bool values"),
        (
            "u16.safetensors",
            safetensors(&format!("{{{}}}", v("U16", "[4]", 8)), &[0; 8]),
            "U16, which attn-trace does not read",
        ),
        (
            "meta.safetensors",
            safetensors(&format!("{{\"__metadata__\":{{\"a\":\"1\",\"a\":\"2\"}},{}}}", v("F32", "[4]", 16)), &f32s),
            "\"a\" appears twice",
        ),
        (
            "trailing.safetensors",
            safetensors(&format!("{{{}}}", v("F32", "[4]", 16)), &floats(8, 0.5)),
            "not a readable safetensors",
        ),
    ];
    for (name, bytes, fragment) in cases {
        let p = file(d.path(), name, &bytes);
        steer_refused(d.path(), &format!("{}#v", p.display()), fragment);
    }
    // A header length of 2^63 in a 10-byte file: refused from the length alone.
    let mut lie = (1u64 << 63).to_le_bytes().to_vec();
    lie.extend_from_slice(b"{}");
    let p = file(d.path(), "lie.safetensors", &lie);
    steer_refused(d.path(), &format!("{}#v", p.display()), "not a readable safetensors");
    // bfloat16 is a float: read, and steers.
    let bf: Vec<u8> = [0.5f32; 4].iter().flat_map(|&x| half::bf16::from_f32(x).to_le_bytes()).collect();
    let p = file(d.path(), "bf.safetensors", &safetensors(&format!("{{{}}}", v("BF16", "[4]", 8)), &bf));
    let out = bounded(&["my shoes", "--steer", &format!("0:{}#v", p.display()), "--steps", "none"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}
