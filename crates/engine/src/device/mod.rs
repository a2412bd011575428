//! Where a run computes: the backends compiled into this build, choosing one at run time,
//! CubeCL's settings for CUDA runs, the compiled-kernel cache and NCCL for several GPUs.

mod backend;
pub mod cuda_settings;
pub mod kernel_cache;
pub mod memory;
pub mod nccl;

pub use backend::{
    BackendError, BackendKind, BackendTask, DeviceFailure, OtherBackends, check_device,
    device_count, devices_at, run_on,
};
