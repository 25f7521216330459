//! Hostile input, round four (issue 48), class 2: a chat template is code from a stranger (a
//! GGUF's `tokenizer.chat_template`, a folder's template, `--chat-template FILE`). A template
//! that loops, explodes, recurses, reaches for files or raises is refused in one line naming
//! where it came from, exit 2, nothing on stdout, no file left behind, within its budget;
//! a template file that is a directory, a device, a loop of links, binary or huge is refused
//! by name; the conversation's text is data, never template code, as in transformers, whose
//! `apply_chat_template` renders Llama 3, Llama 3.1, Phi-3 and Mistral's templates to the same
//! bytes (fixtures/oracle/chat/families.json, made by fixtures/oracle/chat_oracle.py).

use crate::common::{cmd, refused_output, root};
use attn_trace::sources::chat::Template;
use serde_json::Value;
use std::path::Path;

fn qwen2() -> String {
    root().join("fixtures/decoders/qwen2").to_string_lossy().into_owned()
}

/// Runs `--chat` on the qwen2 fixture with `extra` flags and an `--html` page in `dir`, and
/// checks the refusal: exit 2, one line naming `fragment`, empty stdout, no panic, no page.
fn refused_chat(dir: &Path, extra: &[&str], fragment: &str) -> String {
    refused_chat_of(&qwen2(), dir, extra, fragment)
}

/// [`refused_chat`] on the model `model`.
fn refused_chat_of(model: &str, dir: &Path, extra: &[&str], fragment: &str) -> String {
    let page = dir.join("page.html");
    let out = cmd()
        .args(["--model", model, "--chat", "--steps", "tokens", "--html"])
        .arg(&page)
        .args(extra)
        .output()
        .unwrap();
    let err = refused_output(&out, extra, fragment);
    assert!(!err.contains("panicked"), "{err}");
    assert!(!page.exists(), "{extra:?}: a refused run left {}", page.display());
    err
}

/// `template` written to a file in `dir` and refused through `--chat-template`, naming the
/// file and `fragment`.
fn refused_template(dir: &Path, template: &str, fragment: &str) -> String {
    let file = dir.join("t.jinja");
    std::fs::write(&file, template).unwrap();
    let err = refused_chat(dir, &["Hi", "--chat-template", file.to_str().unwrap()], fragment);
    let named = format!("the chat template (--chat-template {})", file.display());
    assert!(err.contains(&named), "{template:?}: the message does not name the template: {err}");
    err
}

/// Templates that loop, make gigabytes, recurse, or ask for what a chat template has no
/// business with: each refused in one line, within its budget.
#[test]
fn templates_that_loop_explode_or_recurse_are_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let budget = "ran out of its budget of";
    let cases: &[(&str, &str)] = &[
        ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", budget),
        ("{{ 'x' * 10**9 }}", budget),
        ("{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}", budget),
        ("{% set s = 'x' * 3000000 %}{{ s }}{{ s }}{{ s }}", budget),
        ("{{ range(10**9) | join }}", "range has too many elements"),
        ("{{ ('x' * 1000000).replace('', 'yyyyyyyyyyyyyyyy') }}", budget),
        ("{{ range(100000) | join('x' * 1000) }}", budget),
        // Widths and precisions MiniJinja would build before paying for them.
        ("{{ '{:>999999999}'.format(1) }}", budget),
        ("{{ '{:{}}'.format(1, 999999999) }}", budget),
        ("{{ '%999999999d' | format(1) }}", budget),
        ("{{ ('\n' * 100000) | indent(100000) }}", budget),
        // Tests that read every character, in a loop.
        ("{% set s = 'a' * 1000000 %}{% for i in range(100000) %}{% if s is lower %}{% endif %}{% endfor %}", budget),
        ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "recursion limit exceeded"),
        ("{% for m in messages recursive %}{{ loop([m, m]) }}{% endfor %}", "recursion limit exceeded"),
        // No loader: another template is never read, from anywhere.
        ("{% include '/etc/passwd' %}", "unknown statement include"),
        ("{% import 'x.jinja' as x %}", "unknown statement import"),
        ("{% from 'x.jinja' import y %}", "unknown statement from"),
        ("{% extends 'base.jinja' %}", "unknown statement extends"),
        // Nothing that is not transformers': MiniJinja's debug dump, pprint's unpaid text.
        ("{{ debug() }}", "debug is unknown"),
        ("{{ messages | pprint }}", "pprint is unknown"),
        ("{{ messages | tojson(indent=10**9) }}", budget),
        ("{{ raise_exception('no\nsystem\x1b[31m turn') }}", "refused the conversation: no\\nsystem\\u{1b}[31m turn"),
        ("{% for m in messages %}{{ m.content }", "syntax error"),
    ];
    for (template, fragment) in cases {
        refused_template(dir.path(), template, fragment);
    }
    let deep = format!("{{{{ {}1{} }}}}", "(".repeat(5000), ")".repeat(5000));
    refused_template(dir.path(), &deep, "exceeds maximum recursion limits");
    let nested_set = "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}";
    refused_template(dir.path(), &format!("{nested_set}{{{{ ns.x }}}}"), budget);
    let nested_json = format!(
        "{{% set ns = namespace(x=[]) %}}{{% for i in range(600) %}}{{% set ns.x = [ns.x] %}}{{% endfor %}}{}",
        "{{ ns.x | tojson }}"
    );
    refused_template(dir.path(), &nested_json, "nested deeper than 512 levels");
}

/// A value nested as deep as the budget allows (a list 12,000 levels deep) is printed,
/// compared, sorted and dropped on the template's own thread: no stack overflow, which would
/// abort the process (or a server) with no message at all.
#[test]
fn values_nested_as_deep_as_the_budget_allows_do_not_overflow_the_stack() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("deep.jinja");
    let chain = "|batch(1)".repeat(100);
    let build = format!(
        "{{% set ns = namespace(x=[1], y=[1]) %}}{{% for i in range(120) %}}{{% set ns.x = ns.x{chain} %}}{{% endfor %}}\
         {{% set ns.y = ns.x|list %}}"
    );
    for use_it in ["{{ ns.x }}", "{{ ns.x == ns.y }}", "{{ [ns.x, ns.y]|sort|length }}", "{{ ns.x|length }}"] {
        std::fs::write(&file, format!("{build}{use_it}")).unwrap();
        let out = cmd()
            .args(["Hi", "--model", &qwen2(), "--chat", "--chat-template", file.to_str().unwrap(), "--truncate"])
            .args(["--steps", "tokens", "--format", "json"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{use_it}: {err}");
        assert!(!err.contains("overflow"), "{use_it}: {err}");
    }
}

/// What a template renders is checked: nothing, only white space, or far more text than the
/// conversation (within its budget) is refused; so is an empty template.
#[test]
fn empty_silent_and_verbose_templates_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    refused_template(dir.path(), "", "is empty (pass a template with --chat-template FILE, or drop --chat)");
    refused_template(dir.path(), " \n\t\n", "is empty");
    refused_template(dir.path(), "{% if false %}{{ messages }}{% endif %}", "rendered nothing");
    refused_template(dir.path(), "{% for m in messages %}\n  {% endfor %}   ", "rendered only white space");
    let err = refused_template(dir.path(), "{{ 'x' * 1100000 }}{{ messages[0].content }}", "rendered 1.0 MiB");
    assert!(err.contains("more than twice the conversation and 1.0 MiB"), "{err}");
}

/// A template file that is not a template: each refused by name, nothing read past 1 MiB.
#[test]
fn template_files_that_are_not_templates_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let path = |name: &str| d.join(name).to_str().unwrap().to_string();
    std::fs::create_dir(d.join("folder")).unwrap();
    std::fs::write(d.join("binary.jinja"), b"{{ messages }}\x89PNG\r\n\x1a\n\x00\xff").unwrap();
    std::fs::write(d.join("huge.jinja"), "{# padding #}".repeat(90_000)).unwrap();
    std::os::unix::fs::symlink("loop-b", d.join("loop-a")).unwrap();
    std::os::unix::fs::symlink("loop-a", d.join("loop-b")).unwrap();
    let device = "it is a character device (such as /dev/zero or a terminal), not a file";
    let cases: Vec<(String, &str)> = vec![
        (path("folder"), "it is a folder, not a file"),
        (path("missing.jinja"), "No such file or directory"),
        (path("loop-a"), "Too many levels of symbolic links"),
        (path("binary.jinja"), "not UTF-8: byte 0x89 at offset 14"),
        (path("huge.jinja"), "it is 1.1 MiB, more than the 1.0 MiB this input may be"),
        ("/dev/zero".into(), device),
        ("/dev/urandom".into(), device),
        ("/dev/null".into(), device),
    ];
    for (file, fragment) in cases {
        let err = refused_chat(d, &["Hi", "--chat-template", &file], fragment);
        assert!(err.contains(&format!("--chat-template {file}")), "{err}");
    }
    // A named pipe that no one writes is empty, not waited on.
    let fifo = d.join("pipe.jinja");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    refused_chat(d, &["Hi", "--chat-template", &path("pipe.jinja")], "pipe.jinja) is empty");
    // A pipe that is written, as bash's process substitution makes one, is read.
    let bin = env!("CARGO_BIN_EXE_attn-trace");
    let line = format!(
        "'{bin}' Hi --model '{}' --chat --chat-template <(printf \"{{{{ raise_exception('from the pipe') }}}}\")",
        qwen2()
    );
    let out = std::process::Command::new("bash").args(["-c", &line]).output().unwrap();
    refused_output(&out, "a process substitution", "refused the conversation: from the pipe");
    // A link to a template is followed, as a file is read.
    std::fs::write(d.join("real.jinja"), "[{{ messages[-1].content }}]").unwrap();
    std::os::unix::fs::symlink("real.jinja", d.join("link.jinja")).unwrap();
    let out = cmd()
        .args(["Hi", "--model", &qwen2(), "--chat", "--chat-template", &path("link.jinja"), "--format", "json"])
        .args(["--steps", "tokens"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["input"]["chat"]["rendered"], "[Hi]");
}

/// The conversation is data: a prompt that spells template syntax comes out as written (and is
/// never run), control characters stay in the prompt and are escaped where they are shown;
/// a conversation over 1 MiB is refused before any template runs.
#[test]
fn the_conversation_is_data_never_template_code() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.jinja");
    std::fs::write(&file, "{{ messages[-1].content }}|{{ messages[0].content }}").unwrap();
    let user = "{{ 7 * 7 }} {% for x in range(10**9) %}{% endfor %} {{ raise_exception('x') }} {{ debug() }}";
    let system = "{% include '/etc/passwd' %}\u{1b}[31m";
    let out = cmd()
        .args([user, "--model", &qwen2(), "--chat", "--system", system, "--truncate", "--steps", "tokens"])
        .args(["--chat-template", file.to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["input"]["chat"]["rendered"], format!("{user}|{system}"));
    // The table shows the escape character escaped, never raw.
    let table = cmd()
        .args([user, "--model", &qwen2(), "--chat", "--system", system, "--truncate", "--steps", "tokens"])
        .args(["--chat-template", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(table.status.success());
    assert!(!table.stdout.contains(&0x1b) && !table.stderr.contains(&0x1b), "a raw escape reached the terminal");
    let long = dir.path().join("long.txt");
    std::fs::write(&long, "word ".repeat(220_000)).unwrap();
    let err = refused_chat(dir.path(), &["--file", long.to_str().unwrap(), "--truncate"], "");
    assert!(
        err.contains("the conversation and special tokens are 1.0 MiB, more than the 1.0 MiB a chat template is given"),
        "{err}"
    );
}

/// A model's own template is refused as a file's is, naming where it came from: a folder's
/// tokenizer_config.json, its chat_template.jinja, a GGUF's tokenizer.chat_template.
#[test]
fn a_models_own_template_is_refused_naming_its_source() {
    let dir = tempfile::tempdir().unwrap();
    let folder =
        copy_qwen2(dir.path(), "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
    let err = refused_chat_of(&folder, dir.path(), &["Hi"], "ran out of its budget");
    assert!(err.contains("the chat template (tokenizer_config.json's chat_template)"), "{err}");
    // chat_template.jinja wins, read at most 1 MiB; a device by that name is not a file, as
    // transformers sees it, and the config's template is used.
    let jinja = Path::new(&folder).join("chat_template.jinja");
    std::fs::write(&jinja, "{{ 'x' * 10**9 }}").unwrap();
    let err = refused_chat_of(&folder, dir.path(), &["Hi"], "(chat_template.jinja) ran out of its budget");
    assert!(err.starts_with("attn-trace: --chat: the chat template"), "{err}");
    std::fs::write(&jinja, "{# #}".repeat(300_000)).unwrap();
    refused_chat_of(&folder, dir.path(), &["Hi"], "chat_template.jinja: it is 1.4 MiB, more than the 1.0 MiB");
    std::fs::remove_file(&jinja).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &jinja).unwrap();
    refused_chat_of(&folder, dir.path(), &["Hi"], "(tokenizer_config.json's chat_template) ran out");
    // A GGUF's template, and one that is empty.
    use candle_core::quantized::gguf_file::Value as Meta;
    let bomb = Meta::String("{{ raise_exception('Only ' ~ 'x' * 20 ~ ' roles') }}".into());
    let gguf = crate::determinism::rewrite_gguf(
        dir.path(),
        "bomb.gguf",
        &|_| candle_core::quantized::GgmlDType::F32,
        &[("tokenizer.chat_template", bomb)],
    );
    let err = refused_chat_of(&gguf, dir.path(), &["Hi"], "refused the conversation: Only xxxxxxxxxxxxxxxxxxxx roles");
    assert!(err.contains("the chat template (the GGUF's tokenizer.chat_template)"), "{err}");
    let empty = crate::determinism::rewrite_gguf(
        dir.path(),
        "empty.gguf",
        &|_| candle_core::quantized::GgmlDType::F32,
        &[("tokenizer.chat_template", Meta::String(String::new()))],
    );
    refused_chat_of(&empty, dir.path(), &["Hi"], "the chat template (the GGUF's tokenizer.chat_template) is empty");
}

/// The qwen2 fixture copied into `dir` with `template` as its tokenizer_config.json's
/// chat_template.
fn copy_qwen2(dir: &Path, template: &str) -> String {
    let dest = dir.join("qwen2");
    std::fs::create_dir(&dest).unwrap();
    for e in std::fs::read_dir(qwen2()).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, dest.join(p.file_name().unwrap())).unwrap();
    }
    let config = dest.join("tokenizer_config.json");
    let mut json: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    json["chat_template"] = Value::from(template);
    std::fs::write(&config, json.to_string()).unwrap();
    dest.to_str().unwrap().to_string()
}

/// A request to `attn-trace serve` with `--chat` renders the model's template on the server:
/// a hostile one gets the command line's line, and the server keeps answering.
#[test]
fn a_servers_hostile_template_gets_the_command_lines_line() {
    use crate::serve::{error_of, Server};
    let dir = tempfile::tempdir().unwrap();
    let folder = copy_qwen2(dir.path(), "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
    let work = tempfile::tempdir().unwrap();
    let server = Server::serving(&["--model", &folder], &[], work.path());
    let (status, body) = server.trace(&["Hi", "--chat"]);
    assert_eq!(status, 400);
    let cli = cmd().args(["Hi", "--chat", "--model", &folder, "--format", "json"]).output().unwrap();
    let line = refused_output(&cli, "the command line", "recursion limit exceeded");
    assert_eq!(format!("attn-trace: {}\n", error_of(&body)), line);
    let (status, _) = server.trace(&["Hi"]);
    assert_eq!(status, 200, "the server still answers");
    assert_eq!(std::fs::read_dir(work.path()).unwrap().count(), 0, "a request wrote a file");
    assert!(server.stop().success());
}

/// The templates of the families people chat with render as transformers renders them, for
/// plain and hostile conversations (template syntax, control characters, Python's white
/// space): fixtures/oracle/chat/families.json. Mistral's refusal of a system turn is its own
/// message, in one line.
#[test]
fn llama_phi3_and_mistral_templates_render_as_transformers() {
    let text = std::fs::read_to_string(root().join("fixtures/oracle/chat/families.json")).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let mut wrong = Vec::new();
    let mut seen = 0;
    for family in doc["families"].as_array().unwrap() {
        let name = family["family"].as_str().unwrap();
        let source = std::fs::read_to_string(root().join(family["template_file"].as_str().unwrap())).unwrap();
        let tokens: Vec<(&'static str, String)> = ["bos_token", "eos_token", "unk_token", "pad_token"]
            .into_iter()
            .filter_map(|k| family["special_tokens"][k].as_str().map(|t| (k, t.to_string())))
            .collect();
        let template = Template::new(source, format!("{name}'s template"), tokens);
        for case in family["cases"].as_array().unwrap() {
            seen += 1;
            let got = template.render(case["system"].as_str(), case["user"].as_str().unwrap());
            let what = format!("{name} {}", case["name"].as_str().unwrap());
            match (got, case["rendered"].as_str(), case["raised"].as_str()) {
                (Ok(got), Some(want), _) if got == want => {}
                (Err(e), None, Some(raised))
                    if e.to_string().contains(&format!("refused the conversation: {raised}")) => {}
                (got, want, raised) => wrong.push(format!("{what}: got {got:?}, transformers {want:?} / {raised:?}")),
            }
        }
    }
    assert_eq!(seen, 36, "every conversation of every family");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
