//! Reading a file the user named as an input (`--steer`, `diff`'s traces, `--weights`,
//! `--input`, `--vocab`, `--file`, a model folder's JSON files), bounded by what the file is.
//!
//! A path is opened without blocking (so that a named pipe with no writer reads as empty
//! instead of waiting forever), then what it is decides how much is read:
//! - a regular file: exactly its size, known before a byte is read, so a file that grows while
//!   it is read (or a size the file system reports as 0 for a `/proc` file, read up to the cap)
//!   cannot make the read unbounded, and a size larger than memory can hold is refused before
//!   the buffer exists;
//! - a pipe (`<(…)`, a FIFO with a writer): up to the caller's cap, refused beyond it;
//! - a folder, a device (`/dev/zero`, `/dev/urandom`, a terminal), a socket: refused, since
//!   none is a file of data, and the first two would be read forever.
//!
//! Symlinks are followed; a loop is the OS's refusal (`Too many levels of symbolic links`).

use crate::error::{describe, usage};
use anyhow::Result;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The cap for inputs that may be as large as a trace: far more than any real steering vector,
/// trace or toy weights file, far less than a stream of zeros would reach.
pub const LARGE: u64 = 16 << 30;

/// The cap for a model's JSON files (config.json, an index, generation_config.json), which
/// hold a few kilobytes: a thousand times that is still a mistake, not a model.
pub const CONFIG: u64 = 64 << 20;

/// The bytes of the file at `path`, read as its kind allows (the module's comment), at most
/// `cap` bytes. Errors are one line: `what` names the option and file, `fix` says what to pass.
pub fn bytes(what: &str, path: &Path, fix: &str, cap: u64) -> Result<Vec<u8>> {
    let (file, size) = open(what, path, fix)?;
    read_bounded(file, size, cap).map_err(|why| usage(what, why, fix))
}

/// As [`bytes`] with the cap of inputs as large as a trace ([`LARGE`]).
pub fn read(what: &str, path: &Path, fix: &str) -> Result<Vec<u8>> {
    bytes(what, path, fix, LARGE)
}

/// As [`bytes`], as UTF-8 text (an error names the offset of the first byte that is not).
pub fn text(what: &str, path: &Path, fix: &str, cap: u64) -> Result<String> {
    let bytes = bytes(what, path, fix, cap)?;
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        usage(what, format!("not UTF-8: byte 0x{:02x} at offset {at}", e.as_bytes()[at]), fix)
    })
}

/// Opens `path` for reading without blocking on a FIFO, refusing what is not a file of data;
/// returns the file and, for a regular file, its size (None for a pipe, or a `/proc` file whose
/// size reads as 0).
pub fn open(what: &str, path: &Path, fix: &str) -> Result<(File, Option<u64>)> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| usage(what, describe(&e), fix))?;
    let meta = file.metadata().map_err(|e| usage(what, describe(&e), fix))?;
    let t = meta.file_type();
    let size = if t.is_file() && meta.len() > 0 {
        Some(meta.len())
    } else if t.is_file() || t.is_fifo() {
        None
    } else {
        let kind = if t.is_dir() {
            "it is a folder, not a file"
        } else if t.is_char_device() {
            "it is a character device (such as /dev/zero or a terminal), not a file"
        } else if t.is_block_device() {
            "it is a block device, not a file"
        } else {
            "it is a socket or another special file, not a file"
        };
        return Err(usage(what, kind, fix));
    };
    // Reads from here on wait for a pipe's writer, as any reader of a pipe does; the open
    // alone never waits (a FIFO nobody writes to gives end of file at once).
    blocking(&file).map_err(|e| usage(what, describe(&e), fix))?;
    Ok((file, size))
}

/// Clears `O_NONBLOCK`, which only the open needed.
fn blocking(file: &File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a descriptor this function's caller owns, with plain integer flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// A regular file's `size` bytes, or a stream's bytes up to `cap`; more than `cap` is refused.
fn read_bounded(file: File, size: Option<u64>, cap: u64) -> std::result::Result<Vec<u8>, String> {
    let mut buf = Vec::new();
    if let Some(size) = size {
        if size > cap {
            return Err(format!("it is {}, more than the {} this input may be", self::size(size), self::size(cap)));
        }
        // The size is a fact: reserve it (or say it cannot be held) rather than grow into it.
        buf.try_reserve_exact(size as usize)
            .map_err(|_| format!("it is {}, more than this process can hold", self::size(size)))?;
    }
    let limit = size.unwrap_or(cap);
    file.take(limit.saturating_add(1)).read_to_end(&mut buf).map_err(|e| describe(&e))?;
    if buf.len() as u64 > limit {
        return Err(match size {
            None => format!("it gives more than {}, the most this input may be", self::size(cap)),
            // A file that grew while it was read: its size when opened is what was named.
            Some(s) => format!("it grew while it was read (from {})", self::size(s)),
        });
    }
    Ok(buf)
}

/// A size in the unit that reads best: `512 bytes`, `3.0 MiB`, `2.5 GiB`.
pub fn size(bytes: u64) -> String {
    match bytes {
        b if b < 1 << 10 => format!("{b} bytes"),
        b if b < 1 << 20 => format!("{:.1} KiB", b as f64 / 1024.0),
        b if b < 1 << 30 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn why(path: &str) -> String {
        bytes("x", Path::new(path), "fix", 1 << 20).unwrap_err().to_string()
    }

    #[test]
    fn devices_and_folders_are_refused_without_reading() {
        assert!(why("/dev/zero").contains("character device"), "{}", why("/dev/zero"));
        assert!(why("/dev/urandom").contains("character device"));
        assert!(why("/tmp").contains("folder"));
        assert!(why("/no/such/file").contains("No such file or directory"));
    }

    #[test]
    fn a_fifo_with_no_writer_reads_as_empty_at_once() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("p");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(bytes("x", &fifo, "fix", 1 << 20).unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn a_file_is_read_whole_and_a_cap_holds() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("f");
        std::fs::write(&f, b"hello").unwrap();
        assert_eq!(bytes("x", &f, "fix", 5).unwrap(), b"hello");
        let err = bytes("x", &f, "fix", 4).unwrap_err().to_string();
        assert!(err.contains("5 bytes, more than the 4 bytes"), "{err}");
        // A /proc file reports size 0 and is read up to the cap.
        assert!(!bytes("x", Path::new("/proc/self/stat"), "fix", 1 << 20).unwrap().is_empty());
    }
}
