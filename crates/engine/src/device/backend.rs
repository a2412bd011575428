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
use cubenet_kernels::{AutodiffKernelBackend, Precision};
use serde::{Deserialize, Serialize};

/// A Burn backend cubenet can train on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// CPU, through ndarray (the default `ndarray` feature; every build but the
    /// data-parallel one in `ddp/`).
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

    /// How its convolutions multiply unless a run says otherwise: TF32 on CUDA, as PyTorch's
    /// convolutions do by default on GPUs with tensor cores (a GPU without TF32 matrix units
    /// multiplies in fp32), and exact fp32 on the CPU and wgpu.
    pub fn default_precision(self) -> Precision {
        match self {
            BackendKind::Cuda => Precision::Tf32,
            BackendKind::Ndarray | BackendKind::Wgpu => Precision::Fp32,
        }
    }

    /// Whether this build can run the backend at all.
    pub fn is_compiled(self) -> bool {
        match self {
            BackendKind::Ndarray => cfg!(feature = "ndarray"),
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
    #[error("`{0}` is measured by pytorch/pytorch_reference.py, not by cubenet")]
    NotRunnable(String),
    #[error("backend `{backend}` found no usable device: {reason}")]
    NoDevice {
        backend: BackendKind,
        reason: DeviceFailure,
    },
}

/// Why a compiled-in GPU backend has no usable device.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DeviceFailure {
    /// cudarc found no `libcuda`: the machine has no NVIDIA driver (or no NVIDIA GPU).
    #[error("no NVIDIA driver found (libcuda could not be loaded); this build also runs {others}")]
    NoNvidiaDriver { others: OtherBackends },
    /// cudarc found the driver but not another CUDA library it loads at run time.
    #[error("lib{library} could not be loaded; put the directory holding it on LD_LIBRARY_PATH")]
    MissingLibrary { library: String },
    /// The runtime panicked for another reason: the first line of its message.
    #[error("{0}")]
    Panicked(String),
    /// The device ran but computed a wrong result.
    #[error("a test sum gave {0} instead of 3")]
    WrongSum(f32),
    /// A device index past the 16 bits Burn numbers devices with.
    #[error("device index {0} is out of range")]
    NoSuchIndex(usize),
}

impl DeviceFailure {
    /// Classifies the panic message of a failed probe on `kind`. cudarc panics with a list
    /// of the ~40 library file names it tried when it cannot load one of its libraries; that
    /// becomes one sentence naming the library. Anything else is kept, cut to its first line.
    pub fn from_panic(kind: BackendKind, message: &str) -> Self {
        match unloadable_library(message) {
            Some("cuda") => DeviceFailure::NoNvidiaDriver {
                others: OtherBackends(kind),
            },
            Some(library) => DeviceFailure::MissingLibrary {
                library: library.to_string(),
            },
            None => DeviceFailure::Panicked(crate::quiet_panic::first_line(message)),
        }
    }
}

/// The backends compiled into this build other than the one that failed, as the flag a
/// user types: `--backend ndarray|wgpu`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OtherBackends(BackendKind);

impl fmt::Display for OtherBackends {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let others: Vec<String> = BackendKind::compiled()
            .into_iter()
            .filter(|&kind| kind != self.0)
            .map(|kind| kind.to_string())
            .collect();
        write!(f, "--backend {}", others.join("|"))
    }
}

/// The library name in cudarc's "Unable to dynamically load the \"cuda\" shared library -
/// searched for library names: [...]" panic, found anywhere in `message`.
fn unloadable_library(message: &str) -> Option<&str> {
    const CUDARC_LOAD_FAILURE: &str = "Unable to dynamically load the \"";
    let start = message.find(CUDARC_LOAD_FAILURE)? + CUDARC_LOAD_FAILURE.len();
    let (library, _) = message[start..].split_once('"')?;
    Some(library)
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
        #[cfg(feature = "ndarray")]
        BackendKind::Ndarray => {
            use burn::backend::NdArray;
            Ok(task.run::<Autodiff<NdArray>>(Default::default(), kind))
        }
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => {
            use cubenet_kernels::CubeCuda;
            crate::device::cuda_settings::apply();
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

/// The devices at `indices` of the backend whose default device is `default`, each
/// checked with a tiny computation on a GPU: CUDA's GPU `i`; on ndarray the CPU for every
/// index (several handles of one device, which is how the data-parallel path is tested
/// without GPUs); on wgpu the default adapter for every index (adapters are not told apart).
pub fn devices_at<B: burn::tensor::backend::Backend>(
    kind: BackendKind,
    default: &B::Device,
    indices: &[usize],
) -> Result<Vec<B::Device>, BackendError> {
    use burn::prelude::DeviceOps;
    use burn::tensor::backend::DeviceId;

    let type_id = default.to_id().type_id;
    indices
        .iter()
        .map(|&index| {
            let index = u16::try_from(index).map_err(|_| BackendError::NoDevice {
                backend: kind,
                reason: DeviceFailure::NoSuchIndex(index),
            })?;
            let device = B::Device::from_id(DeviceId::new(type_id, index));
            #[cfg(any(feature = "cuda", feature = "wgpu"))]
            if kind != BackendKind::Ndarray && device != *default {
                probe::<B>(kind, &device)?;
            }
            Ok(device)
        })
        .collect()
}

/// Whether `kind` is compiled in and finds a working (default) device.
pub fn check_device(kind: BackendKind) -> Result<(), BackendError> {
    match kind {
        #[cfg(feature = "ndarray")]
        BackendKind::Ndarray => Ok(()),
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => {
            crate::device::cuda_settings::apply();
            probe::<cubenet_kernels::CubeCuda>(kind, &Default::default())
        }
        #[cfg(feature = "wgpu")]
        BackendKind::Wgpu => probe::<cubenet_kernels::CubeWgpu>(kind, &Default::default()),
        #[allow(unreachable_patterns)]
        missing => Err(BackendError::NotCompiled(missing)),
    }
}

/// How many GPUs of `kind` this machine has, for a backend that tells its devices apart
/// (CUDA); `None` for the CPU and wgpu, whose indices all name one device (see
/// [`devices_at`]). Call it once [`check_device`] found the backend working.
pub fn device_count(kind: BackendKind) -> Option<usize> {
    match kind {
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => Some(devices_of::<cubenet_kernels::CubeCuda>(&Default::default())),
        _ => None,
    }
}

/// The devices of the type of `default` that `B` enumerates.
#[cfg(feature = "cuda")]
fn devices_of<B: Backend>(default: &B::Device) -> usize {
    B::device_count(default.to_id().type_id)
}

/// Runs one tiny computation on `device`. GPU runtimes panic when no driver or adapter is
/// present; this turns that into an error before any real work starts. What the runtime's
/// C libraries print meanwhile is dropped (see [`without_stderr`]).
#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn probe<B: Backend>(kind: BackendKind, device: &B::Device) -> Result<(), BackendError> {
    let no_device = |reason| BackendError::NoDevice {
        backend: kind,
        reason,
    };
    let sum = without_stderr(|| {
        crate::quiet_panic::catch_quietly(|| {
            Tensor::<B, 1>::from_floats([1.0, 2.0], device)
                .sum()
                .into_scalar()
                .elem::<f32>()
        })
    })
    .map_err(|message| no_device(DeviceFailure::from_panic(kind, &message)))?;
    if sum != 3.0 {
        return Err(no_device(DeviceFailure::WrongSum(sum)));
    }
    Ok(())
}

/// Runs `f` with the process's standard error (fd 2) sent to `/dev/null`.
///
/// While wgpu opens its first device, the Vulkan loader, Mesa and libwayland write to fd 2
/// from C, e.g. "error: XDG_RUNTIME_DIR is invalid or not set in the environment." or
/// "MESA: error: ZINK: …", for paths the probe does not use; a probe that fails says why
/// through its panic message instead. Setting `XDG_RUNTIME_DIR` would silence only the
/// first kind, and changing the environment of a running (multi-threaded) process is
/// unsound; pointing fd 2 elsewhere silences every line from every thread. The lock keeps
/// two probes from saving each other's redirection; a guard restores fd 2 even on a panic.
/// Where fd 2 cannot be redirected, `f` runs as it is.
#[cfg(all(unix, any(feature = "cuda", feature = "wgpu")))]
fn without_stderr<R>(f: impl FnOnce() -> R) -> R {
    use std::os::fd::{AsFd, AsRawFd, OwnedFd};
    use std::sync::{Mutex, PoisonError};

    use libc::dup2;

    /// Points fd 2 back at the saved original when dropped.
    struct Restore(OwnedFd);
    impl Drop for Restore {
        fn drop(&mut self) {
            // SAFETY: both descriptors are open; dup2 only replaces fd 2's target.
            unsafe { dup2(self.0.as_raw_fd(), 2) };
        }
    }
    static REDIRECTING: Mutex<()> = Mutex::new(());

    let _one_at_a_time = REDIRECTING.lock().unwrap_or_else(PoisonError::into_inner);
    let stderr = std::io::stderr();
    let (Ok(saved), Ok(null)) = (
        stderr.as_fd().try_clone_to_owned(),
        std::fs::OpenOptions::new().write(true).open("/dev/null"),
    ) else {
        return f();
    };
    // SAFETY: both descriptors are open; on failure fd 2 is left as it was.
    if unsafe { dup2(null.as_raw_fd(), 2) } < 0 {
        return f();
    }
    let _restore = Restore(saved);
    f()
}

#[cfg(all(not(unix), any(feature = "cuda", feature = "wgpu")))]
fn without_stderr<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// cudarc's panic on a machine without an NVIDIA driver (captured, CUDA 13 names).
    const NO_LIBCUDA: &str = "Unable to dynamically load the \"cuda\" shared library - searched \
        for library names: [\"libcuda.so\", \"libcuda64.so\", \"libcuda64_13.so\", \
        \"libcuda64_130.so\", \"libcuda64_130_0.so\", \"libcuda64_130_0.so\", \
        \"libcuda64_10.so\", \"libcuda64_11.so\", \"libcuda64_12.so\", \"libcuda64_130_0.so\", \
        \"libcuda64_9.so\", \"libcuda.so.13\", \"libcuda.so.12\", \"libcuda.so.11\", \
        \"libcuda.so.10\", \"libcuda.so.9\", \"libcuda.so.1\", \"libnvcuda.so\", \
        \"libnvcuda64.so\", \"libnvcuda64_13.so\", \"libnvcuda64_130.so\", \
        \"libnvcuda64_130_0.so\", \"libnvcuda64_130_0.so\", \"libnvcuda64_10.so\", \
        \"libnvcuda64_11.so\", \"libnvcuda64_12.so\", \"libnvcuda64_130_0.so\", \
        \"libnvcuda64_9.so\", \"libnvcuda.so.13\", \"libnvcuda.so.12\", \"libnvcuda.so.11\", \
        \"libnvcuda.so.10\", \"libnvcuda.so.9\", \"libnvcuda.so.1\"]. Ensure that \
        `LD_LIBRARY_PATH` has the correct path to the installed library. If the shared library \
        is present on the system under a different name than one of those listed above, please \
        open a GitHub issue.";

    #[test]
    fn a_missing_driver_is_one_sentence_naming_the_other_backends() {
        let failure = DeviceFailure::from_panic(BackendKind::Cuda, NO_LIBCUDA);
        let others: Vec<String> = BackendKind::compiled()
            .into_iter()
            .filter(|&kind| kind != BackendKind::Cuda)
            .map(|kind| kind.to_string())
            .collect();
        assert_eq!(
            failure.to_string(),
            format!(
                "no NVIDIA driver found (libcuda could not be loaded); this build also runs \
                 --backend {}",
                others.join("|")
            )
        );
    }

    #[test]
    fn other_probe_failures_keep_their_cause_on_one_line() {
        let no_nvrtc = NO_LIBCUDA.replace("\"cuda\"", "\"nvrtc\"");
        assert_eq!(
            DeviceFailure::from_panic(BackendKind::Cuda, &no_nvrtc).to_string(),
            "libnvrtc could not be loaded; put the directory holding it on LD_LIBRARY_PATH"
        );
        let no_adapter = "No possible adapter available for backend. Falling back to first \
            available.\n\nCaused by:\n    more detail";
        assert_eq!(
            DeviceFailure::from_panic(BackendKind::Wgpu, no_adapter).to_string(),
            "No possible adapter available for backend. Falling back to first available."
        );
        let long = "x".repeat(500);
        assert_eq!(
            DeviceFailure::from_panic(BackendKind::Wgpu, &long).to_string(),
            format!("{}…", "x".repeat(200))
        );
    }
}
