//! numpy's `.npy` format, version 1.0: the magic `\x93NUMPY`, a version, a little-endian u16
//! header length, a Python-dict header padded with spaces to a multiple of 64 bytes and
//! ending in a newline, then the raw C-ordered data
//! (numpy.lib.format, <https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html>).
//!
//! Written: `<f4`, `|u1`, `<i8` and `<U{n}` (the token strings). Read by
//! [`super::npy_read`], whose `read` is re-exported here.

pub use super::npy_read::read;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::Data;

    #[test]
    fn header_is_aligned_and_round_trips() {
        let data: Vec<u8> = [1.5f32, -2.0, 0.25, 8.0, 0.0, 1.0].iter().flat_map(|x| x.to_le_bytes()).collect();
        let bytes = write("<f4", &[2, 3], &data);
        let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        assert_eq!((10 + len) % 64, 0);
        let (shape, values, dtype) = read(&bytes).unwrap();
        assert_eq!((shape, dtype), (vec![2, 3], "float32"));
        assert_eq!(values, Data::Num(vec![1.5, -2.0, 0.25, 8.0, 0.0, 1.0]));
        let s = write_strings(&["[CLS]".into(), "é".into()]);
        assert_eq!(read(&s).unwrap().1, Data::Str(vec!["[CLS]".into(), "é".into()]));
        assert_eq!(read(&write("<i8", &[], &7i64.to_le_bytes())).unwrap(), (vec![], Data::Num(vec![7.0]), "int64"));
    }
}
