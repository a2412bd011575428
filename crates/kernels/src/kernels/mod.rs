//! `#[cube]` kernels, one family per file. Only `cubecl::prelude` is in scope here: it
//! clashes with `burn::prelude` on `Tensor`, `Float` and `Int`.
//!
//! Layout conventions shared by every kernel: NCHW images and row-major matrices. The conv
//! kernels (forward, fused forward, weight gradient) read their input image `x` through its
//! strides, so its rows need only unit stride (CUDA's pitched rows and slices of a batch are
//! read in place); every other tensor is contiguous. Operands are `Array`s, and the sizes
//! and strides a kernel needs are scalar arguments ([`geometry::Nchw`], or plain sizes):
//! `cube::launch` says why. Unless a file says otherwise one unit
//! computes one output element; window positions are visited in row-major order so that ties in a max go to the first
//! maximum, as Burn and PyTorch do.

pub mod conv;
pub mod cube_sum;
pub mod dense;
pub mod fused;
pub mod geometry;
pub mod loss;
pub mod optional;
pub mod pack;
pub mod pool;
pub mod update;
