//! TEMPORARY STUB written by the lead so the crate compiles; helper-1 replaces this file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    Avx2,
    Generic,
}
pub struct TorchGenerator {
    k: Kernel,
    s: u64,
}
impl TorchGenerator {
    pub fn new(seed: u64, kernel: Kernel) -> Self {
        TorchGenerator { k: kernel, s: seed }
    }
    pub fn manual_seed(&mut self, seed: u64) {
        self.s = seed
    }
    pub fn kernel(&self) -> Kernel {
        self.k
    }
    pub fn rand(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|i| ((i as u64 + self.s) % 7) as f32 / 7.0).collect()
    }
    pub fn linear(&mut self, i: usize, o: usize, bias: bool) -> (Vec<f32>, Option<Vec<f32>>) {
        (self.rand(i * o), bias.then(|| self.rand(o)))
    }
    pub fn embedding(&mut self, n: usize, d: usize, _p: Option<i64>) -> Vec<f32> {
        self.rand(n * d)
    }
}
pub fn seed_from_i128(seed: i128) -> Option<u64> {
    if seed < -(1i128 << 63) || seed > u64::MAX as i128 {
        None
    } else {
        Some(seed as u64)
    }
}
