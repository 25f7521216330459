//! A batch's `--html` page and `--svg` picture (issue 17, item 6: "one page section each"):
//! one section (one block) per sentence in the batch's order, each exactly what the single
//! run of its sentence draws (its ids suffixed), the styles and the script once; with
//! `--pad-to`, the pads drawn as pads. The browser half (both sections work) is
//! tests/browser/check_html.py.

use crate::common::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

const SENTENCES: [&str; 3] = ["my shoes are small", "the <script>alert(1)</script> cat & dog", "big feet"];

fn run(args: &[&str]) -> Vec<u8> {
    let out = cmd().current_dir(root()).args(args).output().unwrap();
    assert!(out.status.success(), "attn-trace {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap()
}

/// `s` from the first `from` to the first `to` after it (`to` excluded).
fn between<'a>(s: &'a str, from: &str, to: &str) -> &'a str {
    let a = s.find(from).unwrap_or_else(|| panic!("no {from:?}"));
    let b = s[a..].find(to).unwrap_or_else(|| panic!("no {to:?} after {from:?}"));
    &s[a..a + b]
}

/// The ids of a page, which must be unique.
fn ids(page: &str) -> Vec<String> {
    let re = regex::Regex::new(r#" id="([^"]*)""#).unwrap();
    re.captures_iter(page).map(|c| c[1].to_string()).collect()
}

#[test]
fn a_batch_page_has_one_section_per_sentence_each_its_single_page() {
    let dir = tempfile::tempdir().unwrap();
    let batch = dir.path().join("b.txt");
    std::fs::write(&batch, SENTENCES.join("\n")).unwrap();
    let (a, b) = (dir.path().join("a.html"), dir.path().join("b.html"));
    let model = ["--heads", "2", "--layers", "2", "--focus", "1"];
    let page_of = |path: &Path| {
        run(&[&["--batch", batch.to_str().unwrap(), "--html", path.to_str().unwrap()][..], &model].concat());
        read(path)
    };
    let page = page_of(&a);
    assert_eq!(page, page_of(&b), "two runs wrote different bytes");

    // Shared once: the styles and the script; one data block per sentence.
    assert_eq!(page.matches("<style>").count(), 1);
    assert_eq!(page.matches("<script>\n").count(), 1, "one script");
    assert_eq!(page.matches("type=\"application/json\"").count(), 3);
    assert_eq!(page.matches("<article class=\"item\">").count(), 3);
    let all = ids(&page);
    let unique: BTreeSet<&String> = all.iter().collect();
    assert_eq!(unique.len(), all.len(), "an id is repeated");

    // A sentence's markup is text: escaped in the list, the title and the page's title.
    assert!(!page.contains("<script>alert"), "a sentence's <script> reached the page as markup");
    let escaped = "the &lt;script&gt;alert(1)&lt;/script&gt; cat &amp; dog";
    assert!(page.contains(&format!("<li><a href=\"#s2\">{escaped}</a></li>")));
    assert!(page.contains(&format!("id=\"s2\">Sentence 2 of 3: <span class=\"sentence\">{escaped}</span></h2>")));
    assert!(page.contains("<title>attn-trace: a batch of 3 sentences</title>"));

    // Each section is the single run's page from its summary line to its data, with ids
    // ending in -s1, -s2, …: the same maps, focus walkthrough and step tables.
    let mut at = 0;
    for (i, s) in SENTENCES.iter().enumerate() {
        let single = dir.path().join(format!("single{i}.html"));
        run(&[&[*s, "--html", single.to_str().unwrap()][..], &model].concat());
        let single = read(&single);
        let want = between(&single, "<p class=\"summary\">", "<script>\n");
        let article = &page[at..][page[at..].find("<article class=\"item\">").unwrap()..];
        let body = between(article, "<p class=\"summary\">", "</article>");
        at += page[at..].find("<article class=\"item\">").unwrap() + 1;
        let suffix = format!("-s{}\"", i + 1);
        assert!(body.contains(&format!("id=\"data{suffix}")), "section {i}");
        assert_eq!(body.replace(&suffix, "\""), want, "section {} is not its sentence's single page", i + 1);
    }
}

/// The `<rect class="cell">`s of an SVG, which must parse as XML, and the titles of its blocks.
fn svg_cells_and_titles(text: &str) -> (usize, Vec<String>) {
    let doc = roxmltree::Document::parse(text).unwrap_or_else(|e| panic!("not XML: {e}"));
    let cells = doc.descendants().filter(|n| n.has_tag_name("rect") && n.attribute("class") == Some("cell")).count();
    let titles = doc
        .descendants()
        .filter(|n| n.has_tag_name("g") && n.attribute("class") == Some("sentence"))
        .map(|g| g.descendants().find(|n| n.has_tag_name("text")).and_then(|t| t.text()).unwrap_or("").to_string())
        .collect();
    (cells, titles)
}

#[test]
fn a_batch_svg_stacks_one_titled_block_per_sentence() {
    let dir = tempfile::tempdir().unwrap();
    let batch = dir.path().join("b.txt");
    std::fs::write(&batch, SENTENCES.join("\n")).unwrap();
    let svg = |name: &str| {
        let p = dir.path().join(name);
        run(&["--batch", batch.to_str().unwrap(), "--heads", "2", "--layers", "2", "--layer", "1"]
            .into_iter()
            .chain(["--svg", p.to_str().unwrap()])
            .collect::<Vec<_>>());
        read(&p)
    };
    let text = svg("a.svg");
    assert_eq!(text, svg("b.svg"), "two runs wrote different bytes");
    let (cells, titles) = svg_cells_and_titles(&text);
    // 2 heads of 4, 5 ("the", "<script>alert(1)</script>", "cat", "&", "dog") and 2 tokens.
    assert_eq!(cells, 2 * (4 * 4 + 5 * 5 + 2 * 2));
    let want: Vec<String> = (1..=3).map(|i| format!("sentence {i} of 3 · layers.1.attn.weights")).collect();
    assert_eq!(titles, want);
    assert_eq!(text.matches("<svg").count(), 1);
    assert_eq!(text.matches("the map's largest weight</text>").count(), 1, "one legend");
    // Each block is what the single run draws (below its background), titled with its index.
    for (i, s) in SENTENCES.iter().enumerate() {
        let p = dir.path().join(format!("single{i}.svg"));
        run(&[s, "--heads", "2", "--layers", "2", "--layer", "1", "--svg", p.to_str().unwrap()]);
        let single = read(&p);
        // From the title to the legend (whose "0" is the last text at x = 8).
        let body = &single[single.find("<text x=\"8\" y=\"20\"").unwrap()..single.rfind("<text x=\"8\" y=\"").unwrap()];
        let titled = body.replacen("\">layers.1", &format!("\">sentence {} of 3 · layers.1", i + 1), 1);
        assert!(text.contains(&titled), "block {} is not its sentence's single picture", i + 1);
    }
}

#[test]
fn pads_are_drawn_as_pads_in_the_page_and_the_picture() {
    let dir = tempfile::tempdir().unwrap();
    let batch = dir.path().join("b.txt");
    std::fs::write(&batch, "the cat sat\nhi\n").unwrap();
    let (html, svg) = (dir.path().join("p.html"), dir.path().join("p.svg"));
    let json = run(&[
        "--batch",
        batch.to_str().unwrap(),
        "--model",
        "fixtures/decoders/gpt2",
        "--pad-to",
        "6",
        "--padding",
        "left",
        "--format",
        "json",
        "--html",
        html.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    let docs: Value = serde_json::from_slice(&json).unwrap();
    let (page, picture) = (read(&html), read(&svg));
    assert!(page.contains("their keys are hatched"));
    let mut hatched = 0;
    for (i, doc) in docs.as_array().unwrap().iter().enumerate() {
        let mask = doc["config"]["padding"]["attention_mask"].as_array().unwrap();
        let pads: Vec<bool> = mask.iter().map(|m| m == 0).collect();
        let data = between(&page, &format!("<script id=\"data-s{}\" type=\"application/json\">", i + 1), "</script>");
        let data: Value = serde_json::from_str(&data[data.find('>').unwrap() + 1..]).unwrap();
        assert_eq!(data["pad"], serde_json::to_value(&pads).unwrap(), "sentence {i}: the page's pads");
        // GPT-2's layer 0 has 4 heads, each panel hatching every pad's key column.
        hatched += 4 * pads.iter().filter(|p| **p).count();
    }
    assert_eq!(hatched, 4 * (2 + 4), "the pads: 2 for 't he ·cat ·sat', 4 for 'h i'");
    assert_eq!(picture.matches("<rect class=\"pad\"").count(), hatched);
    assert_eq!(picture.matches("<pattern id=\"pad-hatch\"").count(), 1);
    assert!(picture.contains("(pad) → ") && picture.contains(" fill=\"#999999\" font-style=\"italic\""));
    svg_cells_and_titles(&picture);
    // Without padding, no trace of it.
    let plain = dir.path().join("plain.html");
    run(&["the cat sat", "--model", "fixtures/decoders/gpt2", "--html", plain.to_str().unwrap()]);
    assert!(!read(&plain).contains("\"pad\":"));
}

#[test]
fn an_error_in_any_sentence_writes_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let batch = dir.path().join("b.txt");
    std::fs::write(&batch, "my shoes\none two three four five six seven eight nine ten eleven\n").unwrap();
    let (html, svg) = (dir.path().join("p.html"), dir.path().join("p.svg"));
    let out = cmd()
        .args(["--batch", batch.to_str().unwrap(), "--html", html.to_str().unwrap(), "--svg", svg.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 2: sentence: it has 11 tokens"));
    assert!(!html.exists() && !svg.exists(), "a file was written");
}

#[test]
fn a_batch_page_that_outgrows_the_memory_cap_is_refused_and_leaves_no_file() {
    // Each run checks its own memory; a batch's page adds the sections up, and their sum is
    // held to the same cap, with each next sentence's run (issue 27). One sentence's page fits
    // in 13 MiB (the estimate counts the program's own ~12 MiB), twelve sections do not.
    let dir = tempfile::tempdir().unwrap();
    let batch = dir.path().join("b.txt");
    let lines: Vec<String> = (1..=12).map(|i| format!("my shoes are small and my feet are big {i}")).collect();
    std::fs::write(&batch, lines.join("\n")).unwrap();
    let html = dir.path().join("p.html");
    let (h, b) = (html.to_str().unwrap(), batch.to_str().unwrap());
    run(&[&lines[0], "--html", h, "--max-memory", "13MiB"]);
    std::fs::remove_file(&html).unwrap();
    let err = refused(&["--batch", b, "--html", h, "--max-memory", "13MiB"], "above the cap of 13.0 MiB");
    let held = err.contains("for the --html/--svg files of sentences 1 to")
        || err.contains("of results the batch holds for the sentences before it");
    assert!(held, "{err}");
    assert!(!html.exists(), "a file was written");
}
