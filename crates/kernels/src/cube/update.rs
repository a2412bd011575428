//! SGD and Adam updates on CubeCL: a model's parameters updated in one launch (a few on
//! runtimes with few buffer bindings), each unit updating its element of every parameter.

use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeRuntime, FloatElement};
use cubecl::prelude::*;

use super::alloc::empty_tensors;
use super::grid::elementwise_over;
use super::launch::launch;
use crate::kernels::update::{adam_update, sgd_momentum_update, sgd_update};
use crate::{AdamMoments, AdamStep, MomentumStep};

/// `param − lr · (grad + weight_decay · param)` for each parameter.
pub(crate) fn sgd<R: CubeRuntime, F: FloatElement>(
    params: Vec<CubeTensor<R>>,
    grads: Vec<CubeTensor<R>>,
    lr: f64,
    weight_decay: f64,
) -> Vec<CubeTensor<R>> {
    let mut all_updated = Vec::new();
    for group in UpdateGroup::split([params, grads], 3) {
        let updated = group.outputs(1);
        launch!(sgd_update::<F, R>(
            &updated[0],
            group.count.clone(),
            group.dim,
            group.inputs(0),
            group.inputs(1),
            sequence(&updated),
            lr as f32,
            weight_decay as f32,
        ));
        all_updated.extend(updated);
    }
    all_updated
}

/// The momentum step of each parameter and its velocity (see
/// [`crate::KernelBackend::sgd_momentum_update`]).
pub(crate) fn sgd_momentum<R: CubeRuntime, F: FloatElement>(
    params: Vec<CubeTensor<R>>,
    grads: Vec<CubeTensor<R>>,
    velocities: Vec<CubeTensor<R>>,
    step: MomentumStep,
) -> (Vec<CubeTensor<R>>, Vec<CubeTensor<R>>) {
    let (mut all_updated, mut all_velocities) = (Vec::new(), Vec::new());
    for group in UpdateGroup::split([params, grads, velocities], 5) {
        let mut updated = group.outputs(2);
        let updated_velocities = updated.split_off(updated.len() / 2);
        launch!(sgd_momentum_update::<F, R>(
            &updated[0],
            group.count.clone(),
            group.dim,
            group.inputs(0),
            group.inputs(1),
            group.inputs(2),
            sequence(&updated),
            sequence(&updated_velocities),
            step.lr as f32,
            step.momentum as f32,
            step.weight_decay as f32,
            step.nesterov,
        ));
        all_updated.extend(updated);
        all_velocities.extend(updated_velocities);
    }
    (all_updated, all_velocities)
}

/// Adam's update of each parameter and its moments (see [`crate::KernelBackend::adam_update`]).
pub(crate) fn adam<R: CubeRuntime, F: FloatElement>(
    params: Vec<CubeTensor<R>>,
    grads: Vec<CubeTensor<R>>,
    moments: AdamMoments<CubeTensor<R>>,
    step: AdamStep,
) -> (Vec<CubeTensor<R>>, AdamMoments<CubeTensor<R>>) {
    let mut all_updated = Vec::new();
    let mut all_moments = AdamMoments {
        first: Vec::new(),
        second: Vec::new(),
    };
    for group in UpdateGroup::split([params, grads, moments.first, moments.second], 7) {
        let mut updated = group.outputs(3);
        let mut first = updated.split_off(updated.len() / 3);
        let second = first.split_off(first.len() / 2);
        launch!(adam_update::<F, R>(
            &updated[0],
            group.count.clone(),
            group.dim,
            group.inputs(0),
            group.inputs(1),
            group.inputs(2),
            group.inputs(3),
            sequence(&updated),
            sequence(&first),
            sequence(&second),
            step.lr as f32,
            step.beta_1,
            step.beta_2,
            step.moment_factor(),
            step.scaled_epsilon(),
            step.weight_decay,
        ));
        all_updated.extend(updated);
        all_moments.first.extend(first);
        all_moments.second.extend(second);
    }
    (all_updated, all_moments)
}

/// The operands of one launch over a group of parameters (an SGD or Adam update, or the
/// packing of their gradients, [`super::pack`]): each kind (parameters, gradients, velocities
/// or moments, packed places) as contiguous tensors in parameter order, and a grid that
/// covers the largest of the first kind.
pub(super) struct UpdateGroup<R: CubeRuntime> {
    operands: Vec<Vec<CubeTensor<R>>>,
    pub count: CubeCount,
    pub dim: CubeDim,
}

impl<R: CubeRuntime> UpdateGroup<R> {
    /// `kinds` (each one tensor per parameter) in as few launches as the runtime's buffer
    /// bindings allow, each parameter taking `buffers` of them (its inputs and outputs): all
    /// at once on CUDA, a few parameters per launch on wgpu (32 storage buffers, one of
    /// them the kernel's metadata).
    pub fn split<const K: usize>(kinds: [Vec<CubeTensor<R>>; K], buffers: usize) -> Vec<Self> {
        let Some(first) = kinds[0].first() else {
            return Vec::new();
        };
        let client = first.client.clone();
        let bindings = client.properties().hardware.max_bindings as usize;
        let per_launch = (bindings.saturating_sub(1) / buffers).max(1);
        let mut kinds = kinds.map(|kind| kind.into_iter().map(into_contiguous).peekable());
        let mut groups = Vec::new();
        while kinds[0].peek().is_some() {
            let operands: Vec<Vec<_>> = kinds
                .iter_mut()
                .map(|kind| kind.by_ref().take(per_launch).collect())
                .collect();
            let largest = operands[0].iter().map(|p| p.meta.num_elements()).max();
            let (count, dim) = elementwise_over(&client, largest.unwrap_or(1));
            groups.push(Self {
                operands,
                count,
                dim,
            });
        }
        groups
    }

    /// The operands of kind `kind` as one kernel argument (0: parameters, or the tensors to
    /// pack; 1: gradients, or their places; then velocities or moments).
    pub fn inputs<E: CubePrimitive>(&self, kind: usize) -> SequenceArg<R, Array<E>> {
        sequence(&self.operands[kind])
    }

    /// `copies` new tensors shaped like each parameter, in one allocation: all of the first
    /// copy's, then the second's.
    fn outputs(&self, copies: usize) -> Vec<CubeTensor<R>> {
        let params = &self.operands[0];
        let shapes = (0..copies)
            .flat_map(|_| params.iter().map(|p| (p.meta.shape().clone(), p.dtype)))
            .collect();
        empty_tensors(&params[0], shapes)
    }
}

/// `tensors` (contiguous) as one kernel argument of arrays: only their lengths go with
/// the launch (see [`super::launch`]).
fn sequence<R: CubeRuntime, E: CubePrimitive>(
    tensors: &[CubeTensor<R>],
) -> SequenceArg<R, Array<E>> {
    tensors.iter().map(|t| t.clone().into_array_arg()).collect()
}
