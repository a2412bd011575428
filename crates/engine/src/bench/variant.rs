//! The configurations a backend benchmark compares: a backend, whose kernels, and for
//! the CPU how many threads; plus the PyTorch runs merged in from `pytorch_reference.py`.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::device::BackendKind;
use crate::model::{Kernels, Precision};

/// A Burn variant's backend, kernel path and convolution precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BurnSetup {
    pub backend: BackendKind,
    pub kernels: Kernels,
    pub precision: Precision,
}

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
    /// CUDA, cubenet's kernels with the multi-channel convolutions in TF32 on the tensor
    /// cores (opt-in; not run by default).
    CudaCubenetTf32,
    /// The same with the products' operands rounded to bf16 (opt-in; not run by default).
    CudaCubenetBf16,
    /// wgpu (Vulkan), Burn's own kernels.
    WgpuBurn,
    /// wgpu (Vulkan), cubenet's kernels.
    WgpuCubenet,
    /// PyTorch eager with cuDNN (from `pytorch/pytorch_reference.py`).
    PytorchEager,
    /// PyTorch with `torch.compile` (from `pytorch/pytorch_reference.py`).
    PytorchCompile,
    /// PyTorch eager with TF32 allowed in cuDNN and cuBLAS.
    PytorchEagerTf32,
    /// `torch.compile` with TF32 allowed.
    PytorchCompileTf32,
    /// PyTorch eager with bf16 autocast and channels_last: PyTorch's fastest setting for
    /// convolutions.
    PytorchEagerBf16,
    /// `torch.compile` with bf16 autocast and channels_last.
    PytorchCompileBf16,
    /// PyTorch eager on the CPU (from `pytorch/pytorch_reference.py --device cpu`).
    PytorchCpu,
}

impl Variant {
    /// Every variant, in table order.
    pub const ALL: [Variant; 17] = [
        Variant::Ndarray,
        Variant::NdarrayBurn,
        Variant::NdarraySingleThread,
        Variant::NdarrayBurnSingleThread,
        Variant::CudaBurn,
        Variant::CudaCubenet,
        Variant::CudaCubenetTf32,
        Variant::CudaCubenetBf16,
        Variant::WgpuBurn,
        Variant::WgpuCubenet,
        Variant::PytorchEager,
        Variant::PytorchCompile,
        Variant::PytorchEagerTf32,
        Variant::PytorchCompileTf32,
        Variant::PytorchEagerBf16,
        Variant::PytorchCompileBf16,
        Variant::PytorchCpu,
    ];

    /// What this variant runs on Burn; `None` for the PyTorch ones, which only arrive
    /// through a merged report.
    pub fn burn_setup(self) -> Option<BurnSetup> {
        let (backend, kernels) = match self {
            Variant::Ndarray | Variant::NdarraySingleThread => {
                (BackendKind::Ndarray, Kernels::Custom)
            }
            Variant::NdarrayBurn | Variant::NdarrayBurnSingleThread => {
                (BackendKind::Ndarray, Kernels::Burn)
            }
            Variant::CudaBurn => (BackendKind::Cuda, Kernels::Burn),
            Variant::CudaCubenet | Variant::CudaCubenetTf32 | Variant::CudaCubenetBf16 => {
                (BackendKind::Cuda, Kernels::Custom)
            }
            Variant::WgpuBurn => (BackendKind::Wgpu, Kernels::Burn),
            Variant::WgpuCubenet => (BackendKind::Wgpu, Kernels::Custom),
            Variant::PytorchEager
            | Variant::PytorchCompile
            | Variant::PytorchEagerTf32
            | Variant::PytorchCompileTf32
            | Variant::PytorchEagerBf16
            | Variant::PytorchCompileBf16
            | Variant::PytorchCpu => return None,
        };
        let precision = match self {
            Variant::CudaCubenetTf32 => Precision::Tf32,
            Variant::CudaCubenetBf16 => Precision::Bf16,
            _ => Precision::Fp32,
        };
        Some(BurnSetup {
            backend,
            kernels,
            precision,
        })
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

    /// The fp32 variants of this build's backends: what `cubenet bench` runs by default.
    pub fn compiled() -> Vec<Variant> {
        Variant::ALL
            .into_iter()
            .filter(|v| {
                v.burn_setup()
                    .is_some_and(|s| s.backend.is_compiled() && s.precision == Precision::Fp32)
            })
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
