//! SGD, with optional momentum and weight decay, as one kernel for all of a model's
//! parameters on the CubeCL backends: the optimizer of every SGD run (`optimizer.kind =
//! "sgd"`) and of the benchmarks' training steps.
//!
//! Burn's `Sgd` runs each arithmetic op as its own kernel (g·lr, then p − that; momentum
//! adds three more), per parameter, which dominates a small network's step once the layers
//! are fast. This optimizer computes the same update (Burn's momentum without dampening or
//! Nesterov: the first step's velocity is the gradient, here as μ · 0 + g) for the whole
//! module through `KernelBackend::sgd_update` / `sgd_momentum_update`, whose default bodies
//! are Burn's ops on other backends: it gathers every parameter that has a gradient, updates
//! them as a group and puts the results back.
//!
//! Weight decay λ is folded into each gradient inside the same kernel, g + λ·p, as Burn's
//! `WeightDecay` computes it (the default bodies fold it with Burn's ops first, so that on
//! backends without the kernels the update is Burn's SGD op for op).

use std::collections::HashMap;

use burn::module::{AutodiffModule, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::optim::{GradientsParams, LearningRate, MultiGradientsParams, Optimizer};
use burn::prelude::*;
use burn::tensor::backend::{AutodiffBackend, DeviceId};
use burn::tensor::ops::{FloatTensor, FloatTensorOps};
use burn::tensor::{TensorMetadata, TensorPrimitive};
use cubenet_kernels::{AutodiffKernelBackend, KernelBackend};

/// Configuration of [`FusedSgd`].
#[derive(Config, Debug)]
pub struct FusedSgdConfig {
    /// Momentum μ (0: plain SGD, no velocity kept).
    #[config(default = 0.0)]
    pub momentum: f64,
    /// Weight decay (L2 penalty) λ, added to each gradient as λ·p (0: none).
    #[config(default = 0.0)]
    pub weight_decay: f64,
}

impl FusedSgdConfig {
    /// The optimizer, for a module trained on backend `B`.
    pub fn init<B: AutodiffKernelBackend>(&self) -> FusedSgd<B> {
        FusedSgd {
            momentum: self.momentum,
            weight_decay: self.weight_decay,
            velocities: HashMap::new(),
        }
    }
}

/// The optimizer: see the module docs.
#[derive(Clone)]
pub struct FusedSgd<B: AutodiffBackend> {
    momentum: f64,
    weight_decay: f64,
    /// Each parameter's velocity (with momentum), in any shape of the parameter's size.
    velocities: HashMap<ParamId, FloatTensor<B::InnerBackend>>,
}

type Inner<B> = <B as AutodiffBackend>::InnerBackend;

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
                    velocity.val().inner().into_primitive().tensor(),
                )
            })
            .collect();
        self
    }
}

impl<B: AutodiffKernelBackend> FusedSgd<B> {
    /// One step of every parameter of `module` that has a gradient in `grads`: one group
    /// update per device the gradients are on.
    fn update<M: AutodiffModule<B>>(&mut self, lr: LearningRate, module: M, grads: Grads) -> M {
        let mut group = Group::<B> {
            grads,
            velocities: (self.momentum != 0.0).then_some(&mut self.velocities),
            entries: Vec::new(),
        };
        module.visit(&mut group);
        let mut entries = group.entries;
        let mut updated = HashMap::new();
        while let Some(first) = entries.first() {
            let device = first.device;
            let (here, elsewhere): (Vec<_>, Vec<_>) =
                entries.into_iter().partition(|e| e.device == device);
            updated.extend(self.update_group(lr, here));
            entries = elsewhere;
        }
        module.map(&mut PutBack::<B> { updated })
    }

    /// The new values of `entries`' parameters (all on one device), keeping their velocities.
    fn update_group(
        &mut self,
        lr: LearningRate,
        entries: Vec<Entry<B>>,
    ) -> Vec<(ParamId, FloatTensor<B::InnerBackend>)> {
        let mut ids = Vec::with_capacity(entries.len());
        let (mut params, mut grads, mut velocities) = (Vec::new(), Vec::new(), Vec::new());
        for entry in entries {
            ids.push(entry.id);
            params.push(entry.param);
            grads.push(entry.grad);
            velocities.extend(entry.velocity);
        }
        let updated = if self.momentum != 0.0 {
            let (updated, velocities) = Inner::<B>::sgd_momentum_update(
                params,
                grads,
                velocities,
                lr,
                self.momentum,
                self.weight_decay,
            );
            self.velocities.extend(ids.iter().copied().zip(velocities));
            updated
        } else {
            Inner::<B>::sgd_update(params, grads, lr, self.weight_decay)
        };
        ids.into_iter().zip(updated).collect()
    }
}

/// The gradients of a step: from one device, or from several (Burn's multi-device step).
enum Grads<'a> {
    Single(&'a mut GradientsParams),
    Multi(&'a mut MultiGradientsParams),
}

impl Grads<'_> {
    /// Parameter `id`'s gradient and the device it is on (the parameter's update runs there).
    fn remove<B: Backend, const D: usize>(
        &mut self,
        id: ParamId,
    ) -> Option<(Tensor<B, D>, B::Device)> {
        match self {
            Grads::Single(grads) => grads.remove::<B, D>(id).map(|grad| {
                let device = grad.device();
                (grad, device)
            }),
            Grads::Multi(grads) => grads.remove::<B, D>(id),
        }
    }
}

/// Gathers the parameters that have a gradient, with their gradients and (with momentum)
/// velocities, zeros for a parameter's first step.
struct Group<'a, B: AutodiffBackend> {
    grads: Grads<'a>,
    velocities: Option<&'a mut HashMap<ParamId, FloatTensor<B::InnerBackend>>>,
    entries: Vec<Entry<B>>,
}

/// One parameter's operands, on the device its gradient is on.
struct Entry<B: AutodiffBackend> {
    id: ParamId,
    device: DeviceId,
    param: FloatTensor<B::InnerBackend>,
    grad: FloatTensor<B::InnerBackend>,
    velocity: Option<FloatTensor<B::InnerBackend>>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Group<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let Some((grad, device)) = self.grads.remove::<B::InnerBackend, D>(param.id) else {
            return;
        };
        let param_value = param.val().inner().to_device(&device);
        let velocity =
            self.velocities
                .as_mut()
                .map(|velocities| match velocities.remove(&param.id) {
                    Some(velocity) => {
                        let velocity = Inner::<B>::float_to_device(velocity, &device);
                        Inner::<B>::float_reshape(velocity, grad.shape())
                    }
                    None => grad.zeros_like().into_primitive().tensor(),
                });
        self.entries.push(Entry {
            id: param.id,
            device: device.to_id(),
            param: param_value.into_primitive().tensor(),
            grad: grad.into_primitive().tensor(),
            velocity,
        });
    }
}

/// Replaces each updated parameter by its new value, tracked for gradients as before.
struct PutBack<B: AutodiffBackend> {
    updated: HashMap<ParamId, FloatTensor<B::InnerBackend>>,
}

impl<B: AutodiffBackend> ModuleMapper<B> for PutBack<B> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let Some(updated) = self.updated.remove(&param.id) else {
            return param;
        };
        let (id, old, mapper) = param.consume();
        let mut tensor =
            Tensor::from_inner(Tensor::from_primitive(TensorPrimitive::Float(updated)));
        if old.is_require_grad() {
            tensor = tensor.require_grad();
        }
        Param::from_mapped_value(id, tensor, mapper)
    }
}
