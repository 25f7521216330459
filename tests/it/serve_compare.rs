//! `attn-trace serve --compare-with B` (docs/SERVE.md): `POST /api/compare` answers the page
//! `attn-trace compare PROMPT --model A --model B --html FILE` writes, byte for byte; a
//! request's options are checked as a comparison's (and still name no file); a server with no
//! reference says how to start one; a reference that cannot be set against the server's model
//! is refused at start.

use crate::common::{cmd, refused_output, root};
use crate::serve::{error_of, Server};

fn path(p: &str) -> String {
    root().join(p).to_string_lossy().into_owned()
}

fn compare(server: &Server, args: &[&str]) -> (u16, Vec<u8>) {
    let body = serde_json::json!({ "args": args }).to_string();
    server.send("POST", "/api/compare", &[("Content-Type", "application/json")], body.as_bytes())
}

#[test]
fn a_comparison_answers_the_command_lines_page_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (path("fixtures/gguf/tiny-llama.gguf"), path("fixtures/gguf/tiny-llama-f32.gguf"));
    let server = Server::serving(&["--model", &a], &["--compare-with", &b], dir.path());
    let file = dir.path().join("cli.html");
    for args in [&["Hello world"][..], &["Hello world", "--threshold", "1e-2", "--top", "3"]] {
        let (status, page) = compare(&server, args);
        assert_eq!(status, 200, "{args:?}: {}", String::from_utf8_lossy(&page));
        let html = file.to_string_lossy();
        let out =
            cmd().arg("compare").args(args).args(["--model", &a, "--model", &b, "--html", &html]).output().unwrap();
        assert!(matches!(out.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(page == std::fs::read(&file).unwrap(), "{args:?}: the page differs from the command line's");
    }
    let (_, page) = server.send("GET", "/", &[], b"");
    let reference = serde_json::to_string(&b).unwrap();
    assert!(String::from_utf8(page).unwrap().contains(&reference), "the page names the reference model");
    for (args, want) in [
        (&["Hello", "--steps", "weights"][..], "--steps: it does not apply to compare"),
        (&["Hello", "--html", "x.html"], "--html: not in a request to the server"),
        (&["Hello", "--model", "x.gguf"], "--model: not in a request to the server"),
        (&["Hello", "--threshold", "nan"], "--threshold"),
    ] {
        let (status, body) = compare(&server, args);
        assert_eq!(status, 400, "{args:?}");
        assert!(error_of(&body).contains(want), "{args:?}: {}", error_of(&body));
    }
    assert!(!dir.path().join("x.html").exists(), "a request names no file");
    assert!(server.stop().success());

    let plain = Server::serving(&["--model", &a], &[], dir.path());
    let (status, body) = compare(&plain, &["Hello"]);
    assert_eq!(status, 404);
    assert!(error_of(&body).contains("start it with --compare-with MODEL"), "{}", error_of(&body));
    assert!(plain.stop().success());
}

#[test]
fn a_reference_that_cannot_be_compared_is_refused_at_start() {
    let (a, other) = (path("fixtures/gguf/tiny-llama.gguf"), path("fixtures/gguf/tiny-qwen2-f32.gguf"));
    let out = cmd().args(["serve", "--port", "0", "--model", &a, "--compare-with", &other]).output().unwrap();
    let line = refused_output(&out, "serve --compare-with another family", "--compare-with");
    assert!(line.contains("different architectures"), "{line}");
}
