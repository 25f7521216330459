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
    let probs = candle_nn::ops::softmax_last_dim(logits)?.to_vec2::<f32>()?; // [pos, vocab]
    Ok(probs
        .iter()
        .map(|row| {
            let mut ids: Vec<u32> = (0..row.len() as u32).collect();
            let by_prob = |a: &u32, b: &u32| row[*b as usize].total_cmp(&row[*a as usize]).then(a.cmp(b));
            let k = k.min(ids.len());
            if k < ids.len() {
                ids.select_nth_unstable_by(k - 1, by_prob);
                ids.truncate(k);
            }
            ids.sort_by(by_prob);
            ids.into_iter().map(|i| (i, row[i as usize])).collect()
        })
        .collect())
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
}
