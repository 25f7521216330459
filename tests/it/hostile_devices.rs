//! Input files that are devices or pipes (issue 48): a file the options read whole — a raw
//! input matrix, a vocabulary, a weights file, a trace given to diff — has its size to justify
//! reading it; `/dev/zero` has none and never ends, and used to be read until memory ran out
//! (the Python module's process was killed). A character device is refused before a byte is
//! read, in one line, exit 2 (`sources::input_file`); a pipe that ends (`--input <(…)`,
//! standard input) is read as before.

use crate::common::refused;

#[test]
fn an_endless_device_is_refused_before_it_is_read() {
    let what = "it is a character device (such as /dev/zero or a terminal), not a file";
    for (args, fix) in [
        (&["--input", "/dev/zero"][..], "(pass the path of an existing, readable JSON file)"),
        (&["my shoes", "--vocab", "/dev/zero"][..], "(pass a readable UTF-8 vocabulary file)"),
        (&["my shoes", "--weights", "/dev/zero"][..], "(pass the path of an existing, readable weights file)"),
        (&["diff", "/dev/zero", "/dev/zero"][..], "(pass a trace file that exists and is readable)"),
    ] {
        let flag = args.iter().find(|a| a.starts_with("--")).map_or(String::new(), |f| format!("{f} "));
        let line = refused(args, what);
        assert_eq!(line, format!("attn-trace: {flag}/dev/zero: {what} {fix}\n"), "{args:?}");
    }
}

#[test]
fn a_pipe_that_ends_is_read() {
    let args = ["--input", "/dev/stdin", "--format", "json", "--steps", "input"];
    let out = crate::hostile::run(&args, Some(b"[[0.5, 0.4], [0.8, 0.6]]"));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["steps"][0]["values"], serde_json::json!([[0.5, 0.4], [0.8, 0.6]]));
}
