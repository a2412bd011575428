//! `cubenet info`: what this build can run on.

use cubenet::backend::{BackendError, BackendKind, check_device};

pub fn run() -> anyhow::Result<()> {
    println!("cubenet {}", env!("CARGO_PKG_VERSION"));
    for kind in [BackendKind::Ndarray, BackendKind::Cuda, BackendKind::Wgpu] {
        let status = match check_device(kind) {
            Ok(()) => "compiled in, device found".to_string(),
            // The row already names the backend.
            Err(BackendError::NoDevice { reason, .. }) => reason.to_string(),
            Err(error) => error.to_string(),
        };
        println!("{:<8} {status}", kind.to_string());
    }
    Ok(())
}
