//! Stability goldens: attn-trace's own output frozen under fixtures/golden/. They prove the
//! bytes do not change by accident; correctness is proven elsewhere (reference loops, the
//! PyTorch oracle, the seed notebooks). Regenerate with `UPDATE_GOLDEN=1 cargo test golden`.

use crate::common::*;

fn golden(name: &str, args: &[&str]) {
    let out = cmd().current_dir(root()).args(args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let path = root().join("fixtures/golden").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &out.stdout).unwrap();
        return;
    }
    let want = std::fs::read(&path)
        .unwrap_or_else(|_| panic!("{} is missing; run UPDATE_GOLDEN=1 cargo test golden", path.display()));
    if want != out.stdout {
        panic!(
            "output of attn-trace {args:?} differs from {}; if the change is intended, run UPDATE_GOLDEN=1 cargo test golden and review the diff\n--- got ---\n{}",
            path.display(),
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

#[test]
fn golden_table_seed000() {
    golden("seed000.table.txt", &["my shoes are small, my feet are big.", "--heads", "2"]);
}

#[test]
fn golden_json_seed000() {
    golden("seed000.json", &["my shoes are small, my feet are big.", "--heads", "2", "--format", "json"]);
}

#[test]
fn golden_table_wide_split_into_blocks() {
    golden(
        "wide.table.txt",
        &[
            "life is short eat dessert first",
            "--d-model",
            "16",
            "--heads",
            "2",
            "--steps",
            "embed.sum,weights,ffn.hidden",
            "--causal",
        ],
    );
}

#[test]
fn golden_json_selection() {
    golden(
        "selection.json",
        &[
            "my shoes are small",
            "--heads",
            "2",
            "--layers",
            "2",
            "--layer",
            "1",
            "--head",
            "1",
            "--steps",
            "weights,context",
            "--format",
            "json",
        ],
    );
}

#[test]
fn golden_summary_tiny_bert_pair() {
    golden("tiny-bert-pair.summary.txt", &["my shoes are small.", "my feet are big.", "--model", "fixtures/tiny-bert"]);
}

#[test]
fn golden_json_tiny_bert_selection() {
    golden(
        "tiny-bert.json",
        &[
            "the cats played",
            "--model",
            "fixtures/tiny-bert",
            "--format",
            "json",
            "--steps",
            "embed,weights",
            "--layer",
            "1",
        ],
    );
}
