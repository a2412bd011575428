//! SGD, with optional momentum and weight decay, as one kernel for all of a model's
//! parameters on the CubeCL backends: the optimizer of every SGD run (`optimizer.kind =
//! "sgd"`) and of the benchmarks' training steps.
//!
//! Burn's `Sgd` runs each arithmetic op as its own kernel (g·lr, then p − that; momentum
//! adds three more), per parameter, which dominates a small network's step once the layers
//! are fast. This optimizer computes the same update (Burn's momentum without dampening or
//! Nesterov: the first step's velocity is the gradient, here as μ · 0 + g) for the whole
//! module through `KernelBackend::sgd_update` / `sgd_momentum_update` (which also takes
//! Nesterov's momentum, as PyTorch's `nesterov=True` computes it), whose default bodies
//! are Burn's ops on other backends: it gathers every parameter that has a gradient, updates
//! them as a group and puts the results back.
//!
//! Weight decay λ is folded into each gradient inside the same kernel, g + λ·p, as Burn's
//! `WeightDecay` computes it (the default bodies fold it with Burn's ops first, so that on
//! backends without the kernels the update is Burn's SGD op for op).

use std::collections::HashMap;

use burn::module::{AutodiffModule, Param, ParamId};
use burn::optim::{GradientsParams, LearningRate, MultiGradientsParams, Optimizer};
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::ops::FloatTensorOps;
use burn::tensor::{TensorMetadata, TensorPrimitive};
use cubenet_kernels::{AutodiffKernelBackend, KernelBackend, MomentumStep};

use crate::train::fit::data_parallel::AverageOverReplicas;
use crate::train::optim::fused_update::{Grads, Inner, States, Updated, update_module};

/// Configuration of [`FusedSgd`].
#[derive(Config, Debug)]
pub struct FusedSgdConfig {
    /// Momentum μ (0: plain SGD, no velocity kept).
    #[config(default = 0.0)]
    pub momentum: f64,
    /// Weight decay (L2 penalty) λ, added to each gradient as λ·p (0: none).
    #[config(default = 0.0)]
    pub weight_decay: f64,
    /// Nesterov's momentum: step along `g + μ·v'` instead of `v'` (with momentum only).
    #[config(default = false)]
    pub nesterov: bool,
}

impl FusedSgdConfig {
    /// The optimizer, for a module trained on backend `B`.
    pub fn init<B: AutodiffKernelBackend>(&self) -> FusedSgd<B> {
        FusedSgd {
            momentum: self.momentum,
            weight_decay: self.weight_decay,
            nesterov: self.nesterov,
            velocities: HashMap::new(),
            replicas: None,
        }
    }
}

/// The optimizer: see the module docs.
#[derive(Clone)]
pub struct FusedSgd<B: AutodiffBackend> {
    momentum: f64,
    weight_decay: f64,
    nesterov: bool,
    /// Each parameter's velocity (with momentum), in any shape of the parameter's size.
    velocities: States<B>,
    /// Averages the gradients over a data-parallel run's replicas before each step.
    replicas: Option<AverageOverReplicas<B>>,
}

impl<B, M> Optimizer<M, B> for FusedSgd<B>
where
    B: AutodiffKernelBackend,
    M: AutodiffModule<B>,
{
    /// The velocities, flattened, each under its parameter's id.
    type Record = Vec<Param<Tensor<B, 1>>>;

    fn step(&mut self, lr: LearningRate, module: M, mut grads: GradientsParams) -> M {
        self.update(lr, module, Grads::Single(&mut grads))
    }

    fn step_multi(&mut self, lr: LearningRate, module: M, mut grads: MultiGradientsParams) -> M {
        self.update(lr, module, Grads::Multi(&mut grads))
    }

    fn to_record(&self) -> Self::Record {
        self.velocities
            .iter()
            .filter_map(|(id, state)| Some((id, state.first()?)))
            .map(|(id, velocity)| {
                let elements = velocity.shape().num_elements();
                let flat = Inner::<B>::float_reshape(velocity.clone(), Shape::new([elements]));
                let flat = Tensor::<Inner<B>, 1>::from_primitive(TensorPrimitive::Float(flat));
                Param::initialized(*id, Tensor::from_inner(flat))
            })
            .collect()
    }

    fn load_record(mut self, record: Self::Record) -> Self {
        self.velocities = record
            .into_iter()
            .map(|velocity| {
                (
                    velocity.id,
                    vec![velocity.val().inner().into_primitive().tensor()],
                )
            })
            .collect();
        self
    }
}

impl<B: AutodiffKernelBackend> FusedSgd<B> {
    /// The optimizer of one replica of a data-parallel run: each step first averages the
    /// gradients over the replicas through `average`, so that every replica takes the same
    /// step.
    pub fn averaging_over_replicas(self, average: AverageOverReplicas<B>) -> Self {
        Self {
            replicas: Some(average),
            ..self
        }
    }

    /// One step of every parameter of `module` that has a gradient in `grads`: one group
    /// update per device the gradients are on.
    fn update<M: AutodiffModule<B>>(&mut self, lr: LearningRate, module: M, grads: Grads) -> M {
        let (momentum, weight_decay) = (self.momentum, self.weight_decay);
        let step = MomentumStep {
            lr,
            momentum,
            weight_decay,
            nesterov: self.nesterov,
        };
        let state_len = usize::from(momentum != 0.0);
        let kept = &mut self.velocities;
        update_module(module, grads, kept, state_len, self.replicas, |group| {
            let ids: Vec<ParamId> = group.iter().map(|o| o.id).collect();
            let (mut params, mut grads, mut velocities) = (Vec::new(), Vec::new(), Vec::new());
            for operand in group {
                params.push(operand.param);
                grads.push(operand.grad);
                velocities.extend(operand.state);
            }
            let (updated, velocities): (Vec<_>, Vec<_>) = if momentum != 0.0 {
                let (updated, velocities) =
                    Inner::<B>::sgd_momentum_update(params, grads, velocities, step);
                (updated, velocities.into_iter().map(|v| vec![v]).collect())
            } else {
                let updated = Inner::<B>::sgd_update(params, grads, lr, weight_decay);
                let none = updated.iter().map(|_| Vec::new()).collect();
                (updated, none)
            };
            ids.into_iter()
                .zip(updated.into_iter().zip(velocities))
                .map(|(id, (param, state))| Updated { id, param, state })
                .collect()
        })
    }
}
