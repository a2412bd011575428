//! cubenet: train small CNNs and MLPs with Burn, on any backend, with custom CubeCL kernels
//! on the GPU hot path.

pub mod atomic_file;
pub mod backend;
pub mod bench;
pub mod cuda_settings;
pub mod data;
pub mod error_line;
pub mod kernel_cache;
pub mod model;
pub mod nccl;
pub mod plot;
mod quiet_panic;
pub mod run_config;
pub mod run_flags;
pub mod train;
