//! numpy's `.npy` format, version 1.0: the magic `\x93NUMPY`, a version, a little-endian u16
//! header length, a Python-dict header padded with spaces to a multiple of 64 bytes and
//! ending in a newline, then the raw C-ordered data
//! (numpy.lib.format, <https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html>).
//!
//! Written: `<f4`, `|u1`, `<i8` and `<U{n}` (the token strings). Read: those and `<f8`,
//! `<i4`, `|b1`, `|i1`; a Fortran-ordered array is refused with its fix.

use super::Data;

const MAGIC: &[u8] = b"\x93NUMPY";

/// An `.npy` file for `shape` with the given numpy `descr` and little-endian data.
pub fn write(descr: &str, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape_text = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_text}, }}");
    // magic (6) + version (2) + length (2) + header + '\n' is a multiple of 64.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + data.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

/// Strings as a numpy unicode array `<U{n}`: UTF-32LE code points, each string padded with
/// zeros to the longest one's length.
pub fn write_strings(strings: &[String]) -> Vec<u8> {
    let n = strings.iter().map(|s| s.chars().count()).max().unwrap_or(0).max(1);
    let mut data = Vec::with_capacity(strings.len() * n * 4);
    for s in strings {
        let chars: Vec<char> = s.chars().collect();
        for i in 0..n {
            data.extend_from_slice(&chars.get(i).map_or(0, |&c| c as u32).to_le_bytes());
        }
    }
    write(&format!("<U{n}"), &[strings.len()], &data)
}

/// Reads an `.npy` file; the error is a sentence saying what is wrong.
pub fn read(bytes: &[u8]) -> Result<(Vec<usize>, Data), String> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err("not a .npy array (no \\x93NUMPY magic)".into());
    }
    let (len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12),
        v => return Err(format!("unsupported .npy version {v}")),
    };
    let header = bytes.get(start..start + len).ok_or("the .npy header is cut short")?;
    let header = std::str::from_utf8(header).map_err(|_| "the .npy header is not text")?;
    let descr = field(header, "descr").ok_or("the .npy header has no descr")?;
    let descr = descr.trim_matches(|c| c == '\'' || c == '"');
    if field(header, "fortran_order").is_some_and(|f| f.starts_with("True")) {
        return Err("the array is Fortran-ordered (save numpy.ascontiguousarray(x))".into());
    }
    let shape = parse_shape(header).ok_or("the .npy header has no readable shape")?;
    // Checked: a header may declare any shape, and the product must not overflow.
    let count = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or("the .npy shape is too large")?;
    let data = &bytes[start + len..];
    let need = |size: usize| -> Result<&[u8], String> {
        count
            .checked_mul(size)
            .and_then(|n| data.get(..n))
            .ok_or_else(|| format!("the data is shorter than its shape {shape:?} needs"))
    };
    fn le<const N: usize>(d: &[u8], f: impl Fn([u8; N]) -> f64) -> Vec<f64> {
        d.chunks_exact(N).map(|c| f(c.try_into().unwrap_or([0; N]))).collect()
    }
    // Floats are rounded through f32, as attn-trace computes, so a file's float64 copy of a
    // trace compares equal to the trace.
    let values = match descr {
        "<f4" => le::<4>(need(4)?, |b| f32::from_le_bytes(b) as f64),
        "<f8" => le::<8>(need(8)?, |b| f64::from_le_bytes(b) as f32 as f64),
        "<i8" => le::<8>(need(8)?, |b| i64::from_le_bytes(b) as f64),
        "<i4" => le::<4>(need(4)?, |b| i32::from_le_bytes(b) as f64),
        "|u1" | "|b1" => need(1)?.iter().map(|&b| b as f64).collect(),
        "|i1" => need(1)?.iter().map(|&b| b as i8 as f64).collect(),
        d if d.starts_with("<U") => {
            let n: usize = d[2..].parse().map_err(|_| format!("unreadable string dtype {d}"))?;
            if n == 0 {
                // Empty strings need no bytes, so the data length bounds nothing: a header could
                // claim 10⁹ of them. No trace has more labels than this.
                if count > 1 << 20 {
                    return Err(format!("{count} empty strings of dtype {d} is too many"));
                }
                return Ok((shape, Data::Str(vec![String::new(); count])));
            }
            let raw = need(n.checked_mul(4).ok_or_else(|| format!("string dtype {d} is too wide"))?)?;
            let strings = raw
                .chunks_exact(4 * n)
                .map(|s| {
                    s.chunks_exact(4)
                        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .take_while(|&c| c != 0)
                        .filter_map(char::from_u32)
                        .collect()
                })
                .collect();
            return Ok((shape, Data::Str(strings)));
        }
        d => return Err(format!("dtype {d} is not read (save float32, float64, int64, int32, uint8 or bool)")),
    };
    Ok((shape, Data::Num(values)))
}

/// The text after `'key':` in the header dict, up to the end of the dict.
fn field<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let at = header.find(&format!("'{key}'")).or_else(|| header.find(&format!("\"{key}\"")))?;
    let rest = &header[at + key.len() + 2..];
    let rest = rest.trim_start().strip_prefix(':')?.trim_start();
    Some(rest.split(',').next().unwrap_or(rest).trim())
}

/// The `shape` tuple: `()`, `(5,)` or `(2, 3)`.
fn parse_shape(header: &str) -> Option<Vec<usize>> {
    let at = header.find("'shape'").or_else(|| header.find("\"shape\""))?;
    let rest = &header[at..];
    let open = rest.find('(')?;
    let close = rest[open..].find(')')? + open;
    rest[open + 1..close].split(',').map(str::trim).filter(|s| !s.is_empty()).map(|s| s.parse().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_aligned_and_round_trips() {
        let data: Vec<u8> = [1.5f32, -2.0, 0.25, 8.0, 0.0, 1.0].iter().flat_map(|x| x.to_le_bytes()).collect();
        let bytes = write("<f4", &[2, 3], &data);
        let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        assert_eq!((10 + len) % 64, 0);
        let (shape, values) = read(&bytes).unwrap();
        assert_eq!(shape, vec![2, 3]);
        assert_eq!(values, Data::Num(vec![1.5, -2.0, 0.25, 8.0, 0.0, 1.0]));
        let s = write_strings(&["[CLS]".into(), "é".into()]);
        assert_eq!(read(&s).unwrap().1, Data::Str(vec!["[CLS]".into(), "é".into()]));
        assert_eq!(read(&write("<i8", &[], &7i64.to_le_bytes())).unwrap(), (vec![], Data::Num(vec![7.0])));
    }
}
