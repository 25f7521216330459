//! Where the sentence comes from: the argument, standard input (`-`) or `--file`. Input that
//! is not UTF-8 is an error naming the byte offset of the first bad byte.

use crate::error::usage;
use crate::settings::Text;
use anyhow::Result;
use std::io::Read;

/// Bytes read from a file or stdin beyond this are refused before decoding: the memory cap
/// would refuse such a sentence anyway, and reading it all first could exhaust memory.
const MAX_BYTES: u64 = 64 << 20;

/// Reads the sentence from where the settings say: the argument, standard input or a file.
pub fn sentence(text: &Text) -> Result<Option<String>> {
    match text {
        Text::None | Text::Batch(_) => Ok(None),
        Text::Arg(s) => Ok(Some(s.clone())),
        Text::Stdin => read_all(std::io::stdin().lock(), "standard input").map(Some),
        Text::File(path) => {
            let what = format!("--file {}", path.display());
            let f = std::fs::File::open(path).map_err(|e| usage(&what, e, "pass the path of a readable text file"))?;
            read_all(f, &what).map(Some)
        }
    }
}

/// A whole input file (`--input`, `--vocab`). A regular file's size justifies reading it; a
/// device or pipe has none, and `/dev/zero` never ends, so past [`MAX_BYTES`] one is refused
/// rather than read until memory runs out.
pub fn read_file(path: &std::path::Path, what: &str, fix: &str) -> Result<Vec<u8>> {
    let f = std::fs::File::open(path).map_err(|e| usage(what, e, fix))?;
    let regular = f.metadata().is_ok_and(|m| m.is_file());
    let mut bytes = Vec::new();
    f.take(if regular { u64::MAX } else { MAX_BYTES + 1 }).read_to_end(&mut bytes).map_err(|e| usage(what, e, fix))?;
    if !regular && bytes.len() as u64 > MAX_BYTES {
        let why =
            format!("more than {} MiB from a file that is not a regular file (a device or pipe)", MAX_BYTES >> 20);
        return Err(usage(what, why, fix));
    }
    Ok(bytes)
}

fn read_all(r: impl Read, what: &str) -> Result<String> {
    Ok(read_untrimmed(r, what)?.trim().to_string())
}

/// Reads the text as it is (a `--batch` file's lines keep their numbers).
pub fn read_untrimmed(r: impl Read, what: &str) -> Result<String> {
    let mut bytes = Vec::new();
    r.take(MAX_BYTES + 1).read_to_end(&mut bytes).map_err(|e| usage(what, e, "check that the input can be read"))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(usage(what, format!("more than {} MiB of text", MAX_BYTES >> 20), "trace a shorter sentence"));
    }
    utf8(bytes, what)
}

/// UTF-8 and trimmed, or an error naming the first invalid byte.
pub fn decode(bytes: Vec<u8>, what: &str) -> Result<String> {
    Ok(utf8(bytes, what)?.trim().to_string())
}

/// UTF-8 or an error naming the first invalid byte, so the user can find it (`xxd -s N`).
fn utf8(bytes: Vec<u8>, what: &str) -> Result<String> {
    let text = String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let byte = e.as_bytes()[at];
        usage(
            what,
            format!("not UTF-8: byte 0x{byte:02x} at offset {at}"),
            "convert the text to UTF-8, e.g. with iconv -t UTF-8",
        )
    })?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_the_offset() {
        let err = super::decode(b"my sh\xffoes".to_vec(), "standard input").unwrap_err().to_string();
        assert!(err.contains("byte 0xff at offset 5"), "{err}");
        assert_eq!(super::decode(b"  my shoes\n".to_vec(), "x").unwrap(), "my shoes");
    }
}
