//! `#[cube]` kernels, one family per file. Only `cubecl::prelude` is in scope here: it
//! clashes with `burn::prelude` on `Tensor`, `Float` and `Int`.
//!
//! Layout conventions shared by every kernel: tensors are contiguous NCHW, one unit
//! computes one output element (or, for weight gradients, one cube reduces one element),
//! and window positions are visited in row-major order so that ties in a max go to the
//! first maximum, as Burn and PyTorch do.

pub mod conv;
pub mod fused;
pub mod geometry;
pub mod pool;
pub mod reduce;
