//! The arithmetic the pass is built from, below the named steps: matrix products
//! (`product`, `linear`, with `grad_linear` for a gradient-tracking input and `pool` for
//! their threads), the softmax, soft-capping, and llama.cpp's own kernels (`ggml/`). Nothing
//! here records a step or knows a layer.

pub mod ggml;
pub mod grad_linear;
pub mod linear;
pub mod pool;
pub mod product;
pub mod softcap;
pub mod softmax;
