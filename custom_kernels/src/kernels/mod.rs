//! `#[cube]` kernels, one family per file. Only `cubecl::prelude` is in scope here: it
//! clashes with `burn::prelude` on `Tensor`, `Float` and `Int`.
//!
//! Layout conventions shared by every kernel: tensors are contiguous (NCHW images,
//! row-major matrices); unless a file says otherwise one unit computes one output element;
//! window positions are visited in row-major order so that ties in a max go to the first
//! maximum, as Burn and PyTorch do.

pub mod conv;
pub mod cube_sum;
pub mod dense;
pub mod fused;
pub mod geometry;
pub mod loss;
pub mod pool;
pub mod reduce;
pub mod update;
