//! `--chat` against transformers' `apply_chat_template(..., add_generation_prompt=True)` and
//! the models' own tokenizers (fixtures/oracle/chat, made by fixtures/oracle/chat_oracle.py):
//! the rendered text and its token ids, byte for byte and id for id, for SmolLM2's GGUF (its
//! own template; ids from llama.cpp), Gemma 3's GGUF (which carries no template: a Gemma-format
//! one through --chat-template; ids from llama.cpp) and the qwen2 folder fixture (its
//! tokenizer_config.json's template; ids from transformers); the Jinja features templates use,
//! template by template; and the refusals, one line each.

use crate::common::*;
use attn_trace::params::Input;
use attn_trace::sources::chat::Template;
use attn_trace::{cli::Cli, cli::Env, settings::Settings};
use clap::Parser;
use serde_json::Value;
use std::path::Path;

fn fixture(name: &str) -> Value {
    let text = std::fs::read_to_string(root().join("fixtures/oracle/chat").join(name)).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

/// The command line of one oracle case: the user's turn, the model, `--chat`, its system turn.
fn case_args<'a>(case: &'a Value, model: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![case["user"].as_str().unwrap(), "--model", model, "--chat"];
    if let Some(system) = case["system"].as_str() {
        args.extend(["--system", system]);
    }
    args.extend(extra);
    args
}

/// Every case of a fixture through `sources::open` (as the command renders and tokenizes,
/// without the forward pass): the rendered text and the ids are the oracle's.
fn assert_cases(doc: &Value, model: &str, extra: &[&str]) {
    for case in doc["cases"].as_array().unwrap() {
        let args = case_args(case, model, extra);
        let cli = Cli::try_parse_from(std::iter::once("attn-trace").chain(args.iter().copied())).unwrap();
        let settings = Settings::from_cli(cli, &Env::default()).unwrap();
        let (loaded, _) = attn_trace::sources::open(&settings).unwrap_or_else(|e| panic!("{args:?}: {e:#}"));
        let chat = loaded.chat.as_ref().expect("--chat records its conversation");
        let name = case["name"].as_str().unwrap();
        assert_eq!(chat.rendered, case["rendered"].as_str().unwrap(), "{model} {name}: the rendered text");
        assert_eq!(chat.user, case["user"].as_str().unwrap());
        assert_eq!(chat.system.as_deref(), case["system"].as_str());
        // The tiny folder fixtures take 64 positions: `extra` may hold --truncate, and the
        // whole text's ids are then checked through the tokenizer the run built.
        let want = ids(&case["ids"]);
        let Input::Ids { ids: got, .. } = &loaded.input else { panic!("no ids") };
        let n = want.len().min(loaded.cfg.max_len);
        assert_eq!(got[..], want[..n], "{model} {name}: the ids");
        let whole = loaded.tokenizer.as_ref().unwrap().encode(chat.rendered.as_str(), false).unwrap();
        assert_eq!(whole.get_ids(), want, "{model} {name}: the whole text's ids");
    }
}

#[test]
fn smollm2_renders_its_gguf_template_as_transformers_and_tokenizes_as_llama_cpp() {
    let model = crate::gguf::smollm2();
    let doc = fixture("smollm2.json");
    assert_eq!(doc["template_from"], "the GGUF's tokenizer.chat_template");
    assert_cases(&doc, &model, &[]);
    // Through the command: the document records the conversation; the header shows the prompt.
    let case = &doc["cases"][1];
    let out = trace_json(&case_args(case, &model, &["--steps", "tokens"]));
    let chat = &out["input"]["chat"];
    assert_eq!(chat["rendered"], case["rendered"]);
    assert_eq!((&chat["system"], &chat["user"]), (&case["system"], &case["user"]));
    assert_eq!(out["input"]["sentence"], case["user"], "input.sentence stays the sentence as given");
    assert_eq!(ids(&out["input"]["token_ids"]), ids(&case["ids"]));
    assert_eq!(out["config"]["model"]["bos_added"], false, "the template's <|im_start|> is the only special");
    crate::export::assert_valid("--chat", &out);
}

#[test]
fn gemma3_renders_a_gemma_template_as_transformers_and_tokenizes_as_llama_cpp() {
    let model = root().join(".cache/models/gemma3/gemma-3-270m-q4_k_m.gguf");
    if !model.is_file() {
        eprintln!("skipped: {} is absent (tests/fetch-gemma3.sh fetches it)", model.display());
        return;
    }
    let model = model.to_str().unwrap();
    let doc = fixture("gemma3.json");
    // The file carries no template: the oracle checked, and so does the command.
    assert_eq!(doc["template_in_gguf"], false);
    let err = refused(&["Hi", "--model", model, "--chat"], "");
    assert_eq!(
        err,
        format!(
            "attn-trace: --chat: --model {model} has no chat template (its GGUF metadata has no \
             tokenizer.chat_template) (pass a template with --chat-template FILE, or drop --chat)\n"
        )
    );
    let template = root().join(doc["template_file"].as_str().unwrap());
    // Its SentencePiece tokenizer adds a BOS by default; the template's <bos> is the only one.
    assert_cases(&doc, model, &["--chat-template", template.to_str().unwrap()]);
}

#[test]
fn a_folders_template_renders_as_transformers_and_its_ids_are_transformers() {
    let model = root().join("fixtures/decoders/qwen2");
    let doc = fixture("qwen2.json");
    assert_cases(&doc, model.to_str().unwrap(), &["--truncate"]);
    // The list form of tokenizer_config.json's chat_template: "default" is the one used, and a
    // chat_template.jinja beside it wins over both, as transformers reads them.
    let dir = tempfile::tempdir().unwrap();
    let copy = copy_folder(&model, dir.path());
    let path = copy.join("tokenizer_config.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let template = config["chat_template"].clone();
    config["chat_template"] =
        serde_json::json!([{"name": "tool_use", "template": "tools"}, {"name": "default", "template": template}]);
    std::fs::write(&path, config.to_string()).unwrap();
    assert_cases(&doc, copy.to_str().unwrap(), &["--truncate"]);
    std::fs::write(copy.join("chat_template.jinja"), "[{{ messages[-1].content }}]").unwrap();
    let out = trace_json(&["my shoes", "--model", copy.to_str().unwrap(), "--chat", "--steps", "tokens"]);
    assert_eq!(out["input"]["chat"]["rendered"], "[my shoes]");
}

fn copy_folder(from: &Path, to: &Path) -> std::path::PathBuf {
    let dest = to.join(from.file_name().unwrap());
    std::fs::create_dir(&dest).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, dest.join(p.file_name().unwrap())).unwrap();
    }
    dest
}

/// Templates written to use what chat templates use of Jinja and Python render as transformers
/// renders them; a template's raise_exception is the one-line refusal.
#[test]
fn templates_render_as_transformers_jinja_environment() {
    let doc = fixture("templates.json");
    let tokens: Vec<(&'static str, String)> = ["bos_token", "eos_token"]
        .into_iter()
        .map(|k| (k, doc["special_tokens"][k].as_str().unwrap().to_string()))
        .collect();
    let (system, user) = (doc["system"].as_str().unwrap(), doc["user"].as_str().unwrap());
    let mut wrong = Vec::new();
    for case in doc["cases"].as_array().unwrap() {
        let t = Template::new(case["template"].as_str().unwrap().into(), "test".into(), tokens.clone());
        let got = t.render(Some(system), user).map_err(|e| format!("{e:#}"));
        let want = case["rendered"].as_str().unwrap();
        if got.as_deref() != Ok(want) {
            wrong.push(format!("{}: got {got:?}, transformers {want:?}", case["name"]));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let model = root().join("fixtures/decoders/qwen2");
    for case in doc["refusals"].as_array().unwrap() {
        let file = root().join(case["template_file"].as_str().unwrap());
        let (file, model) = (file.to_str().unwrap(), model.to_str().unwrap());
        let err = refused(&["Hi", "--model", model, "--chat", "--system", system, "--chat-template", file], "");
        assert_eq!(
            err,
            format!(
                "attn-trace: --chat: the chat template (--chat-template {file}) refused the conversation: {} \
                 (change the conversation (a model without a system turn takes no --system), or pass another \
                 template with --chat-template FILE)\n",
                case["message"].as_str().unwrap()
            )
        );
    }
}

#[test]
fn chat_refusals_name_the_problem_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let qwen2 = root().join("fixtures/decoders/qwen2");
    let qwen2 = qwen2.to_str().unwrap();
    let llama = root().join("fixtures/decoders/llama-gqa");
    let llama = llama.to_str().unwrap();
    let gguf = root().join("fixtures/gguf/tiny-llama.gguf");
    let gguf = gguf.to_str().unwrap();
    let bert = dir.path().join("bert");
    std::fs::create_dir(&bert).unwrap();
    std::fs::write(bert.join("config.json"), r#"{"model_type": "bert"}"#).unwrap();
    let bert = bert.to_str().unwrap();
    let broken = dir.path().join("broken.jinja");
    std::fs::write(&broken, "{% for m in messages %}{{ m.content }").unwrap();
    let broken = broken.to_str().unwrap();
    let html = dir.path().join("page.html");
    let html = html.to_str().unwrap();
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec!["Hi", "--model", llama, "--chat"],
            format!(
                "--chat: --model {llama} has no chat template (looked for chat_template.jinja, and chat_template \
                 in tokenizer_config.json) (pass a template with --chat-template FILE, or drop --chat)"
            ),
        ),
        (
            vec!["Hi", "--model", gguf, "--chat", "--html", html],
            format!(
                "--chat: --model {gguf} has no chat template (its GGUF metadata has no tokenizer.chat_template) \
                 (pass a template with --chat-template FILE, or drop --chat)"
            ),
        ),
        (
            vec!["Hi", "--chat"],
            "--chat: it renders a language model's chat template; the toy model has none (pass --model with a \
             language model, or drop --chat)"
                .into(),
        ),
        (
            vec!["Hi", "--model", bert, "--chat"],
            format!(
                "--chat: --model {bert} is an encoder (BERT): it has no chat template, and no turns to take (use a \
                 language model, or drop --chat)"
            ),
        ),
        (
            vec!["Hi", "--model", qwen2, "--chat", "--chat-template", broken],
            format!(
                "--chat: the chat template (--chat-template {broken}) does not render: syntax error: unexpected `}}`, \
                 expected end of variable block (in chat_template:1) (fix the template, or pass another with \
                 --chat-template FILE)"
            ),
        ),
        (
            vec!["Hi", "--model", qwen2, "--chat", "--stats", "--induction", "4"],
            "--chat with --induction: it replaces the sentence by random tokens (drop --chat or --induction)".into(),
        ),
    ];
    for (args, want) in cases {
        assert_eq!(refused(&args, ""), format!("attn-trace: {want}\n"), "{args:?}");
    }
    assert!(!Path::new(html).exists(), "a refused run leaves no file");
    // Clap ties --system and --chat-template to --chat.
    for flag in [["--system", "Be brief."], ["--chat-template", broken]] {
        let err = refused(&["Hi", "--model", qwen2, flag[0], flag[1]], "");
        assert!(err.contains("--chat") && err.contains("required"), "{err}");
    }
}

/// The table header shows the prompt that was tokenized, its newlines escaped; a batch
/// renders each line as its own conversation.
#[test]
fn the_header_shows_the_rendered_prompt_and_a_batch_renders_every_line() {
    let qwen2 = root().join("fixtures/decoders/qwen2");
    let qwen2 = qwen2.to_str().unwrap();
    let out = cmd().args(["my shoes", "--model", qwen2, "--chat", "--system", "Be brief."]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let header: String = text.lines().take_while(|l| !l.is_empty()).map(str::trim_start).collect::<Vec<_>>().join(" ");
    assert!(
        header.contains(
            "prompt (--chat): <|im_start|>system\\nBe brief.<|im_end|>\\n<|im_start|>user\\nmy \
             shoes<|im_end|>\\n<|im_start|>assistant\\n"
        ),
        "{header}"
    );
    let dir = tempfile::tempdir().unwrap();
    let batch = dir.path().join("lines.txt");
    std::fs::write(&batch, "my shoes\nthe capital\n").unwrap();
    let out = cmd()
        .args(["--batch", batch.to_str().unwrap(), "--model", qwen2, "--chat", "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    for user in ["my shoes", "the capital"] {
        assert!(text.contains(&format!("<|im_start|>user\\n{user}<|im_end|>")), "{user}: {text:.300}");
    }
}
