//! Non-square attention maps (queries of one sequence, keys of another: an encoder–decoder's
//! cross-attention, issue 32) through every renderer. No model records such a map yet, so the
//! trace is built by hand: one `attn.weights` step of [1 head, 2 queries, 3 keys], the
//! queries "le chat", the keys "the black cat" (`Trace::keys`). Each renderer must draw 2 rows
//! × 3 columns, rows labelled by the queries and columns by the keys. The goldens of
//! golden.rs and views.rs hold the square output byte for byte.

use attn_trace::render;
use attn_trace::settings::{views::ViewOptions, Format, Output};
use attn_trace::trace::{steps, KeyTokens, Step, Trace, Values};
use attn_trace::views::{maps::maps, Views};
use serde_json::{json, Value};

/// Row by row: "le" on (the, black, cat), then "chat".
const W: [f32; 6] = [0.5, 0.25, 0.25, 0.125, 0.375, 0.5];

fn strs(s: &[&str]) -> Vec<String> {
    s.iter().map(|t| t.to_string()).collect()
}

fn trace(keys: bool) -> Trace {
    let (shape, values) = if keys { (vec![1, 2, 3], W.to_vec()) } else { (vec![1, 2, 2], vec![0.5, 0.5, 0.25, 0.75]) };
    let step = Step {
        id: steps::layer_id(0, "attn.weights"),
        layer: Some(0),
        name: "attn.weights".into(),
        dims: vec!["head", "query_pos", "key_pos"],
        shape,
        heads: None,
        values: Values::F32(values),
    };
    Trace {
        sentence: Some("le chat".into()),
        tokens: strs(&["le", "chat"]),
        keys: keys.then(|| KeyTokens { tokens: strs(&["the", "black", "cat"]), ..Default::default() }),
        steps: vec![step],
        ..Default::default()
    }
}

fn output(format: Format, average: bool) -> Output {
    Output {
        format,
        precision: 3,
        width: 100,
        summary: false,
        color: false,
        views: ViewOptions { average_heads: average, ..Default::default() },
        top_k: 0,
        stats: false,
        rollout: false,
        params: false,
    }
}

/// `render::render` of the trace, its maps derived (`--average-heads` when `average`).
fn rendered(t: &Trace, format: Format, average: bool) -> String {
    let views = Views { maps: Some(maps(t, false, average)), ..Default::default() };
    let mut out = Vec::new();
    render::render(t, &views, &output(format, average), None, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// The numbers written on a line (those with a decimal point).
fn numbers(line: &str) -> Vec<f32> {
    line.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter(|s| s.contains('.'))
        .map(|s| s.parse().unwrap())
        .collect()
}

#[test]
fn heatmap_draws_query_rows_and_key_columns() {
    let text = rendered(&trace(true), Format::Heatmap, false);
    assert!(text.contains("[query_pos × key_pos = 2 × 3]"), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    let at = lines.iter().position(|l| l.starts_with("q \\ k")).expect(&text);
    assert_eq!(lines[at].split_whitespace().collect::<Vec<_>>(), ["q", "\\", "k", "the", "black", "cat"]);
    assert_eq!(lines[at - 1].split_whitespace().collect::<Vec<_>>(), ["0", "1", "2"]);
    assert!(lines[at + 1].starts_with("0 le ") && lines[at + 2].starts_with("1 chat "), "{text}");
    assert_eq!(numbers(lines[at + 1]), W[..3]);
    assert_eq!(numbers(lines[at + 2]), W[3..]);
    assert!(lines.get(at + 3).is_none_or(|l| l.is_empty()), "a third row: {text}");
}

#[test]
fn maps_table_and_json_views_are_rows_by_columns() {
    let text = rendered(&trace(true), Format::Table, true);
    let at = text.find("[query_pos × key_pos = 2 × 3]").expect(&text);
    let table: Vec<&str> = text[at..].lines().skip(1).filter(|l| l.contains('┆')).collect();
    let cells = |l: &str| l.split('┆').map(|c| c.trim().to_string()).collect::<Vec<_>>();
    assert_eq!(cells(table[0]), ["q \\ k", "the", "black", "cat"]);
    assert_eq!(cells(table[1]), ["0 le", "0.500", "0.250", "0.250"]);
    assert_eq!(cells(table[2]), ["1 chat", "0.125", "0.375", "0.500"]);
    assert_eq!(table.len(), 3);

    let doc: Value = serde_json::from_str(&rendered(&trace(true), Format::Json, true)).unwrap();
    let v = &doc["views"];
    assert_eq!(v["labels"], json!(["le", "chat"]));
    assert_eq!(v["key_labels"], json!(["the", "black", "cat"]));
    assert_eq!(v["maps"][0]["shape"], json!([2, 3]));
    assert_eq!(v["maps"][0]["values"], json!([W[..3], W[3..]]));
    assert_eq!(doc["steps"][0]["shape"], json!([1, 2, 3]));
    // Square maps write no key labels.
    let doc: Value = serde_json::from_str(&rendered(&trace(false), Format::Json, true)).unwrap();
    assert_eq!(doc["views"]["maps"][0]["shape"], json!([2, 2]));
    assert!(doc["views"].get("key_labels").is_none(), "{}", doc["views"]);
}

#[test]
fn svg_has_one_cell_per_weight_and_the_key_labels_across() {
    let t = trace(true);
    let mut out = Vec::new();
    render::svg::write(&t, &maps(&t, false, false), None, &output(Format::Table, false), &mut out).unwrap();
    let svg = String::from_utf8(out).unwrap();
    let cells: Vec<&str> = svg.lines().filter(|l| l.starts_with("<rect class=\"cell\"")).collect();
    assert_eq!(cells.len(), 6, "{svg}");
    let attr = |l: &str, a: &str| -> usize {
        let v = &l[l.find(&format!(" {a}=\"")).unwrap() + a.len() + 3..];
        v[..v.find('"').unwrap()].parse().unwrap()
    };
    let distinct = |a: &str| cells.iter().map(|l| attr(l, a)).collect::<std::collections::BTreeSet<_>>().len();
    assert_eq!((distinct("y"), distinct("x")), (2, 3), "2 rows × 3 columns");
    for key in ["the", "black", "cat"] {
        assert!(svg.contains(&format!("rotate(-90)\">{key}</text>")), "key label {key}: {svg}");
    }
    for query in ["le", "chat"] {
        assert!(svg.contains(&format!("text-anchor=\"end\">{query}</text>")), "query label {query}: {svg}");
    }
    assert!(svg.contains("<title>chat → cat: 0.5000</title>"), "{svg}");
}

/// The page's embedded maps: its `<script id="data" type="application/json">` block.
fn page_data(t: &Trace) -> Value {
    let mut out = Vec::new();
    let none = attn_trace::views::Views::default();
    render::html::write(t, &maps(t, false, false), &none, &output(Format::Table, false), &mut out).unwrap();
    let page = String::from_utf8(out).unwrap();
    let open = "<script id=\"data\" type=\"application/json\">";
    let start = page.find(open).expect("the data block") + open.len();
    serde_json::from_str(&page[start..start + page[start..].find("</script>").unwrap()]).unwrap()
}

#[test]
fn html_embeds_query_labels_key_labels_and_rows_of_keys() {
    let data = page_data(&trace(true));
    assert_eq!(data["labels"], json!(["le", "chat"]));
    assert_eq!(data["keys"], json!(["the", "black", "cat"]));
    assert_eq!(data["layers"][0]["maps"][0]["values"], json!([W[..3], W[3..]]));
    // Square maps: the columns are the rows' labels, and no `keys` are written.
    let data = page_data(&trace(false));
    assert!(data.get("keys").is_none());
    assert_eq!(data["layers"][0]["maps"][0]["values"], json!([[0.5, 0.5], [0.25, 0.75]]));
}

#[test]
fn step_tables_and_the_summary_label_keys_by_the_key_tokens() {
    let t = trace(true);
    let text = rendered(&t, Format::Table, false);
    let header = text.lines().find(|l| l.starts_with("q \\ k")).expect(&text);
    assert_eq!(header.split('┆').map(str::trim).collect::<Vec<_>>(), ["q \\ k", "the", "black", "cat"]);
    let views = Views { summary: Some(attn_trace::views::summary::summarize(&t)), ..Default::default() };
    let mut out = Vec::new();
    render::render(&t, &views, &Output { summary: true, ..output(Format::Table, false) }, None, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("le(0)→the(0) 0.50  chat(1)→cat(2) 0.50  chat(1)→black(1) 0.38"), "{text}");
}
