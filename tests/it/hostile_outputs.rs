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
