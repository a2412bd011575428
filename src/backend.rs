//! Which backends this build holds, how to pick one at run time, and the errors a user
//! gets when the one asked for is missing.
//!
//! Model and training code is generic over the backend; a [`BackendTask`] is that generic
//! code packaged so that [`run_on`] can call it with the concrete type chosen by a
//! command-line flag. GPUs run on CubeCL's backend *without* Burn's fusion layer: that is
//! the backend cubenet's kernels extend (see `cubenet-kernels`), and with `--kernels burn`
//! the same backend runs Burn's own conv, pool and matmul kernels instead.

use std::fmt;

use burn::backend::Autodiff;
#[cfg(any(feature = "cuda", feature = "wgpu"))]
use burn::prelude::*;
use cubenet_kernels::AutodiffKernelBackend;
use serde::{Deserialize, Serialize};

/// A Burn backend cubenet can train on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// CPU, through ndarray (always compiled in).
    Ndarray,
    /// NVIDIA GPUs through CubeCL's CUDA runtime (`--features cuda`).
    Cuda,
    /// GPUs through CubeCL's wgpu runtime on Vulkan (`--features wgpu`).
    Wgpu,
}

impl BackendKind {
    /// CUDA when it is compiled in, otherwise the CPU.
    pub fn default_for_build() -> Self {
        if cfg!(feature = "cuda") {
            BackendKind::Cuda
        } else {
            BackendKind::Ndarray
        }
    }

    /// Whether this build can run the backend at all.
    pub fn is_compiled(self) -> bool {
        match self {
            BackendKind::Ndarray => true,
            BackendKind::Cuda => cfg!(feature = "cuda"),
            BackendKind::Wgpu => cfg!(feature = "wgpu"),
        }
    }

    /// Every backend compiled into this build.
    pub fn compiled() -> Vec<Self> {
        [BackendKind::Ndarray, BackendKind::Cuda, BackendKind::Wgpu]
            .into_iter()
            .filter(|kind| kind.is_compiled())
            .collect()
    }

    fn feature(self) -> &'static str {
        match self {
            BackendKind::Ndarray => "ndarray",
            BackendKind::Cuda => "cuda",
            BackendKind::Wgpu => "wgpu",
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.feature())
    }
}

/// The backend asked for cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("backend `{0}` is not compiled into this build; rebuild with `--features {0}`")]
    NotCompiled(BackendKind),
    #[error("`{0}` is measured by bench/pytorch_reference.py, not by cubenet")]
    NotRunnable(String),
    #[error("backend `{backend}` found no usable device: {reason}")]
    NoDevice {
        backend: BackendKind,
        reason: String,
    },
}

/// Generic work to run on whichever backend the user picked.
pub trait BackendTask {
    type Output;

    /// Runs the work on backend `B` (with autodiff), on `device`.
    fn run<B: AutodiffKernelBackend>(self, device: B::Device, kind: BackendKind) -> Self::Output;
}

/// Runs `task` on the backend `kind`, after checking that it has a working device.
pub fn run_on<T: BackendTask>(kind: BackendKind, task: T) -> Result<T::Output, BackendError> {
    match kind {
        BackendKind::Ndarray => {
            use burn::backend::NdArray;
            Ok(task.run::<Autodiff<NdArray>>(Default::default(), kind))
        }
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => {
            use cubenet_kernels::CubeCuda;
            let device = burn::backend::cuda::CudaDevice::default();
            probe::<CubeCuda>(kind, &device)?;
            Ok(task.run::<Autodiff<CubeCuda>>(device, kind))
        }
        #[cfg(feature = "wgpu")]
        BackendKind::Wgpu => {
            use cubenet_kernels::CubeWgpu;
            let device = burn::backend::wgpu::WgpuDevice::default();
            probe::<CubeWgpu>(kind, &device)?;
            Ok(task.run::<Autodiff<CubeWgpu>>(device, kind))
        }
        #[allow(unreachable_patterns)]
        missing => Err(BackendError::NotCompiled(missing)),
    }
}

/// Whether `kind` is compiled in and finds a working (default) device.
pub fn check_device(kind: BackendKind) -> Result<(), BackendError> {
    match kind {
        BackendKind::Ndarray => Ok(()),
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => probe::<cubenet_kernels::CubeCuda>(kind, &Default::default()),
        #[cfg(feature = "wgpu")]
        BackendKind::Wgpu => probe::<cubenet_kernels::CubeWgpu>(kind, &Default::default()),
        #[allow(unreachable_patterns)]
        missing => Err(BackendError::NotCompiled(missing)),
    }
}

/// Runs one tiny computation on `device`. GPU runtimes panic when no driver or adapter is
/// present; this turns that into an error before any real work starts.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn probe<B: Backend>(kind: BackendKind, device: &B::Device) -> Result<(), BackendError> {
    let sum = crate::quiet_panic::catch_quietly(|| {
        Tensor::<B, 1>::from_floats([1.0, 2.0], device)
            .sum()
            .into_scalar()
            .elem::<f32>()
    })
    .map_err(|reason| BackendError::NoDevice {
        backend: kind,
        reason,
    })?;
    if sum != 3.0 {
        return Err(BackendError::NoDevice {
            backend: kind,
            reason: format!("a test sum gave {sum} instead of 3"),
        });
    }
    Ok(())
}
