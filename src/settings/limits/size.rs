//! Sizes in bytes, read from a flag (`--max-memory`, `--max-output`) and written for people.

use crate::error::usage;
use anyhow::Result;

pub fn parse_size(s: &str) -> Result<u128> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: u128 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "kib" => 1 << 10,
        "m" | "mb" => 1_000_000,
        "mib" => 1 << 20,
        "g" | "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        "t" | "tb" => 1_000_000_000_000,
        "tib" => 1 << 40,
        _ => return Err(bad_size(s)),
    };
    let n: u128 = num.parse().map_err(|_| bad_size(s))?;
    Ok(n.saturating_mul(mult))
}

fn bad_size(s: &str) -> anyhow::Error {
    usage(
        "--max-memory",
        format!("{} is not a size", crate::error::quote(s)),
        "write e.g. 512MiB, 8GiB, a number of bytes, or auto",
    )
}

pub fn human_f(bytes: f64) -> String {
    if bytes < 1.2e21 {
        human(bytes as u128)
    } else {
        format!("{bytes:.1e} B")
    }
}

/// 1536 → "1.5 KiB".
pub fn human(bytes: u128) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < units.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", units[i])
    }
}
