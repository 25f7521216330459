//! The switchboard: the command line to [`attn_trace::command::main`], its result to the exit
//! code (0 ok, 1 failure, 2 usage). The Python wheel's `attn-trace` calls the same function.

use std::process::ExitCode;

fn main() -> ExitCode {
    reuse_freed_memory();
    spin_less();
    ExitCode::from(attn_trace::command::main(std::env::args_os().collect()))
}

/// glibc gives each allocation above 32 MiB (and any large one made on another thread, whose
/// arena cannot grow that far) a fresh mapping of its own and unmaps it when freed, so every
/// layer's f32 weights were faulted in and zeroed by the kernel anew: a 1 B model's 4 GiB
/// cost more than a second of system time. Served from one heap instead, a layer reuses the
/// memory the previous one freed. Above [`OWN_MAPPING`] an allocation still gets its own
/// mapping, returned when freed: the [heads, n, n] tensors of a long input (600 MiB each at
/// 4,096 tokens) would otherwise leave holes that raised that run's peak by a fifth. Only
/// for the command: the Python module leaves its host's allocator alone.
fn reuse_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters, before any other thread exists. A
    // failure leaves glibc's defaults, which are correct, only slower.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
        libc::mallopt(libc::M_MMAP_THRESHOLD, OWN_MAPPING);
        libc::mallopt(libc::M_TRIM_THRESHOLD, OWN_MAPPING);
    }
}

/// candle's worker threads spin 25,000 times waiting for the next element-wise operation
/// before they sleep. On a machine with as many cores as threads that spinning takes the core
/// the layer-reading thread needs: with 200, the GPT-2 and 1 B Llama benchmark traces are 8 to
/// 15% faster (BENCHMARKS.md). A value the user sets is kept.
fn spin_less() {
    const CANDLE_SPIN: &str = "CANDLE_BARRIER_POOL_SPIN_LIMIT";
    if std::env::var_os(CANDLE_SPIN).is_none() {
        // Before any other thread exists, so nothing reads the environment concurrently.
        std::env::set_var(CANDLE_SPIN, "200");
    }
}

/// The size from which an allocation gets a mapping of its own (256 MiB: above a 7B model's
/// largest layer weight, 180 MiB).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const OWN_MAPPING: i32 = 256 << 20;
