//! Hostile input, round four (issue 48), class 4: what a path names, for every option that
//! reads a file. A device was read until memory ran out (`/dev/zero`, `/dev/urandom`), a FIFO
//! nobody writes to hung the run; now a device, a folder, a loop and a missing file are
//! refused in one line before a byte is read, and a FIFO with no writer reads as empty (a pipe
//! with one, `<(attn-trace …)`, is still read).

use super::hostile_inputs::{fifo, file, refuses};
use crate::common::root;
use std::path::Path;

/// The ways a path can fail to be a file, each with what the refusal says: a symlink to each
/// endless device, a FIFO with no writer, a folder, a symlink loop, nothing at all.
fn bad_paths(dir: &Path, ext: &str) -> Vec<(String, &'static str)> {
    let link = |name: &str, to: &Path| {
        let p = dir.join(format!("{name}{ext}"));
        std::os::unix::fs::symlink(to, &p).unwrap();
        p.display().to_string()
    };
    let folder = dir.join(format!("folder{ext}"));
    std::fs::create_dir(&folder).unwrap();
    let (a, b) = (dir.join(format!("a{ext}")), dir.join(format!("b{ext}")));
    std::os::unix::fs::symlink(&b, &a).unwrap();
    std::os::unix::fs::symlink(&a, &b).unwrap();
    vec![
        (link("zero", Path::new("/dev/zero")), "character device"),
        (link("random", Path::new("/dev/urandom")), "character device"),
        (fifo(dir, &format!("pipe{ext}")).display().to_string(), ""),
        (folder.display().to_string(), "folder"),
        (a.display().to_string(), "symbolic links"),
        (dir.join(format!("missing{ext}")).display().to_string(), "No such file or directory"),
    ]
}

#[test]
fn every_option_that_reads_a_file_refuses_devices_fifos_folders_and_loops() {
    type Args = fn(&str) -> Vec<String>;
    let options: [(&str, Args); 7] = [
        (".npy", |p| vec!["my shoes".into(), "--steer".into(), format!("0:{p}")]),
        (".json", |p| vec!["diff".into(), p.into(), root().join("fixtures/golden/seed000.json").display().to_string()]),
        (".safetensors", |p| vec!["my shoes".into(), "--weights".into(), p.into()]),
        (".json", |p| vec!["--input".into(), p.into()]),
        (".txt", |p| vec!["my shoes".into(), "--vocab".into(), p.into()]),
        (".txt", |p| vec!["--file".into(), p.into()]),
        (".txt", |p| vec!["--batch".into(), p.into()]),
    ];
    for (ext, args) in options {
        let d = tempfile::tempdir().unwrap();
        for (path, fragment) in bad_paths(d.path(), ext) {
            let args = args(&path);
            refuses(&args.iter().map(String::as_str).collect::<Vec<_>>(), fragment);
        }
    }
}

#[test]
fn a_model_folder_whose_files_are_devices_or_fifos_is_refused() {
    let d = tempfile::tempdir().unwrap();
    for name in ["config.json", "tokenizer.json"] {
        for zero in [true, false] {
            let model =
                crate::hostile_files::folder(&d.path().join(format!("{name}-{zero}")), "decoders/llama-gqa", |_| {});
            std::fs::remove_file(model.join(name)).unwrap();
            if zero {
                std::os::unix::fs::symlink("/dev/zero", model.join(name)).unwrap();
            } else {
                super::hostile_inputs::fifo(&model, name);
            }
            let fragment = if zero { "character device" } else { "EOF while parsing" };
            refuses(&["my shoes", "--model", model.to_str().unwrap()], fragment);
            // A batch looks at config.json first, to share a decoder's parameters: it hung.
            let batch = file(&model, "batch.txt", b"my shoes\nyour feet\n");
            refuses(&["--batch", batch.to_str().unwrap(), "--model", model.to_str().unwrap()], fragment);
        }
    }
    // --model naming a device or a FIFO says what it is (it said "no such folder").
    let gguf = d.path().join("zero.gguf");
    std::os::unix::fs::symlink("/dev/zero", &gguf).unwrap();
    refuses(&["my shoes", "--model", gguf.to_str().unwrap()], "a device, pipe or socket");
    let pipe = fifo(d.path(), "pipe.gguf");
    refuses(&["my shoes", "--model", pipe.to_str().unwrap()], "a device, pipe or socket");
}

#[test]
fn a_pipe_with_a_writer_is_still_read() {
    let d = tempfile::tempdir().unwrap();
    let trace = crate::common::cmd().args(["my shoes", "--format", "json"]).output().unwrap().stdout;
    let saved = file(d.path(), "t.json", &trace);
    // Process substitution: /dev/fd/N is a pipe whose writer exists before attn-trace starts.
    let bin = env!("CARGO_BIN_EXE_attn-trace");
    let script = format!("exec {bin} diff <(cat '{0}') '{0}'", saved.display());
    let out = std::process::Command::new("bash").args(["-c", &script]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}
