//! The kernels against Burn's own ops on NdArray, on every GPU runtime this machine has
//! (wgpu on any Vulkan adapter, Mesa's software one included; CUDA on NVIDIA GPUs).
//!
//! Each op is run on ≥ 200 seeded random shapes (a runtime's convolution and max-pool checks
//! on fewer where `CUBENET_<RUNTIME>_RANDOM_CASES` caps them, as CI does for its software GPU
//! and `scripts/gpu_stages.sh check` for CUDA: see
//! `harness::random_case_cap`); outputs are poisoned before every launch
//! (see `cubenet_kernels::testing::poison_outputs`) and every element is compared. A failure prints
//! the case (with its seed) so it can be rerun alone.

mod cases;
mod conv;
mod default_bodies;
mod dense;
mod fused;
mod gradcheck;
mod harness;
mod loss;
mod pool;
mod read;
mod update;
