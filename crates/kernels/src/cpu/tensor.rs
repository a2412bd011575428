//! Reading NdArray's tensors as row-major slices and wrapping kernel outputs back into
//! tensors without copies.

use std::borrow::Cow;

use burn::backend::ndarray::NdArrayTensor;
use burn::tensor::{Element, TensorData, TensorMetadata};
use ndarray::{ArrayView, IxDyn};

/// `tensor`'s values (f32) in row-major order: borrowed where the tensor already is
/// row-major (most are), copied once where it is a strided view (Burn's conv outputs).
pub(super) fn values(tensor: &NdArrayTensor) -> Cow<'_, [f32]> {
    match tensor {
        NdArrayTensor::F32(storage) => row_major(storage.view()),
        other => panic!(
            "cubenet's CPU kernels take f32 tensors, got {:?}",
            other.dtype()
        ),
    }
}

/// `tensor`'s values as NdArray's default int type (i64), e.g. an argmax.
pub(super) fn indices(tensor: &NdArrayTensor) -> Cow<'_, [i64]> {
    match tensor {
        NdArrayTensor::I64(storage) => row_major(storage.view()),
        other => panic!(
            "cubenet's CPU kernels take i64 indices, got {:?}",
            other.dtype()
        ),
    }
}

fn row_major<E: Clone>(view: ArrayView<'_, E, IxDyn>) -> Cow<'_, [E]> {
    match view.to_slice() {
        Some(slice) => Cow::Borrowed(slice),
        None => Cow::Owned(view.iter().cloned().collect()),
    }
}

/// The dims of `tensor`.
pub(super) fn dims(tensor: &NdArrayTensor) -> Vec<usize> {
    tensor.shape().to_vec()
}

/// `values` (row-major) as a tensor of `shape`: f32 values make a float tensor, i64 ones
/// an int tensor.
pub(super) fn tensor<E: Element>(values: Vec<E>, shape: &[usize]) -> NdArrayTensor {
    NdArrayTensor::from_data(TensorData::new(values, shape.to_vec()))
}

/// A kernel output's element type and what fills it before the kernel writes.
pub(super) trait OutputElement: Copy {
    const ZERO: Self;
    #[cfg(feature = "testing")]
    /// A value no kernel writes (NaN; −1 for an argmax), so that an element the kernel
    /// forgot fails the tests' comparison.
    const POISON: Self;
}

impl OutputElement for f32 {
    const ZERO: Self = 0.0;
    #[cfg(feature = "testing")]
    const POISON: Self = f32::NAN;
}

impl OutputElement for i64 {
    const ZERO: Self = 0;
    #[cfg(feature = "testing")]
    const POISON: Self = -1;
}

/// A kernel's output buffer of `len` elements: zeros; with the `testing` feature and
/// poisoning on, [`OutputElement::POISON`].
pub(super) fn output<E: OutputElement>(len: usize) -> Vec<E> {
    #[cfg(feature = "testing")]
    if crate::testing::poisoning() {
        return vec![E::POISON; len];
    }
    vec![E::ZERO; len]
}
