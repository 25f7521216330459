//! Writing a file the user named (`--html`, `--svg`, `--save-trace`, `--save-weights`, the
//! Python `Trace.save`), so that nothing but the named output is ever replaced.
//!
//! What the path is decides how it is written:
//! - a regular file, or nothing yet: whole or not at all. The bytes go to a new temporary file
//!   beside it (created exclusively, so a planted name or symlink is never followed; named by
//!   the process id and a counter, so two runs never share one), flushed to disk, and renamed
//!   over the target only when the whole run has succeeded ([`Pending::commit`]): a failure
//!   anywhere (a full disk, a later file's error, a bad flag found after the parameters) leaves
//!   no file and an existing one untouched, and two runs writing one path leave one run's
//!   whole file. The new file keeps the permissions of the one it replaces;
//! - a symlink: followed. The temporary file is made beside the file it resolves to (for a
//!   dangling one, the file it names is created), so the link stays a link and its target gets
//!   the bytes, as `> link` does in a shell. A loop is refused;
//! - a character device or a FIFO (`/dev/null`, a terminal, a named pipe), and a path in
//!   `/proc/` or a link into it (`/dev/stdout`): written in place at once, never replaced
//!   (replacing `/dev/full` as root once turned the device into a regular file);
//! - a directory, a block device or a socket: refused, since no write of a trace into one
//!   can be what was meant.

use crate::error::{describe, usage};
use anyhow::Result;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// How many symlinks a path may pass through, as Linux's `MAXSYMLINKS`.
const MAX_LINKS: usize = 40;

/// Writes `bytes` to `path` as its kind asks (see the module's comment), at once. `flag`
/// names the option in the error message.
pub fn write_file(flag: &str, path: &Path, bytes: &[u8]) -> Result<()> {
    let mut one = Pending::default();
    one.write(flag, path, bytes)?;
    one.commit()
}

/// Whether `path` can be written as its kind asks, checked before the run computes anything
/// (so that a missing or read-only folder is said at once, not after the forward pass, and a
/// `--format jsonl` run never streams a trace whose file then fails). Writing checks again.
pub fn check_file(flag: &str, path: &Path) -> Result<()> {
    let what = format!("{flag} {}", path.display());
    let fix = "check that the directory exists and is writable";
    if let Destination::Replace(target) =
        destination(path).map_err(|e| usage(&what, e, "name a regular file in a writable directory"))?
    {
        let dir = folder(&target);
        let meta = fs::metadata(dir).map_err(|e| failed(&what, path, dir, &e))?;
        if !meta.is_dir() {
            return Err(usage(&what, format!("{} is not a directory", dir.display()), fix));
        }
        let c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(dir.as_os_str()));
        // SAFETY: access only reads the NUL-terminated path.
        if c.is_ok_and(|c| unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } != 0) {
            return Err(failed(&what, path, dir, &io::Error::last_os_error()));
        }
    }
    Ok(())
}

/// A run's files, each written whole to its temporary file and put in place together by
/// [`Pending::commit`]; dropped uncommitted (the run failed), the temporary files are removed.
#[derive(Debug, Default)]
pub struct Pending {
    staged: Vec<Staged>,
}

/// One file written beside its target, not yet renamed over it.
#[derive(Debug)]
struct Staged {
    /// `--html page.html`, for the error message.
    what: String,
    tmp: PathBuf,
    target: PathBuf,
    /// Its place in the list the signal handler removes ([`super::interrupt`]).
    held: Option<usize>,
}

impl Pending {
    /// Writes `bytes` for `path`: a device or FIFO in place now, a file to its temporary file.
    pub fn write(&mut self, flag: &str, path: &Path, bytes: &[u8]) -> Result<()> {
        let what = format!("{flag} {}", path.display());
        match destination(path).map_err(|e| usage(&what, e, "name a regular file in a writable directory"))? {
            Destination::InPlace => in_place(path, bytes).map_err(|e| {
                usage(&what, describe(&e), "name a device or pipe that accepts writing, or a regular file")
            }),
            Destination::Replace(target) => {
                let (tmp, held) = temporary(&target, bytes).map_err(|e| failed(&what, path, &target, &e))?;
                self.staged.push(Staged { what, tmp, target, held });
                Ok(())
            }
        }
    }

    /// Renames every file over its target, in the order written, then makes the renames
    /// durable (the folders synced). A rename that fails ends the commit with its error, and
    /// the files not yet renamed are removed.
    pub fn commit(&mut self) -> Result<()> {
        for mut s in std::mem::take(&mut self.staged) {
            let renamed = fs::rename(&s.tmp, &s.target);
            if renamed.is_ok() {
                s.tmp = PathBuf::new(); // nothing left to remove
            }
            let done = renamed.map_err(|e| failed(&s.what, &s.target, &s.target, &e));
            let dir = folder(&s.target).to_path_buf();
            drop(s); // releases its slot (and removes the temporary file if the rename failed)
            done?;
            // Best effort: the rename is already visible; this only makes it survive a crash.
            let _ = fs::File::open(&dir).and_then(|d| d.sync_all());
        }
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Some(slot) = self.held {
            super::interrupt::release(slot);
        }
        if !self.tmp.as_os_str().is_empty() {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// The error of writing `path` (whose file is `target`).
fn failed(what: &str, path: &Path, target: &Path, e: &io::Error) -> anyhow::Error {
    let why = if target == path { describe(e) } else { format!("{} ({})", describe(e), target.display()) };
    usage(what, why, "check that the directory exists and is writable")
}

/// Where and how the bytes go.
#[derive(Debug, PartialEq)]
enum Destination {
    /// Opened and written as it is (a device, a FIFO).
    InPlace,
    /// A regular file that is (or will be) replaced whole, the symlinks resolved.
    Replace(PathBuf),
}

/// Decides how `path` is written, or why it cannot be.
fn destination(path: &Path) -> std::result::Result<Destination, String> {
    if path.file_name().is_none() {
        return Err("it names no file".into());
    }
    let Some(target) = resolve(path)? else { return Ok(Destination::InPlace) };
    match fs::metadata(&target) {
        Ok(m) => kind(&m, target),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Destination::Replace(target)),
        Err(e) => Err(describe(&e)),
    }
}

/// The destination that an existing file of metadata `m` at `target` calls for.
fn kind(m: &fs::Metadata, target: PathBuf) -> std::result::Result<Destination, String> {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    if t.is_file() {
        Ok(Destination::Replace(target))
    } else if t.is_dir() {
        Err("it is a directory".into())
    } else if t.is_char_device() || t.is_fifo() {
        Ok(Destination::InPlace)
    } else if t.is_block_device() {
        Err("it is a block device, which a trace would overwrite".into())
    } else {
        Err("it is a socket or another special file".into())
    }
}

/// `path` with every symlink in its last component followed (a dangling link gives the path
/// it names), or an error for a loop. Its folders are left as they are: the rename happens in
/// the folder the final name lives in, wherever that is reached from. None for a path in
/// `/proc` or a link into it (`/dev/stdout` → `/proc/self/fd/1`): this process's own streams,
/// which are written, never replaced, whatever they point to.
fn resolve(path: &Path) -> std::result::Result<Option<PathBuf>, String> {
    let mut p = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        if p.starts_with("/proc") {
            return Ok(None);
        }
        match fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let link = fs::read_link(&p).map_err(|e| describe(&e))?;
                p = match p.parent() {
                    Some(dir) if link.is_relative() => dir.join(link),
                    _ => link,
                };
            }
            _ => return Ok(Some(p)),
        }
    }
    Err(format!("it is a symlink that loops or passes through more than {MAX_LINKS} links"))
}

/// Writes to an existing device or FIFO without creating or replacing it (a regular file
/// reached through `/proc` is truncated first, as a shell's `>` does).
fn in_place(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = OpenOptions::new().write(true).open(path)?;
    if f.metadata()?.is_file() {
        f.set_len(0)?;
    }
    f.write_all(bytes)?;
    f.flush()
}

/// The folder `target` is in (`.` for a bare name).
fn folder(target: &Path) -> &Path {
    match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// A new temporary file beside `target` holding `bytes`, flushed to disk, with the mode of
/// the file it will replace (a new file gets the umask's); removed again if any step fails.
/// Held for the signal handler from the moment it exists ([`super::interrupt::hold`]).
fn temporary(target: &Path, bytes: &[u8]) -> io::Result<(PathBuf, Option<usize>)> {
    // A file name is at most 255 bytes: the temporary name keeps a prefix of the target's.
    let name = target.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    let cut = (0..=name.len().min(180)).rev().find(|&i| name.is_char_boundary(i)).unwrap_or(0);
    let mut n = 0;
    let (tmp, file) = loop {
        let tmp = folder(target).join(format!(".{}.{}.{n}.tmp", &name[..cut], std::process::id()));
        // create_new is O_EXCL: an existing name (a planted symlink, a stale file of a process
        // with the same id, this run's other file of the same name) is never followed or
        // reused; the next name is tried instead.
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 100 => n += 1,
            opened => break (tmp, opened?),
        }
    };
    let held = super::interrupt::hold(&tmp);
    let written = (|| {
        let mut f = file;
        f.write_all(bytes)?;
        match fs::metadata(target) {
            Ok(m) if m.is_file() => f.set_permissions(fs::Permissions::from_mode(m.permissions().mode() & 0o7777))?,
            _ => {}
        }
        f.sync_all()
    })();
    match written {
        Ok(()) => Ok((tmp, held)),
        Err(e) => {
            held.into_iter().for_each(super::interrupt::release);
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{destination, Destination, Pending};
    use std::path::Path;

    #[test]
    fn pending_files_appear_together_on_commit_and_never_when_dropped() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a.html"), d.path().join("b.svg"));
        std::fs::write(&a, "old").unwrap();
        let listing = || {
            let mut n: Vec<String> =
                std::fs::read_dir(d.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
            n.sort();
            n
        };
        let mut dropped = Pending::default();
        dropped.write("--html", &a, b"new").unwrap();
        dropped.write("--svg", &b, b"new").unwrap();
        assert_eq!(listing().len(), 3, "two temporary files beside a.html");
        drop(dropped);
        assert_eq!((listing(), std::fs::read_to_string(&a).unwrap()), (vec!["a.html".to_string()], "old".into()));
        let mut kept = Pending::default();
        kept.write("--html", &a, b"new").unwrap();
        kept.write("--svg", &b, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "old", "nothing is in place before the commit");
        kept.commit().unwrap();
        assert_eq!(listing(), vec!["a.html".to_string(), "b.svg".to_string()]);
        assert_eq!(std::fs::read_to_string(&b).unwrap(), "new");
    }

    #[test]
    fn devices_and_proc_are_written_in_place() {
        for p in ["/dev/null", "/dev/full", "/dev/stdout", "/proc/self/fd/1"] {
            assert_eq!(destination(Path::new(p)), Ok(Destination::InPlace), "{p}");
        }
    }

    #[test]
    fn symlinks_resolve_to_their_targets() {
        let d = tempfile::tempdir().unwrap();
        let (file, link, dangling, lp) =
            (d.path().join("f"), d.path().join("l"), d.path().join("d"), d.path().join("a"));
        std::fs::write(&file, b"x").unwrap();
        std::os::unix::fs::symlink("f", &link).unwrap();
        std::os::unix::fs::symlink(d.path().join("new"), &dangling).unwrap();
        std::os::unix::fs::symlink("a", &lp).unwrap();
        assert_eq!(destination(&link), Ok(Destination::Replace(d.path().join("f"))));
        assert_eq!(destination(&dangling), Ok(Destination::Replace(d.path().join("new"))));
        assert!(destination(&lp).unwrap_err().contains("loops"));
        assert!(destination(d.path()).unwrap_err().contains("directory"));
    }
}
