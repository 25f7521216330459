//! npz traces: numpy's zip of `.npy` files, one per step (`layers.0.attn.weights.npy`), so
//! `numpy.load("t.npz")["layers.0.attn.weights"]` is the step's array.
//!
//! The zip container comes from the `zip` crate, which candle-core already builds with the
//! same features (no compression codecs): entries are stored uncompressed with their
//! CRC-32, as `numpy.savez` writes them, and carry the zip format's fixed earliest
//! timestamp so the bytes do not depend on the clock. For the same reason an npz written
//! by `numpy.savez_compressed` (deflate) cannot be read; the error says to use `savez`.

#[cfg(test)]
use super::Data;
use super::{encode, npy, Named};
use crate::error::usage;
use crate::trace::Step;
use anyhow::Result;
use std::io::{Cursor, Read, Write};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, ZipArchive, ZipWriter};

/// The npz file's bytes for these steps, with the token strings as a unicode array.
pub fn write(steps: &[Step], tokens: &[String]) -> Result<Vec<u8>> {
    let mut entries: Vec<(String, Vec<u8>)> = steps
        .iter()
        .filter_map(|s| encode(s).map(|(_, descr, bytes)| (s.id.clone(), npy::write(descr, &s.shape, &bytes))))
        .collect();
    if !tokens.is_empty() {
        entries.push(("tokens".into(), npy::write_strings(tokens)));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let options = SimpleFileOptions::default()
        .compression_method(CompressionMethod::Stored)
        .last_modified_time(DateTime::default())
        .unix_permissions(0o644)
        // An entry over 4 GiB needs ZIP64; the memory cap keeps traces far below that, but
        // asking for it when needed costs nothing.
        .large_file(entries.iter().any(|(_, b)| b.len() as u64 >= u32::MAX as u64));
    let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
    for (name, bytes) in entries {
        zip.start_file(format!("{name}.npy"), options)?;
        zip.write_all(&bytes)?;
    }
    Ok(zip.finish()?.into_inner())
}

/// Reads every `.npy` member of an npz file; `what` names the file in error messages.
///
/// The archive's directory is a stranger's claim, checked before any member is read: every
/// member is stored (numpy.savez; a compressed member, which could inflate to any size, is
/// refused), its name is a plain name (no `../`, no absolute path, UTF-8, given once), and
/// members lie within the file without overlapping, so that the bytes read add up to at most
/// the file's size (overlapping members are how a small zip claims gigabytes).
pub fn read(bytes: &[u8], what: &str) -> Result<Vec<Named>> {
    let bad = |why: String| usage(what, why, "pass an .npz written by numpy.savez or --save-trace");
    let mut zip =
        ZipArchive::new(Cursor::new(bytes)).map_err(|e| bad(format!("not a readable npz (zip) file: {e}")))?;
    if zip.has_duplicate_names() {
        return Err(bad("two members have the same name".into()));
    }
    let members = members(&mut zip, bytes.len() as u64).map_err(bad)?;
    let mut out = Vec::new();
    for (i, m) in members.iter().enumerate() {
        let Some(name) = m.name.strip_suffix(".npy") else { continue };
        let member = &m.name;
        let file = zip.by_index(i).map_err(|e| bad(format!("{member}: {e}")))?;
        // Bounded by the size checked above (the zip reader stops there too; the one byte
        // more asks it for its end, where it checks the CRC).
        let mut buf = Vec::with_capacity(m.size as usize);
        file.take(m.size + 1).read_to_end(&mut buf).map_err(|e| bad(format!("{member}: {e}")))?;
        let (shape, data, dtype) = npy::read(&buf).map_err(|why| bad(format!("{member}: {why}")))?;
        out.push(Named { name: name.to_string(), shape, data, dtype });
    }
    Ok(out)
}

/// One member as the directory describes it, checked.
struct Member {
    name: String,
    /// Where its local header starts and its data ends.
    span: (u64, u64),
    size: u64,
}

/// Every member's name, place and size, refusing what no numpy.savez file holds.
fn members(zip: &mut ZipArchive<Cursor<&[u8]>>, len: u64) -> std::result::Result<Vec<Member>, String> {
    let mut out: Vec<Member> = Vec::with_capacity(zip.len());
    for i in 0..zip.len() {
        let f = zip.by_index_raw(i).map_err(|e| format!("zip member {i}: {e}"))?;
        let name = std::str::from_utf8(f.name_raw()).map_err(|_| format!("the name of zip member {i} is not UTF-8"))?;
        let plain = !name.is_empty()
            && !name.starts_with('/')
            && !name.contains(['\\', '\0'])
            && name.split('/').all(|part| part != "..");
        if !plain {
            return Err(format!("member {name:?} is not a plain name (an absolute path, ../ or a backslash)"));
        }
        if f.compression() != CompressionMethod::Stored || f.encrypted() {
            return Err(format!(
                "member {name} is compressed or encrypted ({}); diff reads numpy.savez files, not savez_compressed",
                f.compression()
            ));
        }
        let (start, size) = (f.header_start(), f.compressed_size());
        // A stored member is its compressed bytes: the uncompressed size it also declares is
        // not believed (a fuzzed file claimed 2.8 GB there, over 160 bytes of data).
        let end = f.data_start().and_then(|d| d.checked_add(size)).filter(|&e| e <= len);
        let Some(end) = end else {
            return Err(format!("member {name} claims {size} bytes that the file does not hold"));
        };
        out.push(Member { name: name.to_string(), span: (start, end), size });
    }
    let mut spans: Vec<(u64, u64, &str)> = out.iter().map(|m| (m.span.0, m.span.1, m.name.as_str())).collect();
    spans.sort();
    if let Some(w) = spans.windows(2).find(|w| w[0].1 > w[1].0) {
        return Err(format!("members {} and {} overlap (a zip bomb's trick)", w[0].2, w[1].2));
    }
    Ok(out)
}

/// Whether `bytes` start like a zip file (an npz).
pub fn looks_like(bytes: &[u8]) -> bool {
    bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Values;

    #[test]
    fn round_trip_and_deterministic() {
        let step = Step {
            id: "layers.0.attn.weights".into(),
            layer: Some(0),
            name: "attn.weights".into(),
            dims: vec!["head", "query_pos", "key_pos"],
            shape: vec![1, 2, 2],
            heads: None,
            values: Values::F32(vec![0.25, 0.75, 1.0, 0.0]),
        };
        let tokens = vec!["my".to_string(), "shoes".to_string()];
        let bytes = write(std::slice::from_ref(&step), &tokens).unwrap();
        assert_eq!(bytes, write(std::slice::from_ref(&step), &tokens).unwrap());
        let back = read(&bytes, "t.npz").unwrap();
        assert_eq!(back[0].name, "layers.0.attn.weights");
        assert_eq!(back[0].shape, vec![1, 2, 2]);
        assert_eq!(back[0].data, Data::Num(vec![0.25, 0.75, 1.0, 0.0]));
        assert_eq!(back[1].data, Data::Str(tokens));
    }
}
