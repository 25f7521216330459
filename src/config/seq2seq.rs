//! T5's relative position bias ([`RelBias`]), which either stack of an encoder–decoder may
//! have. The decoder stack itself ([`super::Seq2Seq`]) holds a `ModelConfig`, so it lives
//! with it in `config/model.rs`.

use serde::Serialize;

/// T5's relative position bias (Raffel et al. 2020, §2.1; Shaw et al. 2018): a learned scalar
/// per head and bucket of the key's offset from the query, added to every layer's scores,
/// computed from the first layer's table and shared by the stack's layers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RelBias {
    pub buckets: usize,
    pub max_distance: usize,
    /// The encoder's buckets tell earlier from later keys; the (causal) decoder's do not.
    pub bidirectional: bool,
}

impl RelBias {
    /// The bucket of a key `rel = key − query` positions away: transformers'
    /// `_relative_position_bucket`, with its logarithm in f32 as PyTorch computes it, so
    /// every offset falls in the same bucket as there (offsets past `max_distance` share the
    /// last bucket).
    pub fn bucket(&self, rel: i64) -> usize {
        let (mut buckets, mut base) = (self.buckets as i64, 0i64);
        let distance = if self.bidirectional {
            buckets /= 2;
            base = if rel > 0 { buckets } else { 0 };
            rel.abs()
        } else {
            (-rel).max(0)
        };
        let exact = buckets / 2;
        if distance < exact {
            return (base + distance) as usize;
        }
        let denom = ((self.max_distance as f64) / exact as f64).ln() as f32;
        let scaled = (distance as f32 / exact as f32).ln() / denom * (buckets - exact) as f32;
        (base + (exact + scaled as i64).min(buckets - 1)) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::RelBias;

    /// T5's default encoder buckets (32, 128) at offsets worked out from transformers'
    /// formula: 16 per direction, 8 exact, then logarithmic up to 128.
    #[test]
    fn buckets_by_hand() {
        let b = RelBias { buckets: 32, max_distance: 128, bidirectional: true };
        assert_eq!([b.bucket(0), b.bucket(-1), b.bucket(1), b.bucket(-7), b.bucket(7)], [0, 1, 17, 7, 23]);
        // 8 + ln(12/8)/ln(16)·8 = 8 + 1.17 → 9; far offsets end in the last bucket.
        assert_eq!([b.bucket(-12), b.bucket(-1000), b.bucket(1000)], [9, 15, 31]);
        // Causal: 32 buckets, 16 exact; 16 + ln(20/16)/ln(8)·16 = 17.7 → 17.
        let causal = RelBias { bidirectional: false, ..b };
        assert_eq!([causal.bucket(3), causal.bucket(-3), causal.bucket(-20)], [0, 3, 17]);
    }
}
