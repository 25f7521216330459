//! The language-model head's predictions: each position's most likely next tokens, from the
//! softmax of its logits (in f32, as transformers computes `softmax(logits, -1)`).

use anyhow::Result;
use candle_core::Tensor;

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
        let probs = super::softmax::softmax_last_dim(&rows)?.to_vec2::<f32>()?; // [rows, vocab]
        top.extend(probs.iter().map(|row| most_probable(row, k)));
    }
    Ok(top)
}

/// Positions whose probabilities are computed together (in parallel, by candle).
const ROWS: usize = 16;

/// The `k` largest of `row` as (id, probability), largest first, ties by lower id.
fn most_probable(row: &[f32], k: usize) -> Vec<(u32, f32)> {
    let mut ids: Vec<u32> = (0..row.len() as u32).collect();
    let by_prob = |a: &u32, b: &u32| row[*b as usize].total_cmp(&row[*a as usize]).then(a.cmp(b));
    let k = k.min(ids.len());
    if k < ids.len() {
        ids.select_nth_unstable_by(k - 1, by_prob);
        ids.truncate(k);
    }
    ids.sort_by(by_prob);
    ids.into_iter().map(|i| (i, row[i as usize])).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn softmax_of_zero_and_ln3_ranks_the_larger_first() {
        let logits = candle_core::Tensor::new(&[[0f32, 3f32.ln(), 0.0]], &candle_core::Device::Cpu).unwrap();
        let top = super::top_k(&logits, 2).unwrap();
        assert_eq!(top[0][0].0, 1);
        assert!((top[0][0].1 - 0.6).abs() < 1e-6, "{top:?}");
        // A tie: the lower id first.
        assert_eq!(top[0][1].0, 0);
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
