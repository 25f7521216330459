//! Formats every f32 bit pattern with the patched zmij and with the crates.io release and
//! stops at the first pair of strings that differ. Threads take batches of bit patterns.

use std::sync::atomic::{AtomicU64, Ordering};

fn main() {
    const BATCH: u64 = 1 << 22;
    let next = AtomicU64::new(0);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let checked: u64 = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let (mut a, mut b) = (upstream::Buffer::new(), patched::Buffer::new());
                    let mut n = 0u64;
                    loop {
                        let start = next.fetch_add(BATCH, Ordering::Relaxed);
                        if start > u64::from(u32::MAX) {
                            return n;
                        }
                        for bits in start..(start + BATCH).min(1 << 32) {
                            let f = f32::from_bits(bits as u32);
                            if !f.is_finite() {
                                continue;
                            }
                            let (x, y) = (a.format_finite(f), b.format_finite(f));
                            assert_eq!(x, y, "bits {bits:#010x}");
                            n += 1;
                        }
                    }
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().expect("a checking thread failed")).sum()
    });
    println!("identical on all {checked} finite f32 values");
}
