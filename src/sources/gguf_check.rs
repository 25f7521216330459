//! A light scan of a GGUF header, before candle's reader sees the file (issue 27). candle
//! keeps the metadata and the tensor table in hash maps, so a key or tensor given twice is
//! silently the last one; it divides by `general.alignment` (0 panics), ignores an alignment
//! of a type it does not expect (then 32 is used), and never checks that a tensor's offset is
//! aligned. This scan reads the header layout itself (magic, version, tensor count, key count,
//! the keys with their types, the tensor infos) without keeping any value, and refuses those.

use crate::error::usage;
use anyhow::Result;
use std::collections::BTreeSet;
use std::io::{BufRead, Read, Seek};

/// The nesting of arrays candle accepts.
const MAX_DEPTH: usize = 64;

/// GGUF value types by their number: (name, fixed size in bytes; 0 for a string or array).
fn value_type(t: u32) -> Option<(&'static str, u64)> {
    const TYPES: [(&str, u64); 13] = [
        ("u8", 1),
        ("i8", 1),
        ("u16", 2),
        ("i16", 2),
        ("u32", 4),
        ("i32", 4),
        ("f32", 4),
        ("bool", 1),
        ("string", 0),
        ("array", 0),
        ("u64", 8),
        ("i64", 8),
        ("f64", 8),
    ];
    TYPES.get(t as usize).copied()
}

struct Scan<'r, R> {
    r: &'r mut R,
    pos: u64,
    len: u64,
    /// Whether lengths and dimensions are u64 (versions 2 and 3) or u32 (version 1).
    wide: bool,
}

impl<R: BufRead + Seek> Scan<'_, R> {
    fn bytes<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut b = [0u8; N];
        self.r.read_exact(&mut b).map_err(|_| format!("the header ends early, at byte {}", self.pos))?;
        self.pos += N as u64;
        Ok(b)
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.bytes()?))
    }

    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.bytes()?))
    }

    fn length(&mut self) -> Result<u64, String> {
        if self.wide {
            self.u64()
        } else {
            self.u32().map(u64::from)
        }
    }

    fn skip(&mut self, n: u64) -> Result<(), String> {
        if n > self.len.saturating_sub(self.pos) {
            return Err(format!("a value of {n} bytes at byte {} runs past the end of the file", self.pos));
        }
        if n > 1 << 20 {
            self.r.seek(std::io::SeekFrom::Current(n as i64)).map_err(|e| e.to_string())?;
        } else {
            std::io::copy(&mut self.r.by_ref().take(n), &mut std::io::sink()).map_err(|e| e.to_string())?;
        }
        self.pos += n;
        Ok(())
    }

    fn string(&mut self) -> Result<String, String> {
        let n = self.length()?;
        if n > self.len.saturating_sub(self.pos) {
            return Err(format!("a string of {n} bytes at byte {} runs past the end of the file", self.pos));
        }
        let mut s = Vec::with_capacity(n as usize);
        self.r.by_ref().take(n).read_to_end(&mut s).map_err(|e| e.to_string())?;
        self.pos += n;
        Ok(String::from_utf8_lossy(&s).into_owned())
    }

    /// Skips a value of type `t`; a scalar integer's value is returned.
    fn value(&mut self, t: u32, depth: usize) -> Result<Option<i128>, String> {
        let (name, size) = value_type(t).ok_or(format!("value type {t} is not a GGUF type"))?;
        match name {
            "string" => self.string().map(|_| None),
            "array" if depth < MAX_DEPTH => {
                let (t, n) = (self.u32()?, self.length()?);
                let (_, size) = value_type(t).ok_or(format!("value type {t} is not a GGUF type"))?;
                if size > 0 {
                    return self.skip(n.saturating_mul(size)).map(|_| None);
                }
                let least = if self.wide { 8 } else { 4 };
                if n.saturating_mul(least) > self.len.saturating_sub(self.pos) {
                    return Err(format!("an array of {n} values at byte {} runs past the end of the file", self.pos));
                }
                for _ in 0..n {
                    self.value(t, depth + 1)?;
                }
                Ok(None)
            }
            "array" => Err(format!("arrays nest deeper than {MAX_DEPTH} levels")),
            _ => {
                let mut b = [0u8; 8];
                self.r.read_exact(&mut b[..size as usize]).map_err(|_| "the header ends early".to_string())?;
                self.pos += size;
                let u = u64::from_le_bytes(b) as i128;
                let signed = |bits: u32| (u << (128 - bits)) >> (128 - bits);
                Ok(match name {
                    "u8" | "u16" | "u32" | "u64" => Some(u),
                    "i8" | "i16" | "i32" | "i64" => Some(signed(8 * size as u32)),
                    _ => None,
                })
            }
        }
    }
}

/// Scans the header from the reader's start (and leaves it anywhere): every key and tensor
/// name once, `general.alignment` a power of two of a type candle honours, every tensor's
/// offset a multiple of it. Layout errors are left to candle's reader, which names them.
pub fn scan<R: BufRead + Seek>(r: &mut R, len: u64, what: &str) -> Result<()> {
    let refuse = |why: String, fix: &str| usage(what, why, fix.to_string());
    let mut s = Scan { r, pos: 0, len, wide: true };
    let Ok(head) = s.bytes::<8>() else { return Ok(()) };
    let magic = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    let version = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
    if !matches!(magic, 0x4655_4747 | 0x4747_5546) || !(1..=3).contains(&version) {
        return Ok(());
    }
    s.wide = version > 1;
    let Ok((tensors, kvs)) = s.length().and_then(|t| Ok((t, s.length()?))) else { return Ok(()) };
    // At least 13 bytes a key and 24 a tensor: counts beyond that are candle's to refuse.
    if kvs.saturating_mul(13).saturating_add(tensors.saturating_mul(24)) > len {
        return Ok(());
    }
    let mut seen = BTreeSet::new();
    let mut alignment: Option<(String, Option<i128>)> = None;
    for _ in 0..kvs {
        let Ok(key) = s.string() else { return Ok(()) };
        let Ok(t) = s.u32() else { return Ok(()) };
        let Ok(value) = s.value(t, 0) else { return Ok(()) };
        if !seen.insert(key.clone()) {
            let why = format!("GGUF metadata key {} appears twice", crate::error::quote(&key));
            return Err(refuse(why, "use an intact GGUF file: each key once"));
        }
        if key == "general.alignment" {
            alignment = Some((value_type(t).map_or("?", |v| v.0).to_string(), value));
        }
    }
    let align = match alignment {
        None => 32,
        Some((ty, Some(a))) if matches!(ty.as_str(), "u8" | "u16" | "u32" | "i8" | "i16" | "i32") => {
            if a <= 0 || a.count_ones() != 1 {
                let why = format!("GGUF metadata general.alignment is {a}; expected a power of two such as 32");
                return Err(refuse(why, "use an intact GGUF file"));
            }
            a as u64
        }
        Some((ty, _)) => {
            let why = format!("GGUF metadata general.alignment holds a {ty}; expected a u32");
            return Err(refuse(why, "use an intact GGUF file"));
        }
    };
    let mut names = BTreeSet::new();
    for _ in 0..tensors {
        let Ok(name) = s.string() else { return Ok(()) };
        let Ok(dims) = s.u32() else { return Ok(()) };
        if dims > 4 || s.skip(u64::from(dims) * if s.wide { 8 } else { 4 } + 4).is_err() {
            return Ok(());
        }
        let Ok(offset) = s.u64() else { return Ok(()) };
        if !names.insert(name.clone()) {
            let why = format!("tensor {} appears twice in the GGUF tensor table", crate::error::quote(&name));
            return Err(refuse(why, "use an intact GGUF file: each tensor once"));
        }
        if !offset.is_multiple_of(align) {
            let why = format!(
                "tensor {}'s offset {offset} is not a multiple of the alignment {align}",
                crate::error::quote(&name)
            );
            return Err(refuse(why, "use an intact GGUF file"));
        }
    }
    Ok(())
}
