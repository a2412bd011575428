//! Softmax cross-entropy on CubeCL: the mean loss in one cube, the logits' gradient one row
//! per unit.

use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeRuntime, FloatElement, IntElement};
use cubecl::prelude::*;

use super::alloc::empty_like;
use super::grid::elementwise_over;
use super::launch::launch;
use super::layout::dims2;
use crate::kernels::loss::{cross_entropy_backward, cross_entropy_forward};

/// Units in the forward's single cube (a power of two).
const CUBE_SIZE: u32 = 256;

/// The mean loss of `logits` against `targets`, as a one-element tensor.
pub(crate) fn forward<R: CubeRuntime, F: FloatElement, I: IntElement>(
    logits: CubeTensor<R>,
    targets: CubeTensor<R>,
) -> CubeTensor<R> {
    let (logits, targets) = (into_contiguous(logits), into_contiguous(targets));
    let loss = empty_like(&logits, [1], F::dtype());
    launch!(cross_entropy_forward::<F, I, R>(
        &loss,
        CubeCount::Static(1, 1, 1),
        CubeDim::new_1d(CUBE_SIZE),
        logits.into_tensor_arg(),
        targets.into_tensor_arg(),
        loss.clone().into_tensor_arg(),
        CUBE_SIZE,
    ));
    loss
}

/// The gradient of [`forward`] with respect to the logits, given the loss's gradient.
pub(crate) fn backward<R: CubeRuntime, F: FloatElement, I: IntElement>(
    logits: CubeTensor<R>,
    targets: CubeTensor<R>,
    grad: CubeTensor<R>,
) -> CubeTensor<R> {
    let (logits, targets, grad) = (
        into_contiguous(logits),
        into_contiguous(targets),
        into_contiguous(grad),
    );
    let logits_grad = empty_like(&logits, dims2(&logits), F::dtype());
    let (count, dim) = elementwise_over(&logits.client, dims2(&logits)[0]);
    launch!(cross_entropy_backward::<F, I, R>(
        &logits_grad,
        count,
        dim,
        logits.into_tensor_arg(),
        targets.into_tensor_arg(),
        grad.into_tensor_arg(),
        logits_grad.clone().into_tensor_arg(),
    ));
    logits_grad
}
