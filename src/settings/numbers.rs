//! Flag values that are numbers: lists of indices, sizes that must not be zero.

use crate::error::usage;
use anyhow::Result;

/// `--layer` and `--head`: `3`, `0,3`, `1-4` or a mix (`0,2-3`), as a sorted list without
/// repeats.
pub(crate) fn index_list(flag: &str, given: &str) -> Result<Vec<usize>> {
    let bad = |why: String| {
        usage(
            format!("{flag} {}", crate::error::quote(given)),
            why,
            format!("pass a number, a list or a range, e.g. {flag} 0,3 or {flag} 1-4"),
        )
    };
    let number = |s: &str| {
        s.trim().parse::<usize>().map_err(|_| bad(format!("{} is not a number", crate::error::quote(s.trim()))))
    };
    let mut out = Vec::new();
    for item in given.split(',') {
        match item.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (number(a)?, number(b)?);
                if a > b {
                    return Err(bad(format!("the range {a}-{b} runs backwards")));
                }
                if b - a > 1 << 16 {
                    return Err(bad(format!("the range {a}-{b} is too long")));
                }
                out.extend(a..=b);
            }
            None => out.push(number(item)?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Rejects a zero for a flag that names a size.
pub(crate) fn nonzero(flag: &str, v: Option<usize>) -> Result<Option<usize>> {
    match v {
        Some(0) => Err(usage(flag, "must be at least 1", format!("pass a positive number, e.g. {flag} 2"))),
        _ => Ok(v),
    }
}
