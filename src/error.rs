//! Error kinds and the exit codes they map to.
//!
//! Every message reads `<what>: <why> (<fix>)`; main prefixes `attn-trace: `. Exit codes:
//! 0 success, 1 a runtime failure, 2 a usage error (bad flag, value, combination or input
//! file: anything the user fixes in the command or its inputs).

use std::fmt;

/// An error the user fixes by changing the command or its input files: exit code 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Builds a usage error from `what`, `why` and `fix`.
pub fn usage(what: impl fmt::Display, why: impl fmt::Display, fix: impl fmt::Display) -> anyhow::Error {
    anyhow::Error::new(UsageError(format!("{what}: {why} ({fix})")))
}

/// An I/O error as a message: the OS's words without Rust's `(os error N)` suffix.
pub fn describe(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// A user's value quoted in a message: Rust string syntax (so control characters show as
/// escapes) and at most 40 characters, so a 10,000-character step name cannot flood stderr.
pub fn quote(s: &str) -> String {
    if s.chars().count() <= 40 {
        format!("{s:?}")
    } else {
        let head: String = s.chars().take(39).collect();
        format!("{head:?}… ({} characters)", s.chars().count())
    }
}

/// The documented exit codes.
pub mod exit {
    pub const OK: u8 = 0;
    pub const FAILURE: u8 = 1;
    pub const USAGE: u8 = 2;
}

/// The exit code an error maps to.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    if err.chain().any(|e| e.downcast_ref::<UsageError>().is_some()) {
        exit::USAGE
    } else {
        exit::FAILURE
    }
}

/// Whether the error is a closed output pipe (`attn-trace … | head -1`), which is not a failure.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain()
        .any(|e| e.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
}

#[cfg(test)]
mod tests {
    #[test]
    fn quotes_are_short_and_visible() {
        assert_eq!(super::quote("shoes"), "\"shoes\"");
        assert_eq!(super::quote("a\u{1b}b"), "\"a\\u{1b}b\"");
        let long = super::quote(&"x".repeat(10_000));
        assert!(long.len() < 70 && long.ends_with("(10000 characters)"), "{long}");
    }
}
