//! Tokens as text: byte-level BPE (a Hugging Face `tokenizer.json`, a GGUF `gpt2` vocabulary)
//! and SentencePiece byte fallback are shown as the text they spell, with `<0xE5>` for a byte
//! that is only part of a character; JSON keeps the exact token strings beside the texts.

use crate::common::*;
use crate::gguf::smollm2;

fn fixture(p: &str) -> String {
    root().join(p).to_str().unwrap().to_string()
}

fn run(args: &[&str]) -> String {
    let out = cmd().args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The tiny vocabularies have no token for é or 巴黎: their bytes are tokens of their own,
/// each shown as `<0x..>`, in the byte-level and the SentencePiece spelling alike.
#[test]
fn tiny_vocabularies_show_bytes_alike() {
    let bytes = ["<0xC3>", "<0xA9>", "<0xE5>", "<0xB7>", "<0xB4>", "<0xE9>", "<0xBB>", "<0x8E>"];
    for model in ["fixtures/decoders/gpt2", "fixtures/gguf/tiny-qwen2-f32.gguf", "fixtures/gguf/tiny-llama-spm.gguf"] {
        let doc = trace_json(&["un café 巴黎", "--model", &fixture(model), "--steps", "tokens"]);
        let texts: Vec<&str> = doc["input"]["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
        let tokens = doc["input"]["tokens"].as_array().unwrap();
        assert_eq!(texts.len(), tokens.len(), "{model}");
        let at = texts.iter().position(|t| *t == "<0xC3>").unwrap_or_else(|| panic!("{model}: {texts:?}"));
        assert_eq!(texts[at..at + 2], bytes[..2], "{model}");
        assert_eq!(texts[texts.len() - 6..], bytes[2..], "{model}");
        // A space is a space in the text, whatever the vocabulary spells it with (Ġ, ▁).
        assert!(texts.contains(&" ") && !texts.iter().any(|t| t.contains(['Ġ', '▁', 'Ã'])), "{model}: {texts:?}");
        let table = run(&["un café 巴黎", "--model", &fixture(model), "--steps", "tokens"]);
        assert!(table.contains("<0xB7>") && !table.contains('Ã') && !table.contains('å'), "{model}:\n{table}");
    }
}

/// JSON's other token lists keep the exact strings: the views' labels, the focus's keys.
#[test]
fn json_keeps_the_spelling_elsewhere() {
    let gpt2 = fixture("fixtures/decoders/gpt2");
    let doc = trace_json(&["my shoes", "--model", &gpt2, "--average-heads", "--focus", "shoes"]);
    assert_eq!(doc["views"]["labels"], serde_json::json!(["my", "Ġshoes"]));
    assert_eq!(doc["focus"]["key_tokens"], serde_json::json!(["my", "Ġshoes"]));
    assert_eq!(doc["input"]["texts"], serde_json::json!(["my", " shoes"]));
}

/// A control character a byte-level token decodes to is escaped in tables, as any other is.
#[test]
fn decoded_control_characters_are_escaped() {
    let gpt2 = fixture("fixtures/decoders/gpt2");
    let table = run(&["a\u{1b}[31mb\tc", "--model", &gpt2, "--steps", "tokens"]);
    assert!(table.contains("\\u{1b}") && table.contains("\\t") && !table.contains('\u{1b}'), "{table}");
    let doc = trace_json(&["a\u{1b}b", "--model", &gpt2, "--steps", "tokens"]);
    assert_eq!(doc["input"]["texts"][1], "\u{1b}", "JSON has the text itself");
}

/// A BERT WordPiece vocabulary has no byte form: no texts, labels as before.
#[test]
fn wordpiece_has_no_texts() {
    let doc = trace_json(&["embeddings", "--model", &fixture("fixtures/tiny-bert"), "--steps", "tokens"]);
    assert!(doc["input"].get("texts").is_none(), "{}", doc["input"]);
}

/// SmolLM2's vocabulary spells café as `ĠcafÃ©`: the labels, the focus, the predictions and
/// the page show ` café` (a leading space as `·`).
#[test]
fn a_real_vocabulary_reads_as_text() {
    let model = smollm2();
    let s = "un café à Paris 巴黎";
    let doc = trace_json(&[s, "--model", &model, "--steps", "tokens", "--top-k", "3"]);
    assert_eq!(doc["input"]["tokens"][1], "ĠcafÃ©");
    assert_eq!(doc["input"]["texts"][1], " café");
    assert_eq!(doc["input"]["texts"][2], " à");
    // 巴 is E5 B7 B4: the first byte comes with the space before it, the rest alone.
    assert_eq!(doc["input"]["texts"][4], " <0xE5>");
    assert_eq!(doc["predictions"][1]["text"], " café");
    for row in doc["predictions"].as_array().unwrap() {
        for p in row["top"].as_array().unwrap() {
            let (token, text) = (p["token"].as_str().unwrap(), p["text"].as_str().unwrap());
            assert!(!text.contains(['Ġ', 'Ċ']) && (text.is_ascii() || text != token), "{token:?} → {text:?}");
        }
    }
    let table = run(&[s, "--model", &model, "--steps", "tokens", "--top-k", "3"]);
    assert!(table.contains("·café") && table.contains("·<0xE5>") && !table.contains("Ã"), "{table}");
    // --focus finds the token by its text, by its label and by its spelling.
    for focus in ["café", "·café", "ĠcafÃ©"] {
        let f = trace_json(&[s, "--model", &model, "--focus", focus, "--layer", "0", "--head", "0"]);
        assert_eq!(f["focus"]["position"], 1, "--focus {focus}");
    }
    let dir = tempfile::tempdir().unwrap();
    let (page, svg) = (dir.path().join("p.html"), dir.path().join("p.svg"));
    let heatmap = run(&[
        s,
        "--model",
        &model,
        "--layer",
        "0",
        "--head",
        "0",
        "--format",
        "heatmap",
        "--html",
        page.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert!(heatmap.contains("·café") && !heatmap.contains('Ã'), "{heatmap}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("\"·café\"") && !html.contains("ĠcafÃ©"), "the page's labels");
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.contains(">·café<") && svg.contains("&lt;0xB7&gt;") && !svg.contains('Ã'), "the picture's labels");
}

/// The page's step tables (`--steps` asks for them with a model) show the `tokens` step, which
/// holds the spellings, by its labels, as the terminal's token table does.
#[test]
fn the_pages_token_table_shows_labels() {
    let gpt2 = fixture("fixtures/decoders/gpt2");
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("p.html");
    run(&["my shoes", "--model", &gpt2, "--steps", "tokens,weights", "--html", page.to_str().unwrap()]);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<td>my</td><td>·shoes</td>"), "the tokens step's cells");
    assert!(!html.contains('Ã') && !html.contains('Ġ'), "no spelling on the page");
}
