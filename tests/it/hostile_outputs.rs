//! Hostile input, round three (issue 27), class 1: an output path that is a device, a FIFO, a
//! symlink or a directory. Nothing but the named output is ever replaced: devices and FIFOs
//! are written in place, symlinks are followed (the link stays, its target gets the bytes),
//! loops, directories and sockets are refused; no temporary file is left behind.

use crate::common::{cmd, refused_output};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::process::Output;

/// A short trace writing `flag path`.
fn write(flag: &str, path: &Path) -> Output {
    cmd().args(["my shoes are small", "--heads", "2", "--quiet", flag]).arg(path).output().unwrap()
}

/// A refusal ([`refused_output`]) naming `fragment`, with no panic.
fn refused(out: &Output, fragment: &str) {
    let err = refused_output(out, format!("the run refused with {fragment:?}"), fragment);
    assert!(!err.contains("panicked"), "{err}");
}

/// The folder holds no temporary file of ours.
fn no_temporary(dir: &Path) {
    for e in std::fs::read_dir(dir).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().to_string();
        assert!(!name.ends_with(".tmp"), "left behind: {name}");
    }
}

#[test]
fn devices_are_written_in_place_never_replaced() {
    let rdev = |p: &str| std::fs::metadata(p).map(|m| (m.file_type().is_char_device(), m.rdev())).unwrap();
    let (null, full) = (rdev("/dev/null"), rdev("/dev/full"));
    for flag in ["--html", "--svg", "--save-weights"] {
        let out = write(flag, Path::new("/dev/null"));
        assert!(out.status.success(), "{flag} /dev/null: {}", String::from_utf8_lossy(&out.stderr));
        // A full device is a full disk: refused with the OS's words, and still a device.
        refused(&write(flag, Path::new("/dev/full")), "No space left on device");
    }
    assert_eq!((rdev("/dev/null"), rdev("/dev/full")), (null, full), "a device was replaced");
    assert!(null.0 && full.0);
}

#[test]
fn dev_stdout_gets_the_bytes_on_stdout() {
    let out = cmd().args(["my shoes are small", "--heads", "2", "--svg", "/dev/stdout", "--format", "json"]).output();
    let out = out.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    // The picture first (files are written before stdout), then the document.
    assert!(text.starts_with("<svg") || text.starts_with("<?xml"), "{}", &text[..60.min(text.len())]);
    assert!(text.contains("</svg>") && text.contains("\"steps\""));
}

#[test]
fn a_fifo_is_written_in_place() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("pipe");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    let out = write("--html", &fifo);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let page = reader.join().unwrap();
    assert!(page.starts_with(b"<!DOCTYPE html>") || page.starts_with(b"<!doctype html>"), "{} bytes", page.len());
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(), "the FIFO was replaced");
    no_temporary(d.path());
}

#[test]
fn symlinks_are_followed_and_kept() {
    let d = tempfile::tempdir().unwrap();
    let (target, link) = (d.path().join("target.safetensors"), d.path().join("link.safetensors"));
    std::fs::write(&target, b"old").unwrap();
    std::os::unix::fs::symlink("target.safetensors", &link).unwrap();
    assert!(write("--save-trace", &link).status.success());
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link was replaced");
    assert!(std::fs::read(&target).unwrap().len() > 100, "the target did not get the trace");

    // A dangling link: the file it names is created, the link stays.
    let (named, dangling) = (d.path().join("sub").join("page.html"), d.path().join("dangling.html"));
    std::fs::create_dir(d.path().join("sub")).unwrap();
    std::os::unix::fs::symlink(&named, &dangling).unwrap();
    assert!(write("--html", &dangling).status.success());
    assert!(std::fs::symlink_metadata(&dangling).unwrap().file_type().is_symlink());
    assert!(std::fs::read_to_string(&named).unwrap().contains("</html>"));
    no_temporary(d.path());
    no_temporary(&d.path().join("sub"));
}

#[test]
fn loops_directories_and_sockets_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (d.path().join("a.html"), d.path().join("b.html"));
    std::os::unix::fs::symlink(&b, &a).unwrap();
    std::os::unix::fs::symlink(&a, &b).unwrap();
    refused(&write("--html", &a), "loops");
    refused(&write("--svg", d.path()), "directory");
    let dir_link = d.path().join("dir-link.npz");
    std::os::unix::fs::symlink(d.path(), &dir_link).unwrap();
    refused(&write("--save-trace", &dir_link), "directory");
    let sock = d.path().join("s.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    refused(&write("--html", &sock), "socket");
    assert!(std::fs::symlink_metadata(&sock).unwrap().file_type().is_socket(), "the socket was replaced");
    refused(&write("--html", &d.path().join("missing").join("x.html")), "No such file or directory");
    no_temporary(d.path());
}

#[test]
fn a_read_only_directory_is_refused_and_left_alone() {
    // Root writes anywhere; the check means something only for another user.
    if unsafe { libc::geteuid() } == 0 {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let ro = d.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::set_permissions(&ro, std::os::unix::fs::PermissionsExt::from_mode(0o555)).unwrap();
    refused(&write("--html", &ro.join("x.html")), "Permission denied");
    no_temporary(&ro);
}

// Round four (issue 48), class 6: two processes, one output path; a run's files are put in
// place together, only when the run succeeds.

/// The folder's temporary files of ours (`.NAME.PID.N.tmp`).
fn temporaries(dir: &Path) -> Vec<String> {
    let names = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().to_string());
    names.filter(|n| n.ends_with(".tmp")).collect()
}

#[test]
fn two_runs_writing_the_same_paths_leave_one_whole_file_each() {
    let d = tempfile::tempdir().unwrap();
    let args = |sentence: &str, stem: &str| -> Vec<String> {
        let p = |ext: &str| d.path().join(format!("{stem}.{ext}")).display().to_string();
        let files = ["--save-trace", &p("npz"), "--html", &p("html"), "--save-weights", &p("safetensors")];
        [sentence, "--heads", "2", "--quiet", "--format", "json"].iter().chain(&files).map(|s| s.to_string()).collect()
    };
    let (a, b) = ("my shoes are small", "your feet are big and my shoes are small");
    for (sentence, stem) in [(a, "a"), (b, "b")] {
        assert!(cmd().args(args(sentence, stem)).output().unwrap().status.success());
    }
    let read = |stem: &str, ext: &str| std::fs::read(d.path().join(format!("{stem}.{ext}"))).unwrap();
    for round in 0..8 {
        let spawn = |sentence: &str| {
            let bin = env!("CARGO_BIN_EXE_attn-trace");
            let quiet = std::process::Stdio::null();
            std::process::Command::new(bin).args(args(sentence, "same")).stdout(quiet).spawn().unwrap()
        };
        let (mut first, mut second) = (spawn(a), spawn(b));
        assert!(first.wait().unwrap().success() && second.wait().unwrap().success(), "round {round}");
        for ext in ["npz", "html", "safetensors"] {
            let got = read("same", ext);
            assert!(got == read("a", ext) || got == read("b", ext), "round {round}: same.{ext} is a mix");
        }
        assert_eq!(temporaries(d.path()), Vec::<String>::new(), "round {round}");
    }
}

#[test]
fn a_run_that_fails_leaves_no_file_and_the_old_ones_as_they_were() {
    let d = tempfile::tempdir().unwrap();
    let (page, weights, full) = (d.path().join("page.html"), d.path().join("w.safetensors"), d.path().join("full.npz"));
    std::fs::write(&page, "old").unwrap();
    std::os::unix::fs::symlink("/dev/full", &full).unwrap();
    // The page and the weights are ready before --save-trace fails on a full device; before,
    // both were already in place (the old page replaced) when the run ended with exit 2.
    let out = cmd()
        .args(["my shoes", "--quiet", "--html", page.to_str().unwrap(), "--save-weights", weights.to_str().unwrap()])
        .args(["--save-trace", full.to_str().unwrap()])
        .output()
        .unwrap();
    refused(&out, "No space left on device");
    assert_eq!(std::fs::read_to_string(&page).unwrap(), "old", "the old page was replaced");
    assert!(!weights.exists(), "the weights of a failed run were left behind");
    assert_eq!(temporaries(d.path()), Vec::<String>::new());
    // A folder that does not exist is found before anything is computed: with --format jsonl
    // the trace was streamed to stdout before the run failed.
    let missing = d.path().join("missing").join("t.npz");
    let out =
        cmd().args(["my shoes", "--format", "jsonl", "--save-trace", missing.to_str().unwrap()]).output().unwrap();
    refused(&out, "No such file or directory");
}

#[test]
fn a_replaced_file_keeps_its_mode_and_a_long_name_is_written() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let page = d.path().join("private.html");
    std::fs::write(&page, "old").unwrap();
    std::fs::set_permissions(&page, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(write("--html", &page).status.success());
    let mode = std::fs::metadata(&page).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the page became {mode:o}");
    // 250 bytes is a legal name; the temporary file's name once grew past 255 and was refused.
    let long = d.path().join(format!("{}.html", "p".repeat(245)));
    let out = write("--html", &long);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::read_to_string(&long).unwrap().contains("</html>"));
    assert_eq!(temporaries(d.path()), Vec::<String>::new());
}

#[test]
fn an_interrupted_run_leaves_no_temporary_file() {
    use std::os::unix::process::ExitStatusExt;
    let d = tempfile::tempdir().unwrap();
    let (weights, pipe) = (d.path().join("w.safetensors"), d.path().join("pipe.html"));
    assert!(std::process::Command::new("mkfifo").arg(&pipe).status().unwrap().success());
    // The weights wait in their temporary file while the page is written to a FIFO nobody
    // reads: the run stops there until it is killed.
    let bin = env!("CARGO_BIN_EXE_attn-trace");
    let mut child = std::process::Command::new(bin)
        .args(["my shoes", "--quiet", "--save-weights", weights.to_str().unwrap(), "--html", pipe.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while temporaries(d.path()).is_empty() {
        assert!(start.elapsed().as_secs() < 30, "no temporary file appeared");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The run then waits on the FIFO for good; the pause only lets it get there.
    std::thread::sleep(std::time::Duration::from_millis(300));
    // SAFETY: a signal to our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
    assert_eq!(temporaries(d.path()), Vec::<String>::new(), "the temporary file stayed");
    assert!(!weights.exists());
}
