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
pub fn read(bytes: &[u8], what: &str) -> Result<Vec<Named>> {
    let bad = |why: String| usage(what, why, "pass an .npz written by numpy.savez or --save-trace");
    let mut zip =
        ZipArchive::new(Cursor::new(bytes)).map_err(|e| bad(format!("not a readable npz (zip) file: {e}")))?;
    let mut out = Vec::new();
    for i in 0..zip.len() {
        let mut file = zip.by_index(i).map_err(|e| {
            let why = e.to_string();
            if why.contains("ompression") {
                bad(format!("a member is compressed ({why}); diff reads numpy.savez files, not savez_compressed"))
            } else {
                bad(format!("zip member {i}: {why}"))
            }
        })?;
        let member = file.name().map_err(|e| bad(format!("zip member {i}: {e}")))?.to_string();
        let Some(name) = member.strip_suffix(".npy") else { continue };
        // The declared size is the file's word, not a fact: a stored member cannot be larger
        // than the whole input, so never reserve more than that (found by fuzzing: a header
        // claiming 2.8 GB).
        let mut buf = Vec::with_capacity((file.size() as usize).min(bytes.len()));
        file.read_to_end(&mut buf).map_err(|e| bad(format!("{member}: {e}")))?;
        let (shape, data) = npy::read(&buf).map_err(|why| bad(format!("{member}: {why}")))?;
        out.push(Named { name: name.to_string(), shape, data });
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
