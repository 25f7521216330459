//! JSON as attn-trace reads it from users: serde_json's grammar, plus one rule serde_json
//! does not enforce: an object may not name a key twice. serde_json keeps the last value of
//! a repeated key, so a weights file with two `embed.token.weight` entries (or a diff input
//! with one step twice) would silently lose one; here it is an error naming the key.
//!
//! One extension: the bare words `NaN`, `Infinity` and `-Infinity`, which Python's
//! `json.dump` writes for non-finite floats (`allow_nan=True` is its default), are read as
//! the strings `"nan"`, `"inf"` and `"-inf"`, the spelling attn-trace itself writes and every
//! reader of numbers accepts. Inside strings nothing changes.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

/// Parses `bytes` as JSON, refusing repeated object keys. The error is one line. After a
/// Python `NaN` on the same line, the column an error names may be up to 2 places early.
pub fn parse(bytes: &[u8]) -> Result<serde_json::Value, String> {
    let bytes = &*python_constants(bytes);
    // First pass: the key check, which also finds every syntax error with serde_json's message.
    let mut de = serde_json::Deserializer::from_slice(bytes);
    NoDuplicates::deserialize(&mut de).and_then(|_| de.end()).map_err(|e| e.to_string())?;
    serde_json::from_slice(bytes).map_err(|e| e.to_string())
}

/// Checks a safetensors file's JSON header (the bytes after its 8-byte little-endian length)
/// by the same rule: the `safetensors` crate reads it with serde, which keeps the last of a
/// tensor named twice. A file too short for its header is left to that crate to refuse.
pub fn safetensors_header(file: &[u8]) -> Result<(), String> {
    let len = file.get(..8).map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
    let header = usize::try_from(len).ok().and_then(|len| file.get(8..8usize.checked_add(len)?));
    match header {
        Some(h) => parse(h).map(|_| ()).map_err(|e| format!("its header: {e}")),
        None => Ok(()),
    }
}

/// Python's three non-finite words outside strings, rewritten as attn-trace's strings.
/// `Infinity` and `-Infinity` keep their length (padded with spaces), so error columns hold.
fn python_constants(bytes: &[u8]) -> Cow<'_, [u8]> {
    const WORDS: [(&[u8], &[u8]); 3] =
        [(b"-Infinity", b"\"-inf\"   "), (b"Infinity", b"\"inf\"   "), (b"NaN", b"\"nan\"")];
    let (mut out, mut copied, mut in_string, mut escaped) = (Vec::new(), 0, false, false);
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if in_string {
            (in_string, escaped) = (escaped || c != b'"', !escaped && c == b'\\');
        } else if c == b'"' {
            in_string = true;
        } else if let Some((word, with)) = WORDS.iter().find(|(w, _)| bytes[i..].starts_with(w)) {
            out.extend_from_slice(&bytes[copied..i]);
            out.extend_from_slice(with);
            i += word.len();
            copied = i;
            continue;
        }
        i += 1;
    }
    if copied == 0 {
        return Cow::Borrowed(bytes);
    }
    out.extend_from_slice(&bytes[copied..]);
    Cow::Owned(out)
}

/// A JSON value that is only walked, to check its objects' keys.
struct NoDuplicates;

impl<'de> Deserialize<'de> for NoDuplicates {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Walk)
    }
}

struct Walk;

impl<'de> Visitor<'de> for Walk {
    type Value = NoDuplicates;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_i64<E>(self, _: i64) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_u64<E>(self, _: u64) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_f64<E>(self, _: f64) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_str<E>(self, _: &str) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }
    fn visit_unit<E>(self) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<NoDuplicates, A::Error> {
        while seq.next_element::<NoDuplicates>()?.is_some() {}
        Ok(NoDuplicates)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NoDuplicates, A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                let shown: String = key.chars().take(60).collect();
                return Err(de::Error::custom(format!("the key {shown:?} appears twice in one object")));
            }
            map.next_value::<NoDuplicates>()?;
        }
        Ok(NoDuplicates)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn repeated_keys_are_refused() {
        assert!(super::parse(br#"{"a": [1], "b": {"c": 2}}"#).is_ok());
        let e = super::parse(br#"{"a": [1], "a": [2]}"#).unwrap_err();
        assert!(e.contains("\"a\" appears twice"), "{e}");
        let e = super::parse(br#"[{"x": 1, "y": {"z": 1, "z": 2}}]"#).unwrap_err();
        assert!(e.contains("\"z\" appears twice"), "{e}");
        assert!(super::parse(b"[1, 2").is_err());
    }

    #[test]
    fn python_non_finite_words_are_read_as_attn_trace_strings() {
        // What json.dumps([float("nan"), float("inf"), -float("inf"), "NaN"]) writes.
        let v = super::parse(br#"{"x": [NaN, Infinity, -Infinity, "NaN", "a\"NaN"]}"#).unwrap();
        assert_eq!(v["x"], serde_json::json!(["nan", "inf", "-inf", "NaN", "a\"NaN"]));
        // Still strict: repeated keys, and a word that is not one of the three.
        assert!(super::parse(br#"{"a": NaN, "a": 1}"#).unwrap_err().contains("appears twice"));
        assert!(super::parse(b"[nan]").is_err());
        assert!(super::parse(b"[-NaN]").is_err());
        assert_eq!(super::parse(b"[1.5]").unwrap(), serde_json::json!([1.5]));
    }
}
