//! Reading numpy's `.npy` format (numpy.lib.format): the magic, a version (1: a u16 header
//! length; 2 and 3: u32), a header that is a Python dict literal with exactly the keys
//! `descr`, `fortran_order` and `shape`, then the C-ordered data, exactly as many bytes as the
//! shape and dtype need.
//!
//! The header is a stranger's claim, so it is parsed strictly (a key given twice, a key numpy
//! does not write, a negative or non-integer dimension are refused) and its shape is checked
//! against the bytes present before anything is allocated: a header claiming 10¹² elements
//! in a 100-byte file is refused, and bytes after the data are refused too, since numpy
//! never writes them. Read: `<f4`, `<f8`, `<f2`, `<i8`, `<i4`, `|i1`, `|u1`, `|b1` and
//! `<U{n}`; other dtypes (big-endian, complex, objects, records) are refused by name.

use super::Data;

const MAGIC: &[u8] = b"\x93NUMPY";

/// An `.npy` array: its shape, its values, and its dtype as numpy names it (`float32`,
/// `int64`, `bool`, `str`…). The error is a sentence saying what is wrong.
pub fn read(bytes: &[u8]) -> Result<(Vec<usize>, Data, &'static str), String> {
    if bytes.is_empty() {
        return Err("the file is empty".into());
    }
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err("not a .npy array (no \\x93NUMPY magic)".into());
    }
    let (len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10usize),
        2 | 3 if bytes.len() >= 12 => (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12),
        2 | 3 => return Err("the .npy header is cut short".into()),
        v => return Err(format!("unsupported .npy version {v}")),
    };
    let header = start.checked_add(len).and_then(|end| bytes.get(start..end)).ok_or("the .npy header is cut short")?;
    let header = std::str::from_utf8(header).map_err(|_| "the .npy header is not text")?;
    let Header { descr, fortran, shape } = parse_header(header)?;
    if fortran && shape.iter().filter(|&&d| d > 1).count() > 1 {
        return Err("the array is Fortran-ordered (save numpy.ascontiguousarray(x))".into());
    }
    let (dtype, width) = dtype(&descr)?;
    // Checked: a header may declare any shape, and the product must not overflow.
    let count = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or("the .npy shape is too large")?;
    let data = &bytes[start + len..];
    let need = count.checked_mul(width).ok_or("the .npy shape is too large")?;
    if data.len() < need || (width == 0 && count > 1 << 20) {
        return Err(format!(
            "the header claims shape {shape:?} of {dtype} ({need} bytes), and the file holds {} after it",
            data.len()
        ));
    }
    if data.len() > need {
        return Err(format!("{} bytes follow the data its shape {shape:?} needs", data.len() - need));
    }
    Ok((shape, values(&descr, data, count, width)?, dtype))
}

/// The header's three keys.
struct Header {
    descr: String,
    fortran: bool,
    shape: Vec<usize>,
}

/// A dtype's numpy name and its width in bytes (a `<U{n}` string is 4n bytes), or why it is
/// not read.
fn dtype(descr: &str) -> Result<(&'static str, usize), String> {
    Ok(match descr {
        "<f4" => ("float32", 4),
        "<f8" => ("float64", 8),
        "<f2" => ("float16", 2),
        "<i8" => ("int64", 8),
        "<i4" => ("int32", 4),
        "|i1" => ("int8", 1),
        "|u1" => ("uint8", 1),
        "|b1" => ("bool", 1),
        d if d.starts_with("<U") => {
            let n: usize = d[2..].parse().map_err(|_| format!("unreadable string dtype {d}"))?;
            ("str", n.checked_mul(4).ok_or_else(|| format!("string dtype {d} is too wide"))?)
        }
        d if d.starts_with('>') => {
            return Err(format!("dtype {d} is big-endian (save x.astype(x.dtype.newbyteorder('<')))"))
        }
        d => {
            return Err(format!("dtype {d} is not read (save float32, float64, float16, int64, int32, uint8 or bool)"))
        }
    })
}

/// The data as numbers (floats rounded through f32, as attn-trace computes, so that a file's
/// float64 copy of a trace compares equal to the trace) or strings.
fn values(descr: &str, data: &[u8], count: usize, width: usize) -> Result<Data, String> {
    fn le<const N: usize>(d: &[u8], f: impl Fn([u8; N]) -> f64) -> Vec<f64> {
        d.chunks_exact(N).map(|c| f(c.try_into().unwrap_or([0; N]))).collect()
    }
    Ok(Data::Num(match descr {
        "<f4" => le::<4>(data, |b| f32::from_le_bytes(b) as f64),
        "<f8" => le::<8>(data, |b| f64::from_le_bytes(b) as f32 as f64),
        "<f2" => le::<2>(data, |b| half::f16::from_le_bytes(b).to_f64()),
        "<i8" => le::<8>(data, |b| i64::from_le_bytes(b) as f64),
        "<i4" => le::<4>(data, |b| i32::from_le_bytes(b) as f64),
        "|u1" | "|b1" => data.iter().map(|&b| b as f64).collect(),
        "|i1" => data.iter().map(|&b| b as i8 as f64).collect(),
        // Empty strings need no bytes: `read` bounded their count instead.
        _ if width == 0 => return Ok(Data::Str(vec![String::new(); count])),
        _ => {
            let strings = data.chunks_exact(width).map(|s| {
                let points = s.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
                points.take_while(|&c| c != 0).filter_map(char::from_u32).collect()
            });
            return Ok(Data::Str(strings.collect()));
        }
    }))
}

/// `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }` and trailing spaces and a
/// newline: each of the three keys exactly once, nothing else.
fn parse_header(text: &str) -> Result<Header, String> {
    let bad = |why: &str| format!("the .npy header {why}");
    let mut p = Parser { rest: text.trim_end_matches([' ', '\n']).trim_start() };
    p.eat('{').ok_or_else(|| bad("is not a dict"))?;
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    while p.eat('}').is_none() {
        let key = p.string().ok_or_else(|| bad("has a key that is not a string"))?;
        p.eat(':').ok_or_else(|| bad("has a key without a value"))?;
        let fresh = match key.as_str() {
            "descr" => {
                if p.rest.starts_with('[') {
                    return Err("the array has a structured dtype (a record array); save one field per array".into());
                }
                descr.replace(p.string().ok_or_else(|| bad("has a descr that is not a string"))?).is_none()
            }
            "fortran_order" => fortran
                .replace(p.boolean().ok_or_else(|| bad("has a fortran_order that is not True or False"))?)
                .is_none(),
            "shape" => {
                shape.replace(p.tuple().ok_or_else(|| bad("has a shape that is not a tuple of sizes"))?).is_none()
            }
            other => return Err(bad(&format!("has a key {other:?} that numpy does not write"))),
        };
        if !fresh {
            return Err(bad(&format!("gives {key:?} twice")));
        }
        if p.eat(',').is_none() && !p.rest.starts_with('}') {
            return Err(bad("is not a dict"));
        }
    }
    if !p.rest.is_empty() {
        return Err(bad("has text after its dict"));
    }
    let missing = |k: &str| bad(&format!("has no {k}"));
    Ok(Header {
        descr: descr.ok_or_else(|| missing("descr"))?,
        fortran: fortran.ok_or_else(|| missing("fortran_order"))?,
        shape: shape.ok_or_else(|| missing("shape"))?,
    })
}

/// A cursor over the header's Python literal.
struct Parser<'a> {
    rest: &'a str,
}

impl Parser<'_> {
    /// Skips `c` (and the spaces after it), or None when the text does not start with it.
    fn eat(&mut self, c: char) -> Option<()> {
        self.rest = self.rest.strip_prefix(c)?.trim_start();
        Some(())
    }

    /// A quoted string without escapes (numpy's keys and dtypes have none).
    fn string(&mut self) -> Option<String> {
        let quote = self.rest.chars().next().filter(|&c| c == '\'' || c == '"')?;
        let body = &self.rest[1..];
        let end = body.find(quote)?;
        let s = &body[..end];
        if s.contains('\\') {
            return None;
        }
        self.rest = body[end + 1..].trim_start();
        Some(s.to_string())
    }

    fn boolean(&mut self) -> Option<bool> {
        for (word, value) in [("True", true), ("False", false)] {
            if let Some(r) = self.rest.strip_prefix(word) {
                self.rest = r.trim_start();
                return Some(value);
            }
        }
        None
    }

    /// `()`, `(5,)` or `(2, 3)`: sizes that are plain decimal integers.
    fn tuple(&mut self) -> Option<Vec<usize>> {
        self.eat('(')?;
        let mut dims = Vec::new();
        while self.eat(')').is_none() {
            let digits = self.rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(self.rest.len());
            dims.push(self.rest[..digits].parse().ok()?);
            self.rest = self.rest[digits..].trim_start();
            if self.eat(',').is_none() && !self.rest.starts_with(')') {
                return None;
            }
        }
        Some(dims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(header: &str, data: &[u8]) -> Vec<u8> {
        let mut h = header.to_string();
        while !(10 + h.len() + 1).is_multiple_of(64) {
            h.push(' ');
        }
        h.push('\n');
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(h.len() as u16).to_le_bytes());
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(data);
        out
    }

    fn why(header: &str, data: &[u8]) -> String {
        read(&npy(header, data)).unwrap_err()
    }

    #[test]
    fn the_header_is_parsed_strictly() {
        let ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
        assert_eq!(read(&npy(ok, &[0; 8])).unwrap().0, vec![2]);
        assert!(
            why("{'descr': '<f4', 'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", &[0; 8]).contains("twice")
        );
        assert!(why("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", &[0; 8]).contains("shape"));
        assert!(
            why("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", &[0; 8]).contains("'x'")
                || why("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", &[0; 8]).contains("\"x\"")
        );
        assert!(
            why("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", &[0; 8]).contains("structured")
        );
        assert!(why("{'descr': '<f4', 'shape': (2,), }", &[0; 8]).contains("fortran_order"));
    }

    #[test]
    fn sizes_are_checked_before_allocating() {
        let huge = "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000,), }";
        assert!(why(huge, &[0; 16]).contains("claims shape [1000000000000]"), "{}", why(huge, &[0; 16]));
        let overflow = "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }";
        assert!(why(overflow, &[0; 16]).contains("too large"));
        let empty_strings = "{'descr': '<U0', 'fortran_order': False, 'shape': (1000000000,), }";
        assert!(why(empty_strings, &[]).contains("claims"));
        let trailing = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }";
        assert!(why(trailing, &[0; 8]).contains("4 bytes follow"));
    }

    #[test]
    fn dtypes_are_named() {
        let h = |d: &str| format!("{{'descr': '{d}', 'fortran_order': False, 'shape': (1,), }}");
        assert_eq!(read(&npy(&h("<f2"), &half::f16::from_f32(1.5).to_le_bytes())).unwrap().1, Data::Num(vec![1.5]));
        assert!(why(&h(">f4"), &[0; 4]).contains("big-endian"));
        assert!(why(&h("<c8"), &[0; 8]).contains("<c8 is not read"));
        assert!(why(&h("|O"), &[0; 8]).contains("|O is not read"));
        let fortran = "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }";
        assert!(why(fortran, &[0; 16]).contains("Fortran"));
    }
}
