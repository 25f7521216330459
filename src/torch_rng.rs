//! A bit-exact, pure-Rust port of PyTorch 2.5.1's default CPU random number generator:
//! `torch.manual_seed`, the MT19937 engine, `torch.rand` / `uniform_`, `torch.randn` /
//! `normal_` (both the 16-lane block kernel and the scalar binary64 path with its cached
//! sample), and the default initialisation of `nn.Linear`, `nn.Embedding` and
//! `nn.LayerNorm`, all for float32 CPU tensors. The behaviour is specified exactly in
//! `docs/TORCH_RNG.md` (section numbers below refer to it) and checked against
//! real PyTorch output in `fixtures/torch-rng/vectors.json` (`tests/torch_rng_vectors.rs`).
//! Two CPU kernels are emulated ([`Kernel`]): the AVX2 one that official x86-64 wheels run
//! (Cephes log/sincos with the compiler's FMA contractions written out as `mul_add`), and
//! the no-AVX2 "generic" one (platform `logf`/`sinf`/`cosf`, bit-exact with glibc).
//! long: a port that follows docs/TORCH_RNG.md section by section reads best in one file.

use std::f64::consts::PI;

/// Which PyTorch CPU kernel to emulate. The two differ in whether multiply-adds are fused
/// (`uniform_`, `normal_`) and in how `normal_` evaluates log/sin/cos (SPEC §3.1, §5.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Kernel {
    /// x86-64 CPUs with AVX2 or AVX-512, i.e. what official wheels run on typical
    /// tutorial machines (SPEC §5.1a, §7 recommends it as the default).
    #[default]
    Avx2,
    /// x86-64 without AVX2 (`ATEN_CPU_CAPABILITY=default`); uses the platform libm, so it
    /// is bit-exact only where Rust's `f32::ln/sin/cos` are glibc's (SPEC §5.1b).
    Generic,
}

impl Kernel {
    /// The name used in `vectors.json` and on the command line: `"avx2"` or `"generic"`.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Avx2 => "avx2",
            Kernel::Generic => "generic",
        }
    }

    /// Inverse of [`Kernel::name`] (case-insensitive).
    pub fn from_name(name: &str) -> Option<Kernel> {
        match name.to_ascii_lowercase().as_str() {
            "avx2" => Some(Kernel::Avx2),
            "generic" => Some(Kernel::Generic),
            _ => None,
        }
    }
}

/// Converts a Python-int seed to the 64-bit value `torch.manual_seed` keeps (SPEC §1):
/// seeds in `[-2^63, 2^64-1]` are taken mod 2^64 (two's complement, so `-1` becomes
/// `2^64-1`); anything else is `None` (PyTorch: "Overflow when unpacking long").
pub fn seed_from_i128(seed: i128) -> Option<u64> {
    if seed < i128::from(i64::MIN) || seed > i128::from(u64::MAX) {
        return None;
    }
    // Truncating cast == reduction mod 2^64 == two's complement for the negative range.
    Some(seed as u64)
}

/// `nn.LayerNorm(n, bias)` parameters: ones and zeros; it draws nothing (SPEC §6).
pub fn layer_norm(n: usize, bias: bool) -> (Vec<f32>, Option<Vec<f32>>) {
    (vec![1.0; n], bias.then(|| vec![0.0; n]))
}

const MT_N: usize = 624;
const MT_M: usize = 397;

/// PyTorch's CPU generator: MT19937 state plus the cached binary64 normal sample.
/// (The generator's binary32 cache is never used by the ops ported here, SPEC §5.2.)
#[derive(Clone, Debug)]
pub struct TorchGenerator {
    mt: [u32; MT_N],
    /// Next word of `mt` to temper; `MT_N` means "regenerate the block first".
    idx: usize,
    next_double_normal: Option<f64>,
    initial_seed: u64,
    kernel: Kernel,
}

impl TorchGenerator {
    /// A generator in the state `torch.manual_seed(seed)` leaves it in.
    pub fn new(seed: u64, kernel: Kernel) -> Self {
        let mut g = TorchGenerator { mt: [0; MT_N], idx: MT_N, next_double_normal: None, initial_seed: seed, kernel };
        g.manual_seed(seed);
        g
    }

    /// `torch.manual_seed(seed)` (SPEC §1). Only the low 32 bits reach the engine, so
    /// seeds equal mod 2^32 give the same stream. Clears the cached normal sample.
    pub fn manual_seed(&mut self, seed: u64) {
        self.initial_seed = seed;
        self.mt[0] = seed as u32;
        for j in 1..MT_N {
            let prev = self.mt[j - 1];
            self.mt[j] = 1812433253u32.wrapping_mul(prev ^ (prev >> 30)).wrapping_add(j as u32);
        }
        // PyTorch's `left = 1, next = 0`: the first draw regenerates the whole block.
        self.idx = MT_N;
        self.next_double_normal = None;
    }

    /// The full 64-bit seed last set (`torch.initial_seed()`).
    pub fn initial_seed(&self) -> u64 {
        self.initial_seed
    }

    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// Next raw MT19937 output; identical to C++ `std::mt19937` (SPEC §2).
    pub fn random(&mut self) -> u32 {
        if self.idx >= MT_N {
            self.regenerate();
        }
        let mut y = self.mt[self.idx];
        self.idx += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9D2C_5680;
        y ^= (y << 15) & 0xEFC6_0000;
        y ^= y >> 18;
        y
    }

    /// In place and in index order, so wrapped indices read already-updated words,
    /// exactly like the standard algorithm (SPEC §2).
    fn regenerate(&mut self) {
        let mt = &mut self.mt;
        for i in 0..MT_N {
            let y = (mt[i] & 0x8000_0000) | (mt[(i + 1) % MT_N] & 0x7FFF_FFFF);
            let mag = if y & 1 != 0 { 0x9908_B0DF } else { 0 };
            mt[i] = mt[(i + MT_M) % MT_N] ^ (y >> 1) ^ mag;
        }
        self.idx = 0;
    }

    /// Two draws; the **first** is the high word (SPEC §2).
    pub fn random64(&mut self) -> u64 {
        let hi = u64::from(self.random());
        (hi << 32) | u64::from(self.random())
    }

    /// One binary32 uniform in [0, 1 - 2^-24]: the low 24 bits of one draw (SPEC §3.1).
    fn unit_f32(&mut self) -> f32 {
        (self.random() & 0x00FF_FFFF) as f32 * (1.0 / 16_777_216.0)
    }

    /// One binary64 uniform from the low 53 bits of `random64` (SPEC §3.2).
    fn unit_f64(&mut self) -> f64 {
        (self.random64() & ((1u64 << 53) - 1)) as f64 * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `torch.rand(n)`: `uniform_(0, 1)`, which is the raw unit value on both kernels.
    pub fn rand(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.unit_f32()).collect()
    }

    /// `torch.empty(n).uniform_(a, b)`, filled serially (SPEC §3.1, §3.3). The bounds are
    /// rounded to binary32 first; the AVX2 build fuses `x*(to-from)+from`, generic doesn't.
    pub fn uniform(&mut self, n: usize, a: f64, b: f64) -> Vec<f32> {
        let from = a as f32;
        let range = b as f32 - from;
        let fused = self.kernel == Kernel::Avx2;
        (0..n)
            .map(|_| {
                let x = self.unit_f32();
                if fused {
                    x.mul_add(range, from)
                } else {
                    x * range + from
                }
            })
            .collect()
    }

    /// `normal_(mean, std)` on a contiguous float32 tensor of `n` elements (also
    /// `torch.randn`). `n >= 16` takes the 16-lane block kernel (SPEC §5.1), which ignores
    /// the cached sample; smaller tensors take the scalar binary64 path (SPEC §5.2).
    pub fn normal(&mut self, n: usize, mean: f64, std: f64) -> Vec<f32> {
        if n < 16 {
            return self.normal_scalar(n, mean, std);
        }
        let (m, s) = (mean as f32, std as f32);
        let mut d = self.rand(n);
        for block in d.chunks_exact_mut(16) {
            self.transform16(block.try_into().unwrap(), m, s);
        }
        if !n.is_multiple_of(16) {
            // The ragged tail is redone from 16 FRESH draws, overwriting the end of the
            // last full block too (SPEC §5.1).
            let mut tail = [0f32; 16];
            for v in tail.iter_mut() {
                *v = self.unit_f32();
            }
            self.transform16(&mut tail, m, s);
            d[n - 16..].copy_from_slice(&tail);
        }
        d
    }

    /// The scalar binary64 `normal_` path for `n` elements in memory order (SPEC §5.2).
    /// PyTorch uses it for `n < 16` and for every non-contiguous tensor: to emulate
    /// `t.normal_()` on a strided view, call this with `t.numel()` and scatter the values
    /// in the view's memory (storage) order.
    pub fn normal_scalar(&mut self, n: usize, mean: f64, std: f64) -> Vec<f32> {
        (0..n).map(|_| self.normal_f64(mean, std) as f32).collect()
    }

    /// `at::normal_distribution<double>`: Box-Muller in binary64, the `sin` half cached
    /// for the next call until `manual_seed` (SPEC §5.2).
    fn normal_f64(&mut self, mean: f64, std: f64) -> f64 {
        if let Some(z) = self.next_double_normal.take() {
            return z * std + mean;
        }
        let u1 = self.unit_f64();
        let u2 = self.unit_f64();
        let r = (-2.0 * (-u2).ln_1p()).sqrt();
        let theta = 2.0 * PI * u1;
        self.next_double_normal = Some(r * theta.sin());
        r * theta.cos() * std + mean
    }

    /// Box-Muller on 16 uniforms: lane k (radius from `1 - d[k]`) pairs with lane k+8
    /// (angle from `d[k+8]`); cos goes to lane k, sin to lane k+8 (SPEC §5.1).
    fn transform16(&self, d: &mut [f32; 16], m: f32, s: f32) {
        for k in 0..8 {
            let u1 = 1.0 - d[k]; // exact, in [2^-24, 1]
            let u2 = d[k + 8];
            match self.kernel {
                Kernel::Avx2 => {
                    let r = (-2.0 * cephes_log(u1)).sqrt();
                    let (sin, cos) = cephes_sincos(TWO_PI * u2);
                    d[k] = (r * cos).mul_add(s, m);
                    d[k + 8] = (r * sin).mul_add(s, m);
                }
                Kernel::Generic => {
                    let r = (-2.0 * u1.ln()).sqrt();
                    // The angle is formed in binary64 and rounded once (SPEC §5.1b).
                    let theta = (2.0 * PI * f64::from(u2)) as f32;
                    d[k] = r * theta.cos() * s + m;
                    d[k + 8] = r * theta.sin() * s + m;
                }
            }
        }
    }

    /// `nn.Linear(in_features, out_features, bias)` (SPEC §6): the weight, row-major
    /// `[out][in]`, gets `kaiming_uniform_(a=√5)`, then the bias `uniform_(±1/√in)`.
    pub fn linear(&mut self, in_features: usize, out_features: usize, bias: bool) -> (Vec<f32>, Option<Vec<f32>>) {
        let numel = in_features * out_features;
        // PyTorch skips initialising zero-element tensors and so draws nothing; the
        // (empty) weight is returned as zeros.
        let weight = if numel == 0 {
            vec![0.0; numel]
        } else {
            // kaiming_uniform_ in binary64 exactly as Python evaluates it; `1 + a*a` is
            // 6.000000000000001, so `bound` may differ from 1/√in in the last bit.
            let a = 5f64.sqrt();
            let gain = (2.0 / (1.0 + a * a)).sqrt();
            let std = gain / (in_features as f64).sqrt();
            let bound = 3f64.sqrt() * std;
            self.uniform(numel, -bound, bound)
        };
        let bias = bias.then(|| {
            // With in == 0 the bound is 0, but the bias still consumes its draws.
            let b = if in_features > 0 { 1.0 / (in_features as f64).sqrt() } else { 0.0 };
            self.uniform(out_features, -b, b)
        });
        (weight, bias)
    }

    /// `nn.Embedding(num, dim, padding_idx)` (SPEC §6): `normal_(0, 1)` over the row-major
    /// `[num][dim]` table, then the padding row (negative counts from the end) is zeroed;
    /// its draws are consumed anyway.
    ///
    /// # Panics
    /// If `padding_idx` is outside `[-num, num)`, where PyTorch raises an AssertionError.
    pub fn embedding(&mut self, num: usize, dim: usize, padding_idx: Option<i64>) -> Vec<f32> {
        let row = padding_idx.map(|p| {
            let n = num as i64;
            assert!((-n..n).contains(&p), "padding_idx {p} must be within num_embeddings ({num})");
            (if p < 0 { p + n } else { p }) as usize
        });
        let mut w = self.normal(num * dim, 0.0, 1.0);
        if let Some(r) = row {
            w[r * dim..(r + 1) * dim].fill(0.0);
        }
        w
    }
}

// ---------------------------------------------------------------------------------------
// Cephes single-precision log and sincos as in the AVX2 kernel (avx_mathfun.h), one lane.
// Every `mul_add` below is a multiply-add that the official GCC build contracts into an
// FMA; the plain ops round once each. Both are required for bit-exactness (SPEC §5.1a, §7).
// Constants are the binary64 literals of avx_mathfun rounded to binary32 (table in §5.1a;
// `tests::constants_are_rounded_literals` checks the bit patterns against the literals).

const TWO_PI: f32 = f32::from_bits(0x40C9_0FDB);
const SQRTHF: f32 = f32::from_bits(0x3F35_04F3);
const LOG_Q1: f32 = f32::from_bits(0xB95E_8083);
const LOG_Q2: f32 = f32::from_bits(0x3F31_8000);
const LOG_P: [f32; 9] = [
    f32::from_bits(0x3D90_21BB),
    f32::from_bits(0xBDEB_D1B8),
    f32::from_bits(0x3DEF_251A),
    f32::from_bits(0xBDFE_5D4F),
    f32::from_bits(0x3E11_E9BF),
    f32::from_bits(0xBE2A_AE50),
    f32::from_bits(0x3E4C_CEAC),
    f32::from_bits(0xBE7F_FFFC),
    f32::from_bits(0x3EAA_AAAA),
];
const FOPI: f32 = f32::from_bits(0x3FA2_F983);
const DP1: f32 = f32::from_bits(0xBF49_0000);
const DP2: f32 = f32::from_bits(0xB97D_A000);
const DP3: f32 = f32::from_bits(0xB322_2169);
const SIN_S: [f32; 3] = [f32::from_bits(0xB94C_A1F9), f32::from_bits(0x3C08_839E), f32::from_bits(0xBE2A_AAA3)];
const COS_C: [f32; 3] = [f32::from_bits(0x37CC_F5CE), f32::from_bits(0xBAB6_061A), f32::from_bits(0x3D2A_AAA5)];

/// Natural log for x in (0, 1] (SPEC §5.1a "LOG").
fn cephes_log(x: f32) -> f32 {
    let b = x.max(f32::MIN_POSITIVE).to_bits();
    let mut e = ((b >> 23) as i32 - 127) as f32 + 1.0;
    let xm = f32::from_bits((b & 0x807F_FFFF) | 0x3F00_0000); // mantissa in [0.5, 1)
    let t = if xm < SQRTHF {
        e -= 1.0;
        (xm - 1.0) + xm
    } else {
        xm - 1.0
    };
    let z = t * t;
    let mut y = LOG_P[0];
    for &p in &LOG_P[1..] {
        y = y.mul_add(t, p);
    }
    y *= t;
    y = y.mul_add(z, e * LOG_Q1);
    y = (-z).mul_add(0.5, y);
    e.mul_add(LOG_Q2, t + y)
}

/// (sin x, cos x) for x >= 0 (SPEC §5.1a "SINCOS").
fn cephes_sincos(x: f32) -> (f32, f32) {
    let j = (((x * FOPI) as i32) + 1) & !1;
    let y = j as f32;
    let r = y.mul_add(DP3, y.mul_add(DP2, y.mul_add(DP1, x)));
    let z = r * r;
    let pc = COS_C[0].mul_add(z, COS_C[1]).mul_add(z, COS_C[2]) * z;
    let pc = pc.mul_add(z, -(z * 0.5)) + 1.0;
    let ps = (SIN_S[0].mul_add(z, SIN_S[1]).mul_add(z, SIN_S[2]) * z).mul_add(r, r);
    let (s, c) = if j & 2 == 0 { (ps, pc) } else { (pc, ps) };
    let s = if j & 4 != 0 { -s } else { s };
    // Two's-complement j - 2: for j = 0 it is -2, whose bit 2 is set, so C stays positive.
    let c = if (j.wrapping_sub(2)) & 4 == 0 { -c } else { c };
    (s, c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round4(v: &[f32]) -> Vec<f64> {
        v.iter().map(|&x| (f64::from(x) * 1e4).round() / 1e4).collect()
    }

    #[test]
    fn mt19937_check_values() {
        // SPEC §2.
        let mut g = TorchGenerator::new(0, Kernel::Avx2);
        assert_eq!([g.random(), g.random(), g.random()], [2357136044, 2546248239, 3071714933]);
        let mut g = TorchGenerator::new(123, Kernel::Avx2);
        assert_eq!([g.random(), g.random(), g.random()], [2991312382, 3062119789, 1228959102]);
        let mut g = TorchGenerator::new(5489, Kernel::Avx2);
        let last = (0..10_000).map(|_| g.random()).last();
        assert_eq!(last, Some(4123659995)); // std::mt19937's own check value
    }

    #[test]
    fn seeding_uses_low_32_bits_and_twos_complement() {
        // SPEC §1.
        assert_eq!(seed_from_i128(-1), Some(u64::MAX));
        assert_eq!(seed_from_i128(i128::from(u64::MAX)), Some(u64::MAX));
        assert_eq!(seed_from_i128(-(1i128 << 63)), Some(1 << 63));
        assert_eq!(seed_from_i128(-(1i128 << 63) - 1), None);
        assert_eq!(seed_from_i128(1i128 << 64), None);
        let mut a = TorchGenerator::new((1 << 32) + 5, Kernel::Avx2);
        let mut b = TorchGenerator::new(5, Kernel::Avx2);
        assert_eq!(a.rand(700), b.rand(700));
        assert_eq!(a.initial_seed(), (1 << 32) + 5);
    }

    #[test]
    fn random64_high_word_first() {
        let mut g = TorchGenerator::new(0, Kernel::Avx2);
        assert_eq!(g.random64(), (2357136044u64 << 32) | 2546248239);
    }

    #[test]
    fn tutorial_rand() {
        // reference.py TUTORIAL["rand"]: manual_seed(123); rand(3,2); rand(3,2); rand(4,2).
        let mut g = TorchGenerator::new(123, Kernel::Avx2);
        assert_eq!(round4(&g.rand(6)), [0.2961, 0.5166, 0.2517, 0.6886, 0.0740, 0.8665]);
        assert_eq!(round4(&g.rand(6)), [0.1366, 0.1025, 0.1841, 0.7264, 0.3153, 0.6871]);
        assert_eq!(round4(&g.rand(8)), [0.0756, 0.1966, 0.3164, 0.4017, 0.1186, 0.8274, 0.3821, 0.6605]);
    }

    #[test]
    fn tutorial_embeddings() {
        // n = 24: one full block plus a 16-draw tail block (SPEC §5.1).
        for kernel in [Kernel::Avx2, Kernel::Generic] {
            let e = TorchGenerator::new(123, kernel).embedding(6, 4, None);
            assert_eq!(
                round4(&e),
                [
                    0.3374, -0.1778, -0.3035, -0.5880, 0.3486, 0.6603, -0.2196, -0.3792, -0.1606, -0.4015, 0.6957,
                    -1.8061, 1.8960, -0.1750, 1.3689, -1.6033, -0.7849, -1.4096, -0.4076, 0.7953, 0.9985, 0.2212,
                    1.8319, -0.3378
                ]
            );
        }
        let e = TorchGenerator::new(123, Kernel::Avx2).embedding(8, 2, None);
        assert_eq!(round4(&e[8..12]), [0.7671, -1.1925, 0.6984, -1.4097]); // rows 4, 5
        let e = TorchGenerator::new(42, Kernel::Avx2).embedding(6, 16, None);
        assert_eq!(
            round4(&e[..16]),
            [
                1.9269, 1.4873, 0.9007, -2.1055, 0.6784, -1.2345, -0.0431, -1.6047, -0.7521, 1.6487, -0.3925, -1.4036,
                -0.7279, -0.5594, -0.7688, 0.7624
            ]
        );
    }

    #[test]
    fn embedding_padding_row_still_draws() {
        let plain = TorchGenerator::new(7, Kernel::Avx2).embedding(7, 3, None);
        let mut g = TorchGenerator::new(7, Kernel::Avx2);
        let padded = g.embedding(7, 3, Some(-5)); // row 2
        assert_eq!(&padded[6..9], &[0.0; 3]);
        assert_eq!(&padded[..6], &plain[..6]);
        assert_eq!(&padded[9..], &plain[9..]);
    }

    #[test]
    fn linear_draw_counts() {
        // Linear(0, 3): no weight draws, bias draws 3 and is all zeros (SPEC §6).
        let mut g = TorchGenerator::new(1, Kernel::Avx2);
        let (w, b) = g.linear(0, 3, true);
        assert!(w.is_empty());
        assert_eq!(b, Some(vec![0.0; 3]));
        let mut h = TorchGenerator::new(1, Kernel::Avx2);
        h.rand(3);
        assert_eq!(g.random(), h.random());
        // Weight bound within ±1/√in.
        let (w, b) = TorchGenerator::new(0, Kernel::Avx2).linear(4, 4, true);
        assert!(w.iter().chain(b.as_ref().unwrap()).all(|x| x.abs() <= 0.5));
        let a = 5f64.sqrt();
        assert_eq!(1.0 + a * a, 6.000000000000001);
    }

    #[test]
    fn scalar_normal_cache_carries_over() {
        // SPEC §5.2: randn(3) leaves a cached sample, randn(20) ignores it, randn(1) uses it.
        let mut g = TorchGenerator::new(0, Kernel::Avx2);
        let first4 = g.normal(4, 0.0, 1.0);
        let mut g = TorchGenerator::new(0, Kernel::Avx2);
        g.normal(3, 0.0, 1.0);
        g.normal(20, 0.0, 1.0);
        let draws = 2 * 4 + (20 + 16); // two scalar pairs of random64, then the block
        assert_eq!(g.normal(1, 0.0, 1.0), [first4[3]]);
        let mut h = TorchGenerator::new(0, Kernel::Avx2);
        for _ in 0..draws {
            h.random();
        }
        assert_eq!(g.random(), h.random());
    }

    #[test]
    fn cephes_matches_libm_closely() {
        for i in 1..=1000 {
            let x = i as f32 / 1000.0;
            assert!((cephes_log(x) - x.ln()).abs() <= 1e-6, "log({x})");
            let (s, c) = cephes_sincos(x * TWO_PI);
            assert!((s - (x * TWO_PI).sin()).abs() <= 1e-6, "sin({x})");
            assert!((c - (x * TWO_PI).cos()).abs() <= 1e-6, "cos({x})");
        }
    }

    // The literals are copied verbatim from avx_mathfun.h / reference.py, so clippy's
    // precision and known-constant lints are expected here.
    #[allow(clippy::excessive_precision, clippy::approx_constant)]
    #[test]
    fn constants_are_rounded_literals() {
        // Bit patterns of SPEC §5.1a = avx_mathfun's literals rounded to binary32.
        let pairs: [(f32, f64); 25] = [
            (TWO_PI, 2.0 * PI),
            (SQRTHF, 0.707106781186547524),
            (LOG_Q1, -2.12194440e-4),
            (LOG_Q2, 0.693359375),
            (LOG_P[0], 7.0376836292E-2),
            (LOG_P[1], -1.1514610310E-1),
            (LOG_P[2], 1.1676998740E-1),
            (LOG_P[3], -1.2420140846E-1),
            (LOG_P[4], 1.4249322787E-1),
            (LOG_P[5], -1.6668057665E-1),
            (LOG_P[6], 2.0000714765E-1),
            (LOG_P[7], -2.4999993993E-1),
            (LOG_P[8], 3.3333331174E-1),
            (FOPI, 1.27323954473516),
            (DP1, -0.78515625),
            (DP2, -2.4187564849853515625e-4),
            (DP3, -3.77489497744594108e-8),
            (SIN_S[0], -1.9515295891E-4),
            (SIN_S[1], 8.3321608736E-3),
            (SIN_S[2], -1.6666654611E-1),
            (COS_C[0], 2.443315711809948E-005),
            (COS_C[1], -1.388731625493765E-003),
            (COS_C[2], 4.166664568298827E-002),
            (TWO_PI, std::f64::consts::TAU),
            (SQRTHF, std::f64::consts::FRAC_1_SQRT_2),
        ];
        for (c, lit) in pairs {
            assert_eq!(c.to_bits(), (lit as f32).to_bits(), "{lit}");
        }
    }

    #[test]
    fn kernel_names_round_trip() {
        for k in [Kernel::Avx2, Kernel::Generic] {
            assert_eq!(Kernel::from_name(k.name()), Some(k));
        }
        assert_eq!(Kernel::default(), Kernel::Avx2);
        assert_eq!(layer_norm(2, false), (vec![1.0, 1.0], None));
    }
}
