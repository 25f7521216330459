//! What surprised students on the toy model (issue 47, item 11) is explained where it shows:
//! the default tables end with where to go next, as a real model's summary does; equal rows of
//! `embed.position` and `embed.token` get a note saying why (worked out from the values); a
//! heatmap of a step it cannot draw says what it drew instead.

use crate::common::*;

const SHORT: &str = "my shoes are small";
const LONG: &str = "my shoes are small, my feet are big.";

/// (stdout, stderr) of a successful run.
fn ok(args: &[&str]) -> (String, String) {
    let out = cmd().current_dir(root()).args(args).output().unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{args:?}: {err}");
    (String::from_utf8(out.stdout).unwrap(), err)
}

/// The run's notes on stderr, without their prefix.
fn notes(err: &str) -> Vec<&str> {
    err.lines().filter_map(|l| l.strip_prefix("attn-trace: note: ")).collect()
}

const TOY_HINT: &str =
    "\nEvery number: --format json.\nFewer tables: --steps weights, or e.g.\n  --steps weights --layer 0 --head 0\n";

#[test]
fn the_toy_default_ends_with_the_hint_a_real_models_summary_ends_with() {
    let (toy, _) = ok(&[SHORT, "--heads", "2"]);
    assert!(toy.ends_with(TOY_HINT), "{toy}");
    assert_eq!(toy.matches("Every number: --format json.").count(), 1);
    // The same mechanism, the real model's words: its summary points to the full tables.
    let (bert, _) = ok(&[SHORT, "--model", "fixtures/tiny-bert"]);
    assert!(bert.ends_with(
        "\nEvery number: --format json.\nFull tables: --steps all, or e.g.\n  --steps weights --layer 0 --head 1\n"
    ));
    // The toy's example runs on the toy's default model (one head) and shows one table.
    let (one, err) = ok(&[SHORT, "--steps", "weights", "--layer", "0", "--head", "0"]);
    assert!(err.is_empty(), "{err}");
    assert_eq!(one.matches("layers.0.attn.weights").count(), 1, "{one}");
    // Asked-for steps and the focus walkthrough are not the default view: no hint.
    for args in [&[SHORT, "--steps", "weights"][..], &[SHORT, "--focus", "shoes"], &[SHORT, "--format", "json"]] {
        let (out, _) = ok(args);
        assert!(!out.contains("Fewer tables"), "{args:?}: {out}");
    }
}

/// How many leading rows of the shown `embed.position` equal `embed.token`'s, from the JSON.
fn equal_rows(sentence: &str, extra: &[&str]) -> usize {
    let doc = trace_json(&[&[sentence, "--steps", "embed.token,embed.position"][..], extra].concat());
    let s = steps(&doc);
    let (token, position) = (&s["embed.token"].1, &s["embed.position"].1);
    let width = doc["config"]["d_model"].as_u64().unwrap() as usize;
    token.chunks(width).zip(position.chunks(width)).take_while(|(a, b)| a == b).count()
}

#[test]
fn equal_embedding_rows_are_explained_by_the_reseeding() {
    // The note names the rows that are equal, as the values say.
    for (sentence, rows) in [(SHORT, "rows 0–3"), (LONG, "rows 0–1")] {
        let n = equal_rows(sentence, &[]);
        assert_eq!(format!("rows 0–{}", n - 1), rows, "{sentence}");
        let (_, err) = ok(&[sentence, "--steps", "embed.token,embed.position"]);
        let said = notes(&err);
        assert_eq!(said.len(), 1, "{err}");
        assert!(
            said[0].starts_with(&format!("embed.position {rows} equal embed.token {rows}: as in the notebook, torch.manual_seed(123) runs again before each table")),
            "{err}"
        );
        // The default view shows both tables: the note too.
        assert_eq!(notes(&ok(&[sentence]).1), said);
    }
    // Another seed: still the reseeding, still said with that seed.
    let (_, err) = ok(&[SHORT, "--seed", "7", "--steps", "embed"]);
    assert!(notes(&err).iter().any(|n| n.contains("torch.manual_seed(7) runs again")), "{err}");
    // Without the re-seed before the positions, the rows differ and nothing is said.
    assert_eq!(equal_rows(SHORT, &["--reseed", "token,layers"]), 0);
    let (_, err) = ok(&[SHORT, "--reseed", "token,layers", "--steps", "embed.token,embed.position"]);
    assert!(err.is_empty(), "{err}");
    // Said after the output, so a refusal after the trace (a file it cannot write) stays one
    // line.
    refused(&[SHORT, "--html", "/nonexistent-dir/x.html"], "--html /nonexistent-dir/x.html");
    // Only where it shows: not for one table alone, nor --quiet, nor weights from a file; and
    // it explains the screen, so the JSON document (and its notes) is the same either way.
    assert!(ok(&[SHORT, "--steps", "embed.position"]).1.is_empty());
    let (json, err) = ok(&[SHORT, "--format", "json"]);
    assert!(err.is_empty() && !json.contains("manual_seed"), "{err}");
    assert!(ok(&[SHORT, "--steps", "embed.token,embed.position", "--quiet"]).1.is_empty());
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.safetensors");
    ok(&[SHORT, "--save-weights", w.to_str().unwrap(), "--steps", "tokens"]);
    assert!(ok(&[SHORT, "--weights", w.to_str().unwrap(), "--steps", "embed"]).1.is_empty());
}

#[test]
fn the_tutorial_quotes_the_note_as_printed() {
    let tutorial = std::fs::read_to_string(root().join("docs/TUTORIAL.md")).unwrap();
    let (_, err) = ok(&[SHORT, "--steps", "embed.token,embed.position"]);
    let line = err.lines().next().unwrap();
    assert!(tutorial.lines().any(|l| l == line), "docs/TUTORIAL.md should quote: {line}");
}

#[test]
fn a_heatmap_of_a_step_it_cannot_draw_says_what_it_drew() {
    let (drawn, err) = ok(&[SHORT, "--heads", "2", "--format", "heatmap", "--steps", "embed.sum", "--color", "never"]);
    assert_eq!(
        notes(&err),
        ["--format heatmap draws attention maps, not embed.sum: it drew 2 attention maps of layer 0 \
          instead (one head's map: --steps weights --layer 0 --head 0; embed.sum as numbers: leave out \
          --format heatmap)"],
        "{err}"
    );
    assert_eq!(err.lines().count(), 1);
    // What it drew is what the note says: both heads' weights.
    assert_eq!(drawn.matches("layers.0.attn.weights · head").count(), 2, "{drawn}");
    // Several steps are named, three at most; the weights among them are drawn, not named.
    let (_, err) =
        ok(&[LONG, "--layers", "2", "--format", "heatmap", "--steps", "embed.sum,q,k,v,weights", "--color", "never"]);
    let said = notes(&err);
    assert_eq!(said.len(), 1, "{err}");
    assert!(said[0].starts_with("--format heatmap draws attention maps, not embed.sum, layers.0.attn.q and 5 more: it drew 2 attention maps of layers 0, 1 instead"), "{err}");
    // The note's two ways out run without a note; so do the heatmap's usual commands.
    for args in [
        &[SHORT, "--heads", "2", "--format", "heatmap", "--steps", "weights", "--layer", "0", "--head", "0"][..],
        &[SHORT, "--heads", "2", "--steps", "embed.sum"],
        &[SHORT, "--heads", "2", "--format", "heatmap"],
    ] {
        assert!(ok(args).1.is_empty(), "{args:?}");
    }
}
