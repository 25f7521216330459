//! The `--html` page of a language model says what the model predicted (issue 47, item 3):
//! SmolLM2's page for "The capital of France is" holds the terminal's next-token table, above
//! the maps, with " Paris" first after "is" and its probability as the terminal prints it;
//! with `--generate`, each generated token with its probability and its runner-ups. A model
//! without a language-model head (the toy, a BERT encoder) has no predictions section.

use crate::common::*;
use crate::gguf::smollm2;
use std::path::Path;

/// Runs attn-trace from the repository root writing `page`; its stdout (the tables) and the
/// page.
fn page_of(args: &[&str], page: &Path) -> (String, String) {
    let out = cmd().current_dir(root()).args(args).args(["--html", page.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "attn-trace {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    (String::from_utf8(out.stdout).unwrap(), std::fs::read_to_string(page).unwrap())
}

/// The `<tr>` of a page's table whose header cell is `<th>{pos}</th>`, from `from` on.
fn row(page: &str, from: usize, pos: usize) -> &str {
    let open = format!("<tr><th>{pos}</th>");
    let start = from + page[from..].find(&open).unwrap_or_else(|| panic!("no row {pos}"));
    &page[start..start + page[start..].find("</tr>").unwrap()]
}

#[test]
fn smollm2_page_shows_the_predictions_above_the_maps() {
    let dir = tempfile::tempdir().unwrap();
    let page_path = dir.path().join("p.html");
    let (text, page) = page_of(&["The capital of France is", "--model", &smollm2()], &page_path);
    // The terminal's last row starts with the top prediction: "·Paris 0.77".
    let table = &text[text.find("next-token predictions").expect("the terminal's table")..];
    let last = table.lines().find(|l| l.trim_start().starts_with("4 ") && l.contains("·is ")).expect("row 4");
    let top = last.split('┆').nth(2).unwrap().split("  ").next().unwrap().trim().to_string();
    assert!(top.starts_with("·Paris 0."), "{last}");
    let section = page.find("<section id=\"predictions\"").expect("a predictions section");
    assert!(section < page.find("<section id=\"overview\"").unwrap(), "the predictions come before the maps");
    assert!(page[section..].starts_with("<section id=\"predictions\" class=\"predictions\">\n<h2>Next-token"));
    assert!(page[section..].contains("Top 5 per position"));
    // Row 4 (·is): five predictions, the first exactly as the terminal prints it.
    let r = row(&page, section, 4);
    assert!(r.starts_with("<tr><th>4</th><th>·is</th><td>"), "{r}");
    assert_eq!(r.matches("<td>").count(), 5, "{r}");
    assert!(r.contains(&format!("<th>·is</th><td>{top}</td>")), "{r}");
    for pos in 0..5 {
        assert_eq!(row(&page, section, pos).matches("<td>").count(), 5);
    }
}

#[test]
fn a_generation_page_lists_each_token_with_its_runner_ups() {
    let dir = tempfile::tempdir().unwrap();
    let page_path = dir.path().join("g.html");
    let args = ["The capital of France is", "--model", &smollm2(), "--generate", "2", "--steps", "tokens"];
    let (text, page) = page_of(&args, &page_path);
    let section = page.find("<section id=\"predictions\"").expect("a predictions section");
    let generated = section + page[section..].find("<h3>Generated tokens</h3>").expect("the generated tokens");
    assert!(generated < page.find("<section id=\"overview\"").unwrap());
    // Token 1 is ·Paris at position 5, with the probability and runner-ups the terminal gives.
    let r = row(&page, generated, 5);
    let line = text.lines().find(|l| l.trim_start().starts_with("5 ") && l.contains("·Paris")).expect("row 5");
    let cols: Vec<&str> = line.split('┆').map(str::trim).collect();
    assert!(r.starts_with(&format!("<tr><th>5</th><th>·Paris</th><td>{}</td>", cols[2])), "{r}\n{line}");
    let first_runner_up = cols[3].split("  ").next().unwrap();
    assert!(r.contains(&format!("<td>{first_runner_up}&nbsp; ")), "{r}\n{line}");
    // Every candidate but the chosen one: four runner-ups of the top 5.
    assert_eq!(r.matches("&nbsp; ").count() + 1, 4, "{r}");
    assert!(row(&page, generated, 6).contains("<th>.</th>"));
}

#[test]
fn a_model_without_a_head_has_no_predictions_on_its_page() {
    let dir = tempfile::tempdir().unwrap();
    for (i, args) in [vec!["my shoes are small"], vec!["my shoes are small", "--model", "fixtures/tiny-bert"]]
        .into_iter()
        .enumerate()
    {
        let (_, page) = page_of(&args, &dir.path().join(format!("{i}.html")));
        assert!(!page.contains("id=\"predictions"), "{args:?}");
        assert!(!page.contains("Next-token predictions"), "{args:?}");
    }
    // A masked LM's page predicts its [MASK] position only.
    let (_, page) =
        page_of(&["my [MASK] is small.", "--model", "fixtures/tiny-bert-mlm"], &dir.path().join("mlm.html"));
    let section = page.find("<section id=\"predictions\"").expect("a masked LM's predictions");
    assert!(page[section..].contains("<h2>Masked-word predictions</h2>"));
    let table = &page[section..section + page[section..].find("</table>").unwrap()];
    let body = &table[table.find("<tbody>").unwrap()..];
    assert_eq!(body.matches("<tr>").count(), 1, "{table}");
    assert!(table.contains("<th>[MASK]</th>"), "{table}");
}

#[test]
fn an_encoder_decoder_page_predicts_once_above_its_three_attentions() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["my shoes are small.", "--model", "fixtures/seq2seq/t5", "--target", "the shoes are small."];
    let (_, page) = page_of(&args, &dir.path().join("t5.html"));
    assert_eq!(page.matches("<h2>Next-token predictions</h2>").count(), 1);
    assert!(page.find("id=\"predictions\"").unwrap() < page.find("<article").unwrap());
}
