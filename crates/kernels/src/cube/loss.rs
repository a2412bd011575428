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
    let [rows, classes] = dims2(&logits);
    launch!(cross_entropy_forward::<F, I, R>(
        &loss,
        CubeCount::Static(1, 1, 1),
        CubeDim::new_1d(CUBE_SIZE),
        logits.into_array_arg(),
        targets.into_array_arg(),
        loss.clone().into_array_arg(),
        rows,
        classes,
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
    let [rows, classes] = dims2(&logits);
    let logits_grad = empty_like(&logits, [rows, classes], F::dtype());
    let (count, dim) = elementwise_over(&logits.client, rows);
    launch!(cross_entropy_backward::<F, I, R>(
        &logits_grad,
        count,
        dim,
        logits.into_array_arg(),
        targets.into_array_arg(),
        grad.into_array_arg(),
        logits_grad.clone().into_array_arg(),
        rows,
        classes,
    ));
    logits_grad
}
