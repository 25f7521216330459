//! A decoder's sizes checked against the shapes its file stores, before any loop or
//! allocation sized by them (issue 27): the token table is [vocab_size, hidden_size], and
//! layer 0's query and key projections are [heads × head width, hidden_size] (a config
//! claiming 10^12 heads once allocated a head map of 10^12 entries before the memory cap).
//! GPT-2's fused projection is checked through the table: its heads divide hidden_size.

use super::decoder::DecoderConfig;
use crate::error::usage;
use anyhow::Result;

/// `names` are the token table's, and (Llama family) layer 0's query and key weights';
/// `shape` gives a stored tensor's shape (rows first), `source` says where the sizes came from
/// (`config.json`, `the metadata`).
pub fn check(
    c: &DecoderConfig,
    names: [&str; 3],
    shape: impl Fn(&str) -> Option<Vec<usize>>,
    source: &str,
    what: &str,
) -> Result<()> {
    let (d, dh) = (c.hidden_size, c.d_head());
    let (q, k) = (c.num_attention_heads.saturating_mul(dh), c.kv_heads().saturating_mul(dh));
    let mut want = vec![(names[0], [c.vocab_size, d])];
    if !c.is_gpt2() {
        want.extend([(names[1], [q, d]), (names[2], [k, d])]);
    }
    for (name, dims) in want {
        // A missing tensor is refused, by name, when the parameters are read.
        let Some(got) = shape(name) else { continue };
        if got != dims {
            return Err(usage(
                what,
                format!("tensor {name} has shape {got:?} but {source} implies {dims:?}"),
                format!("use the {source} that belongs to these weights"),
            ));
        }
    }
    Ok(())
}
