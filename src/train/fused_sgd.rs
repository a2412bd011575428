//! SGD, with optional momentum, as one kernel per parameter on the CubeCL backends.
//!
//! Burn's `Sgd` runs each arithmetic op as its own kernel (g·lr, then p − that; momentum
//! adds three more), which dominates a small network's step once the layers are fast. This
//! optimizer computes the same update (Burn's momentum without dampening or Nesterov: the
//! first step's velocity is the gradient) through `cubenet_kernels::sgd_update`, whose
//! default body is Burn's ops on other backends.

use burn::module::AutodiffModule;
use burn::optim::SimpleOptimizer;
use burn::optim::adaptor::OptimizerAdaptor;
use burn::prelude::*;
use burn::record::Record;
use cubenet_kernels::{AutodiffKernelBackend, KernelBackend, sgd_momentum_update, sgd_update};

/// Configuration of [`FusedSgd`].
#[derive(Config, Debug)]
pub struct FusedSgdConfig {
    /// Momentum μ (0: plain SGD, no velocity kept).
    #[config(default = 0.0)]
    pub momentum: f64,
}

impl FusedSgdConfig {
    /// The optimizer for module `M` trained on backend `B`.
    pub fn init<B: AutodiffKernelBackend, M: AutodiffModule<B>>(
        &self,
    ) -> OptimizerAdaptor<FusedSgd, M, B> {
        FusedSgd {
            momentum: self.momentum,
        }
        .into()
    }
}

/// The optimizer: see the module docs.
#[derive(Debug, Clone)]
pub struct FusedSgd {
    momentum: f64,
}

/// A parameter's velocity, kept only with momentum.
#[derive(Record, Clone)]
pub struct FusedSgdState<B: Backend, const D: usize> {
    pub velocity: Tensor<B, D>,
}

impl<B: KernelBackend> SimpleOptimizer<B> for FusedSgd {
    type State<const D: usize> = FusedSgdState<B, D>;

    fn step<const D: usize>(
        &self,
        lr: f64,
        tensor: Tensor<B, D>,
        grad: Tensor<B, D>,
        state: Option<Self::State<D>>,
    ) -> (Tensor<B, D>, Option<Self::State<D>>) {
        if self.momentum == 0.0 {
            return (sgd_update(tensor, grad, lr), None);
        }
        match state {
            None => (
                sgd_update(tensor, grad.clone(), lr),
                Some(FusedSgdState { velocity: grad }),
            ),
            Some(FusedSgdState { velocity }) => {
                let (tensor, velocity) =
                    sgd_momentum_update(tensor, grad, velocity, lr, self.momentum);
                (tensor, Some(FusedSgdState { velocity }))
            }
        }
    }

    fn to_device<const D: usize>(state: Self::State<D>, device: &B::Device) -> Self::State<D> {
        FusedSgdState {
            velocity: state.velocity.to_device(device),
        }
    }
}
