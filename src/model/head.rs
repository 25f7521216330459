//! The language-model head's predictions: each position's most likely next tokens, from the
//! softmax of its logits (in f32, as transformers computes `softmax(logits, -1)`).

use crate::config::ModelConfig;
use crate::params::{Linear, Params, StoredRows};
use anyhow::Result;
use candle_core::Tensor;
use std::borrow::Cow;

/// The unembedding that turns hidden states into logits: a head held in f32 (a toy model's,
/// or a copy of its token table when tied), or a checkpoint's stored table.
pub enum Unembed<'a> {
    Dense(Cow<'a, Linear>),
    Stored(&'a dyn StoredRows),
}

/// Vocabulary rows made f32 at a time from a stored table: 4,096 × d_model (9 MiB for
/// SmolLM2, 14 MiB for a 0.5B Qwen2) in place of the whole table's 113 or 545 MB.
const VOCAB_CHUNK: usize = 4096;

/// The vocabulary cut into slices of at most [`VOCAB_CHUNK`] rows, all of nearly one size:
/// the matrix product sums each logit in the order the whole product does only when no slice
/// is small (a 37-row tail takes gemm's small-matrix path, which rounds differently).
fn slices(vocab: usize) -> impl Iterator<Item = (usize, usize)> {
    let count = vocab.div_ceil(VOCAB_CHUNK).max(1);
    let (size, extra) = (vocab / count, vocab % count);
    (0..count).map(move |i| (i * size + i.min(extra), size + usize::from(i < extra)))
}

impl<'a> Unembed<'a> {
    /// The model's head, if it has one.
    pub fn of(cfg: &ModelConfig, params: &'a Params) -> Option<Unembed<'a>> {
        if let Some(stored) = &params.stored {
            let head = stored.head();
            return cfg.parts.lm_head.as_ref().map(|_| match head.whole() {
                // Held whole (`Params::made`): one product, the slices' bits (the test below).
                Some(weight) => Unembed::Dense(Cow::Owned(Linear {
                    weight: weight.clone(),
                    bias: None,
                    ggml: head.ggml().cloned().map(std::sync::Arc::new),
                })),
                None => Unembed::Stored(head),
            });
        }
        match (&params.lm_head, &cfg.parts.lm_head, &params.token) {
            (Some(head), _, _) => Some(Unembed::Dense(Cow::Borrowed(head))),
            // A tied head reuses the token table (the toy model keeps no second copy).
            (None, Some(h), Some(token)) if h.tied => {
                Some(Unembed::Dense(Cow::Owned(Linear { weight: token.clone(), bias: None, ggml: None })))
            }
            _ => None,
        }
    }

    /// The head held whole in f32, for callers that apply it many times (a patching sweep).
    pub fn dense(self) -> Result<Unembed<'a>> {
        Ok(match self {
            Unembed::Stored(rows) => {
                let weight = rows.rows(0, rows.dims().0)?; // [vocab, d_model]
                Unembed::Dense(Cow::Owned(Linear {
                    weight,
                    bias: None,
                    ggml: rows.ggml().cloned().map(std::sync::Arc::new),
                }))
            }
            dense => dense,
        })
    }

    /// `x·Wᵀ (+ b)` for `x` of shape [pos, d_model]: [pos, vocab]. A stored table is applied
    /// one slice of the vocabulary at a time.
    pub fn logits(&self, x: &Tensor) -> Result<Tensor> {
        match self {
            Unembed::Dense(head) => super::kernels::linear::linear(x, head),
            Unembed::Stored(rows) => {
                let parts = slices(rows.dims().0)
                    .map(|(start, len)| {
                        let weight = rows.rows(start, len)?; // [len, d_model]
                        let ggml = rows.ggml().map(|g| g.rows(start, len)).transpose()?.map(std::sync::Arc::new);
                        super::kernels::linear::linear(x, &Linear { weight, bias: None, ggml })
                        // [pos, len]
                    })
                    .collect::<Result<Vec<_>>>()?;
                Ok(Tensor::cat(&parts, 1)?) // [pos, vocab]
            }
        }
    }
}

/// Per position, the `k` most probable token ids with their probabilities, most probable
/// first; equal probabilities list the lower id first, so the order is the same everywhere.
pub fn top_k(logits: &Tensor, k: usize) -> Result<Vec<Vec<(u32, f32)>>> {
    if k == 0 {
        return Ok(Vec::new());
    }
    // A few positions at a time: the probabilities of every position at once are as large as
    // the logits again (25 MiB for GPT-2 at 128 tokens), twice over as rows, at the run's peak.
    let (positions, _vocab) = logits.dims2()?;
    let mut top = Vec::with_capacity(positions);
    for start in (0..positions).step_by(ROWS) {
        let rows = logits.narrow(0, start, ROWS.min(positions - start))?;
        let probs = super::kernels::softmax::softmax_last_dim(&rows)?.to_vec2::<f32>()?; // [rows, vocab]
        top.extend(probs.iter().map(|row| most_probable(row, k)));
    }
    Ok(top)
}

/// `--lens-track`: per position, each of the `tracked` ids' rank over the whole vocabulary (1:
/// the most probable; an equal probability ranks the lower id first, as [`top_k`] orders them)
/// and its probability, from the same softmax as [`top_k`].
pub fn ranks(logits: &Tensor, tracked: &[u32]) -> Result<Vec<Vec<(usize, f32)>>> {
    let (positions, _vocab) = logits.dims2()?;
    let mut out = Vec::with_capacity(positions);
    for start in (0..positions).step_by(ROWS) {
        let rows = logits.narrow(0, start, ROWS.min(positions - start))?;
        let probs = super::kernels::softmax::softmax_last_dim(&rows)?.to_vec2::<f32>()?; // [rows, vocab]
        out.extend(probs.iter().map(|row| tracked.iter().map(|&id| rank_of(row, id as usize)).collect()));
    }
    Ok(out)
}

/// The rank and probability of `id` in `row`: one more than the ids before it in
/// [`most_probable`]'s order.
fn rank_of(row: &[f32], id: usize) -> (usize, f32) {
    use std::cmp::Ordering::Greater;
    let p = row[id];
    let ahead = row.iter().enumerate().filter(|&(j, q)| q.total_cmp(&p) == Greater || (j < id && *q == p)).count();
    (ahead + 1, p)
}

/// Positions whose probabilities are computed together (in parallel, by candle).
const ROWS: usize = 16;

/// The `k` largest of `row` as (id, probability), largest first, ties by lower id. One pass
/// keeping the best k in order: a vocabulary-wide row is mostly compared with the k-th best
/// once (selecting over an index array cost a 32-token SmolLM2 request ~15 ms).
fn most_probable(row: &[f32], k: usize) -> Vec<(u32, f32)> {
    use std::cmp::Ordering::Less;
    let k = k.min(row.len());
    let mut best: Vec<(u32, f32)> = Vec::with_capacity(k + 1);
    for (i, &p) in row.iter().enumerate() {
        // A later id ranks after an equal probability: only a larger one gets in.
        if best.len() == k && best.last().is_none_or(|&(_, last)| p.total_cmp(&last) != std::cmp::Ordering::Greater) {
            continue;
        }
        let at = best.partition_point(|&(_, q)| q.total_cmp(&p) != Less);
        best.insert(at, (i as u32, p));
        best.truncate(k);
    }
    best
}

#[cfg(test)]
mod tests {
    /// The selection as first written (an index array, selected then sorted), to check
    /// `most_probable` against.
    fn reference(row: &[f32], k: usize) -> Vec<(u32, f32)> {
        let mut ids: Vec<u32> = (0..row.len() as u32).collect();
        let by_prob = |a: &u32, b: &u32| row[*b as usize].total_cmp(&row[*a as usize]).then(a.cmp(b));
        let k = k.min(ids.len());
        if k == 0 {
            return Vec::new();
        }
        if k < ids.len() {
            ids.select_nth_unstable_by(k - 1, by_prob);
            ids.truncate(k);
        }
        ids.sort_by(by_prob);
        ids.into_iter().map(|i| (i, row[i as usize])).collect()
    }

    /// Rows with many ties, zeros of both signs, infinities and NaN, every k from 0 past the
    /// row's length: the same ids, probabilities and order.
    #[test]
    fn most_probable_is_the_reference_selection() {
        let mut g = crate::torch_rng::TorchGenerator::new(7, crate::torch_rng::Kernel::Avx2);
        let mut next = move |n: u64| g.random64() % n;
        let special = [0.0, -0.0, 0.5, 1.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, -f32::NAN];
        for len in [0usize, 1, 2, 7, 100, 5000] {
            let row: Vec<f32> = (0..len)
                .map(|_| if next(4) == 0 { special[next(8) as usize] } else { next(50) as f32 / 49.0 })
                .collect();
            for k in [0usize, 1, 2, 5, 10, 99, 100, 101, 6000] {
                let (a, b) = (super::most_probable(&row, k), reference(&row, k));
                let bits = |v: &[(u32, f32)]| v.iter().map(|&(i, p)| (i, p.to_bits())).collect::<Vec<_>>();
                assert_eq!(bits(&a), bits(&b), "len {len}, k {k}");
            }
        }
    }

    #[test]
    fn softmax_of_zero_and_ln3_ranks_the_larger_first() {
        let logits = candle_core::Tensor::new(&[[0f32, 3f32.ln(), 0.0]], &candle_core::Device::Cpu).unwrap();
        let top = super::top_k(&logits, 2).unwrap();
        assert_eq!(top[0][0].0, 1);
        assert!((top[0][0].1 - 0.6).abs() < 1e-6, "{top:?}");
        // A tie: the lower id first.
        assert_eq!(top[0][1].0, 0);
    }

    /// A stored head applied a slice of the vocabulary at a time gives the whole product's
    /// bits (the promise that a GGUF trace's logits did not change when the head stopped
    /// being held in f32).
    #[test]
    fn a_head_in_slices_agrees_with_the_whole_product_bit_for_bit() {
        use super::Unembed;
        use crate::params::Linear;
        use candle_core::{Device, Tensor};
        for (vocab, d, n) in
            [(8229, 64, 5), (4097, 64, 3), (12_289, 96, 40), (49_153, 64, 7), (9000, 576, 32), (5000, 96, 300)]
        {
            let w = Tensor::randn(0f32, 1., (vocab, d), &Device::Cpu).unwrap();
            let x = Tensor::randn(0f32, 1., (n, d), &Device::Cpu).unwrap();
            let dense = Unembed::Dense(std::borrow::Cow::Owned(Linear { weight: w.clone(), bias: None, ggml: None }));
            let table = crate::params::Whole::new(w);
            let stored = Unembed::Stored(&table);
            let a = dense.logits(&x).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
            let b = stored.logits(&x).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
            assert!(a.iter().zip(&b).all(|(p, q)| p.to_bits() == q.to_bits()), "vocab {vocab}, d {d}, n {n}");
        }
    }

    #[test]
    fn slices_cover_the_vocabulary_in_nearly_equal_parts() {
        for vocab in [1, 4095, 4096, 4097, 8229, 49_152, 151_936] {
            let s: Vec<(usize, usize)> = super::slices(vocab).collect();
            assert_eq!(s.iter().map(|p| p.1).sum::<usize>(), vocab);
            assert!(s.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0 && w[0].1 - w[1].1 <= 1), "{s:?}");
            assert!(s.iter().all(|p| p.1 <= super::VOCAB_CHUNK), "{s:?}");
        }
    }

    /// Positions taken a few at a time give what all at once gives, bit for bit.
    #[test]
    fn blocks_of_positions_agree_with_one_softmax_over_all() {
        use candle_core::{Device, Tensor};
        let n = super::ROWS * 2 + 3;
        let logits = Tensor::arange(0f32, (n * 50) as f32, &Device::Cpu).unwrap().reshape((n, 50)).unwrap();
        let logits = (logits * 0.37).unwrap().sin().unwrap();
        let all = candle_nn::ops::softmax_last_dim(&logits).unwrap().to_vec2::<f32>().unwrap();
        let top = super::top_k(&logits, 3).unwrap();
        assert_eq!(top.len(), n);
        for (row, t) in all.iter().zip(&top) {
            assert_eq!(t, &super::most_probable(row, 3));
        }
    }
}
