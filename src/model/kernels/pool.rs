//! The threads a forward pass runs on. gemm, behind every matrix product, splits a product
//! between the threads of the rayon pool it is called from; called from a thread outside any
//! pool it hands all of the work to rayon's global pool and sleeps until it is done, so each
//! product woke two workers and then the caller: three threads taking turns on two cores, for
//! each of a trace's hundreds of products. Called from one of a pool's workers it does a share
//! itself and wakes the others. So a trace runs on a worker of a pool of its own (one thread
//! per core): a 32-token SmolLM2 trace 11–15% faster, the server's request and the command
//! alike, and SmolLM2 at 512 tokens 13% (BENCHMARKS.md, "The forward pass on a pool's
//! worker"). Which thread adds which products is gemm's split either way: the bits are the
//! same.
//!
//! A pool of the forward pass's own, never rayon's global one: a trace may wait on another
//! thread (the next layer's reader; a server's model thread waits on its queue for its whole
//! life), and that thread's rayon work goes to the global pool, never to a worker the trace
//! holds, so no wait can stall it, even on one core.

use rayon::{ThreadPool, ThreadPoolBuilder};
use std::sync::{Arc, Mutex, PoisonError};

/// A pool of one thread per core (candle's count, which gemm splits by), with the main
/// thread's stack (8 MiB, Linux's default) rather than rayon's 2 MiB, since the whole
/// trace runs on it.
fn pool() -> Option<ThreadPool> {
    ThreadPoolBuilder::new()
        .num_threads(candle_core::utils::get_num_threads())
        .stack_size(8 << 20)
        .thread_name(|i| format!("attn-trace {i}"))
        .build()
        .ok()
}

/// `f` (a trace, a comparison: work that ends) on a worker of the pool every such call
/// shares, made at the first; the caller waits. Calls from several threads at once queue for
/// its workers. If the pool cannot be made, `f` runs on the caller, as gemm then splits it.
pub fn on_a_worker<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    run_on(shared().as_deref(), f)
}

/// The shared pool of this process. A process forked from one that made it (Python's
/// multiprocessing forks) inherits the pool but not its threads, and would wait forever for
/// workers that do not exist: it makes a pool of its own, and leaves the parent's alone
/// (dropping it would signal threads that are not there).
fn shared() -> Option<Arc<ThreadPool>> {
    static SHARED: Mutex<Option<(u32, Option<Arc<ThreadPool>>)>> = Mutex::new(None);
    let mut held = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
    let me = std::process::id();
    if let Some((_, made)) = held.as_ref().filter(|(maker, _)| *maker == me) {
        return made.clone();
    }
    std::mem::forget(held.take());
    let made = pool().map(Arc::new);
    *held = Some((me, made.clone()));
    made
}

/// `f` on a worker of a pool of its own, for a thread that lives as long as its work (a
/// server's model thread, waiting on its queue between traces): it holds the worker
/// throughout, so sharing its pool would leave others a worker short.
pub fn on_a_worker_of_its_own<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    run_on(pool().as_ref(), f)
}

/// `f` on a worker of `pool`, or on the caller if there is no pool.
fn run_on<R: Send>(pool: Option<&ThreadPool>, f: impl FnOnce() -> R + Send) -> R {
    match pool {
        Some(pool) => pool.install(f),
        None => f(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The work runs on a pool's worker, and a product made there is the caller's to the bit.
    #[test]
    fn traces_run_on_a_worker_with_the_same_bits() {
        use candle_core::{Device, Tensor};
        let x = Tensor::randn(0f32, 1., (32, 576), &Device::Cpu).unwrap();
        let w = Tensor::randn(0f32, 1., (1536, 576), &Device::Cpu).unwrap();
        let here = x.matmul(&w.t().unwrap()).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let (index, there) = on_a_worker(|| (rayon::current_thread_index(), x.matmul(&w.t().unwrap()).unwrap()));
        assert!(index.is_some(), "not on a worker of a pool");
        let there = there.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert!(here.iter().zip(&there).all(|(a, b)| a.to_bits() == b.to_bits()));
        let own = on_a_worker_of_its_own(rayon::current_thread_index);
        assert!(own.is_some());
    }
}
