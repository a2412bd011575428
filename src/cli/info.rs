//! `cubenet info`: what this build can run on, and whether several GPUs can train together.

use cubenet_engine::device::nccl;
use cubenet_engine::device::{BackendError, BackendKind, check_device, device_count};

pub fn run() -> anyhow::Result<()> {
    println!("cubenet {}", env!("CARGO_PKG_VERSION"));
    for kind in [BackendKind::Ndarray, BackendKind::Cuda, BackendKind::Wgpu] {
        let status = match check_device(kind) {
            Ok(()) => match device_count(kind) {
                Some(1) => "compiled in, 1 GPU (--devices 0)".to_string(),
                Some(gpus) => format!(
                    "compiled in, {gpus} GPUs (--devices 0 to {})",
                    gpus.saturating_sub(1)
                ),
                None => "compiled in, device found".to_string(),
            },
            // The row already names the backend.
            Err(BackendError::NoDevice { reason, .. }) => reason.to_string(),
            Err(error) => error.to_string(),
        };
        println!("{:<8} {status}", kind.to_string());
    }
    // NCCL sums gradients across CUDA GPUs; it is looked for whatever the build.
    println!("{:<8} {}", "nccl", nccl::status_line(&nccl::locate()));
    Ok(())
}
