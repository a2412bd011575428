//! What the fused optimizers ([`crate::train::FusedSgd`], [`crate::train::FusedAdam`]) share: gather every
//! parameter of a module that has a gradient, with its gradient and its kept state (SGD's
//! velocity, Adam's moments; zeros before a parameter's first step), average the gradients
//! over a data-parallel run's replicas, hand each device's group to one update, keep the new
//! state and put the new values back into the module.

use std::collections::HashMap;

use burn::module::{AutodiffModule, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::optim::{GradientsParams, MultiGradientsParams};
use burn::prelude::*;
use burn::tensor::backend::{AutodiffBackend, DeviceId};
use burn::tensor::ops::{FloatTensor, FloatTensorOps};
use burn::tensor::{TensorMetadata, TensorPrimitive};
use cubenet_kernels::{AutodiffKernelBackend, KernelBackend};

use crate::model::fresh_leaf;
use crate::train::fit::data_parallel::AverageOverReplicas;

pub(crate) type Inner<B> = <B as AutodiffBackend>::InnerBackend;

/// Each parameter's kept state: a fixed number of tensors of the parameter's size.
pub(crate) type States<B> = HashMap<ParamId, Vec<FloatTensor<Inner<B>>>>;

/// The gradients of a step: from one device, or from several (Burn's multi-device step).
pub(crate) enum Grads<'a> {
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

/// One parameter's operands, on the device its gradient is on.
pub(crate) struct Operand<B: AutodiffBackend> {
    pub id: ParamId,
    pub param: FloatTensor<Inner<B>>,
    pub grad: FloatTensor<Inner<B>>,
    /// Its kept state, in the parameter's shape.
    pub state: Vec<FloatTensor<Inner<B>>>,
}

/// A parameter's new value and state.
pub(crate) struct Updated<B: AutodiffBackend> {
    pub id: ParamId,
    pub param: FloatTensor<Inner<B>>,
    pub state: Vec<FloatTensor<Inner<B>>>,
}

/// One step of every parameter of `module` that has a gradient in `grads`, each keeping
/// `state_len` tensors in `states`: `update` runs once per device the gradients are on,
/// after the gradients are averaged over the replicas of a data-parallel run (`replicas`).
pub(crate) fn update_module<B, M>(
    module: M,
    grads: Grads,
    states: &mut States<B>,
    state_len: usize,
    replicas: Option<AverageOverReplicas<B>>,
    mut update: impl FnMut(Vec<Operand<B>>) -> Vec<Updated<B>>,
) -> M
where
    B: AutodiffKernelBackend,
    M: AutodiffModule<B>,
{
    let mut gather = Gather::<B> {
        grads,
        states,
        state_len,
        found: Vec::new(),
    };
    module.visit(&mut gather);
    let mut found = gather.found;
    let mut new_values = HashMap::new();
    while let Some((device, _)) = found.first() {
        let device = *device;
        let (here, elsewhere): (Vec<_>, Vec<_>) =
            found.into_iter().partition(|(d, _)| *d == device);
        let mut here: Vec<_> = here.into_iter().map(|(_, operand)| operand).collect();
        if let Some(average) = replicas {
            average_gradients(&mut here, average);
        }
        for updated in update(here) {
            if state_len > 0 {
                states.insert(updated.id, updated.state);
            }
            new_values.insert(updated.id, updated.param);
        }
        found = elsewhere;
    }
    module.map(&mut PutBack::<B> {
        updated: new_values,
    })
}

/// Gathers the parameters that have a gradient, with their gradients and state.
struct Gather<'a, B: AutodiffBackend> {
    grads: Grads<'a>,
    states: &'a mut States<B>,
    state_len: usize,
    found: Vec<(DeviceId, Operand<B>)>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Gather<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let Some((grad, device)) = self.grads.remove::<Inner<B>, D>(param.id) else {
            return;
        };
        let shape = grad.shape();
        let state = match self.states.remove(&param.id) {
            Some(state) => state
                .into_iter()
                .map(|t| {
                    let t = Inner::<B>::float_to_device(t, &device);
                    Inner::<B>::float_reshape(t, shape.clone())
                })
                .collect(),
            None => (0..self.state_len)
                .map(|_| grad.zeros_like().into_primitive().tensor())
                .collect(),
        };
        let operand = Operand {
            id: param.id,
            param: param
                .val()
                .inner()
                .to_device(&device)
                .into_primitive()
                .tensor(),
            grad: grad.into_primitive().tensor(),
            state,
        };
        self.found.push((device.to_id(), operand));
    }
}

/// Replaces every operand's gradient by its average over the replicas: the gradients are
/// packed into one buffer for a single all-reduce (one per step, where Burn's DDP reduces
/// each parameter on its own), then each is taken back out of the result
/// (`KernelBackend::pack`: on a GPU one launch in, views out).
fn average_gradients<B: AutodiffKernelBackend>(
    operands: &mut [Operand<B>],
    average: AverageOverReplicas<B>,
) {
    let shapes = operands.iter().map(|o| o.grad.shape()).collect();
    let grads = operands.iter().map(|o| o.grad.clone()).collect();
    let averaged = average(Inner::<B>::pack(grads));
    for (operand, grad) in operands
        .iter_mut()
        .zip(Inner::<B>::unpack(averaged, shapes))
    {
        operand.grad = grad;
    }
}

/// Replaces each updated parameter by its new value, tracked for gradients as before.
struct PutBack<B: AutodiffBackend> {
    updated: HashMap<ParamId, FloatTensor<Inner<B>>>,
}

impl<B: AutodiffBackend> ModuleMapper<B> for PutBack<B> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let Some(updated) = self.updated.remove(&param.id) else {
            return param;
        };
        let (id, old, mapper) = param.consume();
        let value = Tensor::from_primitive(TensorPrimitive::Float(updated));
        Param::from_mapped_value(id, fresh_leaf(value, old.is_require_grad()), mapper)
    }
}

#[cfg(test)]
mod tests {
    use burn::backend::{Autodiff, NdArray};
    use burn::tensor::{Distribution, FloatDType};

    use super::*;

    type Cpu = NdArray<f32>;
    type B = Autodiff<Cpu>;

    #[test]
    fn each_gradient_gets_its_own_slice_of_the_averaged_buffer_back() {
        let device = Default::default();
        let shapes = [vec![2, 3], vec![4], vec![1, 1, 5], vec![7, 1]];
        let grads: Vec<FloatTensor<Cpu>> = shapes
            .iter()
            .map(|shape| {
                let shape = Shape::from(shape.clone());
                Cpu::float_random(shape, Distribution::Default, &device, FloatDType::F32)
            })
            .collect();
        let mut operands: Vec<Operand<B>> = grads
            .iter()
            .map(|grad| Operand {
                id: ParamId::new(),
                param: grad.clone(),
                grad: grad.clone(),
                state: Vec::new(),
            })
            .collect();
        // Stands for the replicas' average: one buffer holding every gradient, scaled so
        // that a gradient handed back unaveraged or misplaced shows.
        average_gradients(&mut operands, |buffer| {
            assert_eq!(buffer.shape(), Shape::new([6 + 4 + 5 + 7]));
            Cpu::float_mul_scalar(buffer, 2.0.into())
        });
        for (operand, grad) in operands.into_iter().zip(grads) {
            assert_eq!(operand.grad.shape(), grad.shape());
            let doubled: Vec<f32> = values(grad).iter().map(|v| 2.0 * v).collect();
            assert_eq!(values(operand.grad), doubled);
        }
    }

    fn values(tensor: FloatTensor<Cpu>) -> Vec<f32> {
        let elements = tensor.shape().num_elements();
        let flat = Cpu::float_reshape(tensor, Shape::new([elements]));
        let flat = Tensor::<Cpu, 1>::from_primitive(TensorPrimitive::Float(flat));
        flat.into_data().to_vec().expect("f32 values")
    }
}
