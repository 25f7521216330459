//! A decoder's sizes checked against the shapes its file stores, before any loop or
//! allocation sized by them (issue 27): the token table is [vocab_size, hidden_size], and
//! layer 0's query and key projections are [heads × head width, hidden_size] (a config
//! claiming 10^12 heads once allocated a head map of 10^12 entries before the memory cap).
//! GPT-2's fused projection is checked through the table: its heads divide hidden_size.

use crate::error::usage;
use crate::sources::family::DecoderConfig;
use anyhow::Result;

/// `table` is the token table's name, `qk` layer 0's query and key weights' where the family
/// stores them apart; `shape` gives a stored tensor's shape (rows first), `source` says where
/// the sizes came from (`config.json`, `the metadata`) and `what` names the model.
pub fn check(
    c: &DecoderConfig,
    table: &str,
    qk: Option<[&str; 2]>,
    shape: impl Fn(&str) -> Option<Vec<usize>>,
    (source, what): (&str, &str),
) -> Result<()> {
    let (d, dh) = (c.hidden_size, c.d_head());
    let (q, k) = (c.num_attention_heads.saturating_mul(dh), c.kv_heads().saturating_mul(dh));
    let mut want = vec![(table, [c.vocab_size, d])];
    if let Some([q_name, k_name]) = qk {
        want.extend([(q_name, [q, d]), (k_name, [k, d])]);
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
