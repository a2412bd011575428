//! The configurations a backend-swap benchmark compares: a backend, whose kernels, and for
//! the CPU how many threads; plus the PyTorch runs merged in from `pytorch_reference.py`.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::backend::BackendKind;
use crate::model::KernelPath;

/// One column of the comparison.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// ndarray on every core (rayon and the matmul's threads), cubenet's CPU kernels.
    Ndarray,
    /// ndarray on every core, Burn's own ops.
    NdarrayBurn,
    /// ndarray on one thread, cubenet's CPU kernels: the sequential CPU that GPU speedups
    /// are quoted against.
    #[value(name = "ndarray-1thread")]
    #[serde(rename = "ndarray-1thread")]
    NdarraySingleThread,
    /// ndarray on one thread, Burn's own ops.
    #[value(name = "ndarray-burn-1thread")]
    #[serde(rename = "ndarray-burn-1thread")]
    NdarrayBurnSingleThread,
    /// CUDA, Burn's own conv, pool and matmul kernels.
    CudaBurn,
    /// CUDA, cubenet's kernels.
    CudaCubenet,
    /// wgpu (Vulkan), Burn's own kernels.
    WgpuBurn,
    /// wgpu (Vulkan), cubenet's kernels.
    WgpuCubenet,
    /// PyTorch eager with cuDNN (from `bench/pytorch_reference.py`).
    PytorchEager,
    /// PyTorch with `torch.compile` (from `bench/pytorch_reference.py`).
    PytorchCompile,
    /// PyTorch eager on the CPU (from `bench/pytorch_reference.py --device cpu`).
    PytorchCpu,
}

impl Variant {
    /// Every variant, in table order.
    pub const ALL: [Variant; 11] = [
        Variant::Ndarray,
        Variant::NdarrayBurn,
        Variant::NdarraySingleThread,
        Variant::NdarrayBurnSingleThread,
        Variant::CudaBurn,
        Variant::CudaCubenet,
        Variant::WgpuBurn,
        Variant::WgpuCubenet,
        Variant::PytorchEager,
        Variant::PytorchCompile,
        Variant::PytorchCpu,
    ];

    /// The Burn backend and kernel path this variant runs; `None` for the PyTorch ones,
    /// which only arrive through a merged report.
    pub fn burn_setup(self) -> Option<(BackendKind, KernelPath)> {
        match self {
            Variant::Ndarray | Variant::NdarraySingleThread => {
                Some((BackendKind::Ndarray, KernelPath::Custom))
            }
            Variant::NdarrayBurn | Variant::NdarrayBurnSingleThread => {
                Some((BackendKind::Ndarray, KernelPath::Burn))
            }
            Variant::CudaBurn => Some((BackendKind::Cuda, KernelPath::Burn)),
            Variant::CudaCubenet => Some((BackendKind::Cuda, KernelPath::Custom)),
            Variant::WgpuBurn => Some((BackendKind::Wgpu, KernelPath::Burn)),
            Variant::WgpuCubenet => Some((BackendKind::Wgpu, KernelPath::Custom)),
            Variant::PytorchEager | Variant::PytorchCompile | Variant::PytorchCpu => None,
        }
    }

    /// Whether the variant runs on the CPU (and so gets the capped protocol).
    pub fn is_cpu(self) -> bool {
        matches!(
            self,
            Variant::Ndarray
                | Variant::NdarrayBurn
                | Variant::PytorchCpu
                | Variant::NdarraySingleThread
                | Variant::NdarrayBurnSingleThread
        )
    }

    /// Whether the variant runs on one thread (in a process started with one thread per
    /// pool).
    pub fn is_single_thread(self) -> bool {
        matches!(
            self,
            Variant::NdarraySingleThread | Variant::NdarrayBurnSingleThread
        )
    }

    /// The variants of this build's backends: what `backend_swap` runs by default.
    pub fn compiled() -> Vec<Variant> {
        Variant::ALL
            .into_iter()
            .filter(|v| v.burn_setup().is_some_and(|(kind, _)| kind.is_compiled()))
            .collect()
    }

    /// The variant running Burn's kernels on the same runtime as this cubenet one.
    pub fn burn_twin(self) -> Option<Variant> {
        match self {
            Variant::Ndarray => Some(Variant::NdarrayBurn),
            Variant::NdarraySingleThread => Some(Variant::NdarrayBurnSingleThread),
            Variant::CudaCubenet => Some(Variant::CudaBurn),
            Variant::WgpuCubenet => Some(Variant::WgpuBurn),
            _ => None,
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The command-line name, which the serde attributes spell the same way.
        let value = clap::ValueEnum::to_possible_value(self).expect("no variant is skipped");
        f.write_str(value.get_name())
    }
}
