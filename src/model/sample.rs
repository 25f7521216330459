//! Choosing a generation's next token from a step's logits: the most probable one (greedy),
//! or one drawn at random from the distribution that temperature, top-k and top-p leave, as
//! transformers' `generate(do_sample=True)` draws it. The generator is this file's own
//! (SplitMix64), so a seed gives the same tokens on every run and machine.

use crate::config::Strategy;

/// A strategy with its generator's state.
pub struct Sampler {
    strategy: Strategy,
    state: u64,
}

impl Sampler {
    pub fn new(strategy: Strategy) -> Self {
        let state = match strategy {
            Strategy::Sample { seed, .. } => seed,
            Strategy::Greedy => 0,
        };
        Sampler { strategy, state }
    }

    /// The next token's id from one position's logits (`[vocab]`, as the model returns them).
    pub fn choose(&mut self, logits: &[f32]) -> u32 {
        match self.strategy {
            Strategy::Greedy => argmax(logits),
            Strategy::Sample { temperature, top_p, top_k, .. } => {
                let kept = warped(logits, temperature, top_k, top_p);
                let u = self.uniform();
                draw(&kept, u)
            }
        }
    }

    /// A uniform number in [0, 1): SplitMix64's next output, its top 53 bits.
    fn uniform(&mut self) -> f64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The index of the largest value, the first of equal ones (as `torch.argmax`).
pub fn argmax(row: &[f32]) -> u32 {
    let mut best = 0;
    for (i, v) in row.iter().enumerate() {
        if *v > row[best] {
            best = i;
        }
    }
    best as u32
}

/// The tokens sampling may draw, with their probabilities, most probable first (equal ones
/// by lower id): softmax(logits / temperature) over the `top_k` largest (0: every token;
/// ties at the k-th value are kept, as transformers' `TopKLogitsWarper`), then the smallest
/// prefix whose probability reaches `top_p` (at least one token, as `TopPLogitsWarper`),
/// renormalised.
///
/// A temperature so small that a finite logit divided by it leaves f32's range (below about
/// 1e-37 for logits near 40; `T as f32` is 0 below 1e-45) is the limit T → 0: the most
/// probable tokens alike (one, unless tied), where transformers' division would hand
/// infinities and NaN to its sampler. A temperature above f32's range divides every logit to
/// 0: all tokens alike.
pub fn warped(logits: &[f32], temperature: f64, top_k: usize, top_p: f64) -> Vec<(u32, f64)> {
    // logits / T in f32, as transformers divides the f32 scores; then f64 from here on.
    let mut scaled: Vec<f32> = logits.iter().map(|&l| l / temperature as f32).collect();
    if logits.iter().zip(&scaled).any(|(l, s)| l.is_finite() && !s.is_finite()) {
        // The limit: the largest logits alike (0), every other one gone (−∞, dropped below).
        let max = logits.iter().copied().filter(|l| l.is_finite()).fold(f32::NEG_INFINITY, f32::max);
        scaled = logits.iter().map(|&l| if l == max { 0.0 } else { f32::NEG_INFINITY }).collect();
    }
    let mut ids: Vec<u32> = (0..scaled.len() as u32).filter(|&i| scaled[i as usize].is_finite()).collect();
    ids.sort_by(|a, b| scaled[*b as usize].total_cmp(&scaled[*a as usize]).then(a.cmp(b)));
    if top_k > 0 && top_k < ids.len() {
        let kth = scaled[ids[top_k - 1] as usize];
        ids.retain(|&i| scaled[i as usize] >= kth);
    }
    let max = ids.first().map_or(0.0, |&i| scaled[i as usize] as f64);
    let exps: Vec<f64> = ids.iter().map(|&i| (scaled[i as usize] as f64 - max).exp()).collect();
    let total: f64 = exps.iter().sum();
    let mut kept = Vec::new();
    let mut mass = 0.0;
    for (&i, e) in ids.iter().zip(&exps) {
        kept.push((i, e / total));
        mass += e / total;
        if mass >= top_p {
            break;
        }
    }
    let kept_total: f64 = kept.iter().map(|k| k.1).sum();
    kept.into_iter().map(|(i, p)| (i, p / kept_total)).collect()
}

/// The token whose interval of the cumulative distribution holds `u` ∈ [0, 1).
fn draw(kept: &[(u32, f64)], u: f64) -> u32 {
    let mut cum = 0.0;
    for &(i, p) in kept {
        cum += p;
        if u < cum {
            return i;
        }
    }
    kept.last().map_or(0, |k| k.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_takes_the_first_of_equal_maxima() {
        assert_eq!(argmax(&[0.0, 2.0, 2.0, 1.0]), 1);
    }

    #[test]
    fn a_vanishing_temperature_is_greedy_and_a_huge_one_uniform() {
        let logits = [0.5f32, 2.0, -1.0, 2.0];
        for t in [1e-30, 1e-45, 5e-324] {
            assert_eq!(warped(&logits, t, 0, 1.0), [(1, 0.5), (3, 0.5)], "T = {t}");
            assert_eq!(warped(&logits, t, 0, 0.4), [(1, 1.0)], "T = {t}, top-p 0.4");
        }
        let flat = warped(&logits, 1e300, 0, 1.0);
        let mut ids: Vec<u32> = flat.iter().map(|k| k.0).collect();
        ids.sort();
        assert_eq!(ids, [0, 1, 2, 3]);
        assert!(flat.iter().all(|k| (k.1 - 0.25).abs() < 1e-12), "{flat:?}");
    }

    #[test]
    fn top_k_then_top_p_by_hand() {
        // probs ∝ [4, 3, 2, 1] (logits ln of them): top-k 3 keeps 4, 3, 2 (of 9); top-p 0.7
        // keeps the smallest prefix reaching 0.7: 4/9 + 3/9 = 0.78 → {0: 4/7, 1: 3/7}.
        let logits: Vec<f32> = [4f32, 3.0, 2.0, 1.0].iter().map(|p| p.ln()).collect();
        let kept = warped(&logits, 1.0, 3, 0.7);
        assert_eq!(kept.iter().map(|k| k.0).collect::<Vec<_>>(), [0, 1]);
        assert!((kept[0].1 - 4.0 / 7.0).abs() < 1e-6 && (kept[1].1 - 3.0 / 7.0).abs() < 1e-6, "{kept:?}");
    }

    #[test]
    fn the_same_seed_draws_the_same_tokens() {
        let logits = [0.1f32, 0.5, -0.3, 0.9, 0.0];
        let s = Strategy::Sample { temperature: 0.8, top_p: 1.0, top_k: 0, seed: 7 };
        let draws = |strategy| {
            let mut s = Sampler::new(strategy);
            (0..50).map(|_| s.choose(&logits)).collect::<Vec<_>>()
        };
        assert_eq!(draws(s), draws(s));
        assert_ne!(draws(s), draws(Strategy::Sample { temperature: 0.8, top_p: 1.0, top_k: 0, seed: 8 }));
    }

    /// 200,000 draws from softmax(logits / 0.7) restricted by top-k 4 and top-p 0.85 match
    /// that distribution: Pearson's χ² over the kept tokens stays below 13.82, the 0.999
    /// quantile of χ² with 2 degrees of freedom (a fixed seed, so the test cannot flake), and
    /// the tokens top-k removes (ids 3, 5) and the one top-p removes (id 1) are never drawn.
    #[test]
    fn sampled_frequencies_match_the_restricted_softmax() {
        let logits = [1.0f32, 0.2, 0.8, -0.5, 0.6, -2.0];
        let (t, k, p) = (0.7, 4, 0.85);
        // By hand: softmax(logits / 0.7) of the four largest (ids 0, 2, 4, 1), then the
        // prefix reaching 0.85 (0.379 + 0.286 + 0.214 = 0.878: three tokens).
        let top4 = [0usize, 2, 4, 1];
        let e: Vec<f64> = top4.iter().map(|&i| (logits[i] as f64 / t).exp()).collect();
        let z: f64 = e.iter().sum();
        let mut expect = Vec::new();
        let mut mass = 0.0;
        for (i, x) in top4.iter().zip(&e) {
            expect.push((*i as u32, x / z));
            mass += x / z;
            if mass >= p {
                break;
            }
        }
        let kept_total: f64 = expect.iter().map(|e| e.1).sum();
        let expect: Vec<(u32, f64)> = expect.into_iter().map(|(i, q)| (i, q / kept_total)).collect();
        assert_eq!(expect.len(), 3, "the case should keep three tokens: {expect:?}");
        let mut s = Sampler::new(Strategy::Sample { temperature: t, top_p: p, top_k: k, seed: 2026 });
        let n = 200_000;
        let mut counts = [0usize; 6];
        for _ in 0..n {
            counts[s.choose(&logits) as usize] += 1;
        }
        assert_eq!(counts[1] + counts[3] + counts[5], 0, "removed tokens drawn: {counts:?}");
        let chi2: f64 = expect
            .iter()
            .map(|&(i, q)| {
                let want = q * n as f64;
                (counts[i as usize] as f64 - want).powi(2) / want
            })
            .sum();
        assert!(chi2 < 13.82, "χ² = {chi2:.2} for {counts:?} against {expect:?}");
    }
}
