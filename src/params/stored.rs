//! Vocabulary tables left in their file's form and read a few rows at a time: the input's
//! rows of the token table, and the head a slice of the vocabulary at a time.

use super::GgmlInput;
use anyhow::Result;
use candle_core::{Device, Tensor};
use std::sync::Arc;

/// A `[rows, cols]` table that stays in its file's form (a GGUF file's quantized blocks) and
/// hands out rows in f32, each exactly as the whole table dequantized would hold it.
pub trait StoredRows: Send + Sync + std::fmt::Debug {
    /// Rows `start .. start + len`, [len, cols].
    fn rows(&self, start: usize, len: usize) -> Result<Tensor>;
    /// [rows, cols].
    fn dims(&self) -> (usize, usize);
    /// `--arithmetic ggml`: how llama.cpp takes a product with the table (the head).
    fn ggml(&self) -> Option<&GgmlInput> {
        None
    }
    /// The whole table in f32, when it is held so ([`Whole`]).
    fn whole(&self) -> Option<&Tensor> {
        None
    }
}

/// A stored table whose rows a closure reads from the file that holds it (a GGUF file's
/// quantized blocks, a mapped checkpoint's bytes); `name` is for messages and `Debug`.
pub struct RowReader {
    name: String,
    dims: (usize, usize),
    ggml: Option<GgmlInput>,
    read: Box<dyn Fn(usize, usize) -> Result<Tensor> + Send + Sync>,
}

impl RowReader {
    /// The reader, shared as the table `Stored` holds.
    pub fn shared(
        name: &str,
        (dims, ggml): ((usize, usize), Option<GgmlInput>),
        read: impl Fn(usize, usize) -> Result<Tensor> + Send + Sync + 'static,
    ) -> Arc<dyn StoredRows> {
        Arc::new(RowReader { name: name.to_string(), dims, ggml, read: Box::new(read) })
    }
}

impl std::fmt::Debug for RowReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RowReader({}, {:?})", self.name, self.dims)
    }
}

impl StoredRows for RowReader {
    fn rows(&self, start: usize, len: usize) -> Result<Tensor> {
        (self.read)(start, len)
    }

    fn dims(&self) -> (usize, usize) {
        self.dims
    }

    fn ggml(&self) -> Option<&GgmlInput> {
        self.ggml.as_ref()
    }
}

/// The token table and the unembedding of a checkpoint, in their stored form: a 0.5B model's
/// two 151,936 × 896 tables are 1.1 GB in f32, for an input that needs a few rows of one and
/// a product with the other that can be taken a slice at a time.
#[derive(Debug, Clone)]
pub struct Stored {
    pub token: Arc<dyn StoredRows>,
    /// The head's own table; None when it is tied to the token table.
    pub head: Option<Arc<dyn StoredRows>>,
}

impl Stored {
    /// The rows of `ids`, in order, [ids, cols].
    pub fn gather(&self, ids: &[u32]) -> Result<Tensor> {
        let rows: Vec<Tensor> = ids.iter().map(|&i| self.token.rows(i as usize, 1)).collect::<Result<_>>()?;
        if rows.is_empty() {
            let (_, cols) = self.token.dims();
            return Ok(Tensor::zeros((0, cols), candle_core::DType::F32, &Device::Cpu)?);
        }
        Ok(Tensor::cat(&rows, 0)?)
    }

    /// The head's table made f32 whole once, for a caller that applies it many times (a
    /// server's requests, a generation's steps), where reading its every row from the file per
    /// pass cost SmolLM2 28 ms of a 32-token request. The rows handed out are the same.
    /// A separate token table stays stored: only a few of its rows are gathered per pass.
    pub fn made(&self) -> Result<Stored> {
        let whole = |rows: &Arc<dyn StoredRows>| -> Result<Arc<dyn StoredRows>> { Ok(Arc::new(Whole::of(&**rows)?)) };
        Ok(match &self.head {
            None => Stored { token: whole(&self.token)?, head: None },
            Some(head) => Stored { token: Arc::clone(&self.token), head: Some(whole(head)?) },
        })
    }

    /// The unembedding's table.
    pub fn head(&self) -> &dyn StoredRows {
        self.head.as_deref().unwrap_or(&*self.token)
    }
}

/// A stored table held whole in f32 ([`Stored::made`]): its rows are views of it, the numbers
/// the file's rows are made into (`gguf_params`' test: rows read alone equal the whole's).
#[derive(Debug)]
pub struct Whole {
    table: Tensor,
    ggml: Option<GgmlInput>,
}

impl Whole {
    pub fn of(rows: &dyn StoredRows) -> Result<Whole> {
        Ok(Whole { table: rows.rows(0, rows.dims().0)?, ggml: rows.ggml().cloned() })
    }

    /// A table given in f32 (tests).
    pub fn new(table: Tensor) -> Whole {
        Whole { table, ggml: None }
    }
}

impl StoredRows for Whole {
    fn rows(&self, start: usize, len: usize) -> Result<Tensor> {
        Ok(self.table.narrow(0, start, len)?)
    }

    fn whole(&self) -> Option<&Tensor> {
        Some(&self.table)
    }

    fn dims(&self) -> (usize, usize) {
        let d = self.table.dims();
        (d[0], d.get(1).copied().unwrap_or(1))
    }

    fn ggml(&self) -> Option<&GgmlInput> {
        self.ggml.as_ref()
    }
}
