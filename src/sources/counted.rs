//! A buffered reader that counts its own position, so asking for it costs no system call.
//! candle's GGUF reader asks for the position before every string it reads (to check the
//! string's length against what is left of the file): through `BufReader<File>` that is an
//! `lseek` per string, about 100,000 of them for a tokenizer of 49,152 tokens and as many
//! merges (26 ms of the 33 ms `attn-trace serve` spent opening SmolLM2 per request).

use std::io::{BufRead, BufReader, Read, Result, Seek, SeekFrom};

pub struct Counted<R> {
    inner: BufReader<R>,
    /// The offset of the next byte `read` returns.
    at: u64,
}

impl<R: Read + Seek> Counted<R> {
    pub fn new(inner: R) -> Counted<R> {
        let mut inner = BufReader::new(inner);
        let at = inner.stream_position().unwrap_or(0);
        Counted { inner, at }
    }
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        let n = self.inner.read(buf)?;
        self.at += n as u64;
        Ok(n)
    }
}

impl<R: Read> BufRead for Counted<R> {
    fn fill_buf(&mut self) -> Result<&[u8]> {
        self.inner.fill_buf()
    }

    fn consume(&mut self, amt: usize) {
        // BufReader consumes at most what it holds.
        let held = self.inner.buffer().len();
        self.inner.consume(amt);
        self.at += amt.min(held) as u64;
    }
}

impl<R: Read + Seek> Seek for Counted<R> {
    fn seek(&mut self, pos: SeekFrom) -> Result<u64> {
        if pos == SeekFrom::Current(0) {
            return Ok(self.at);
        }
        self.at = self.inner.seek(pos)?;
        Ok(self.at)
    }

    fn stream_position(&mut self) -> Result<u64> {
        Ok(self.at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn the_counted_position_is_the_readers_own() {
        let bytes: Vec<u8> = (0..=255u8).cycle().take(20_000).collect();
        let mut plain = BufReader::new(Cursor::new(bytes.clone()));
        let mut counted = Counted::new(Cursor::new(bytes));
        let steps: &[(usize, Option<SeekFrom>)] = &[
            (3, None),
            (9000, None),
            (0, Some(SeekFrom::Start(17))),
            (5, Some(SeekFrom::Current(100))),
            (1, Some(SeekFrom::End(-40))),
            (100, None),
        ];
        for (n, seek) in steps {
            if let Some(s) = seek {
                assert_eq!(plain.seek(*s).unwrap(), counted.seek(*s).unwrap());
            }
            let (mut a, mut b) = (vec![0; *n], vec![0; *n]);
            let (ra, rb) = (plain.read(&mut a).unwrap(), counted.read(&mut b).unwrap());
            assert_eq!((ra, &a), (rb, &b));
            let first = counted.fill_buf().unwrap().first().copied();
            assert_eq!(plain.fill_buf().unwrap().first().copied(), first);
            plain.consume(1);
            counted.consume(1);
            assert_eq!(plain.stream_position().unwrap(), counted.stream_position().unwrap());
        }
    }
}
