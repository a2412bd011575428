//! The memory layouts the kernels read: their inputs' shapes, and copies only where a
//! kernel cannot read a layout in place.

use burn_cubecl::CubeRuntime;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;

use crate::kernels::geometry::NchwLaunch;

/// `tensor` with rows of unit stride, copied only if its last axis is strided: the conv
/// kernels index the other axes through the strides, so that CUDA's pitched layouts (rows
/// of 28 floats padded to 32 in a batch of images) and slices of a batch are read in place
/// instead of copied before the forward and again before the weight gradient.
pub(crate) fn unit_stride_rows<R: CubeRuntime>(tensor: CubeTensor<R>) -> CubeTensor<R> {
    if tensor.meta.strides().last() == Some(&1) {
        tensor
    } else {
        into_contiguous(tensor)
    }
}

/// The sizes of a 4-D tensor.
pub(crate) fn dims4<R: CubeRuntime>(tensor: &CubeTensor<R>) -> [usize; 4] {
    let shape = tensor.meta.shape();
    [shape[0], shape[1], shape[2], shape[3]]
}

/// The sizes and strides of a 4-D tensor, as the scalar argument the kernels read them
/// from (see [`crate::kernels::geometry::Nchw`]).
pub(crate) fn nchw<R: CubeRuntime>(tensor: &CubeTensor<R>) -> NchwLaunch<R> {
    let [batch, channels, rows, cols] = dims4(tensor);
    let strides = tensor.meta.strides();
    debug_assert!(
        cols <= 1 || strides[3] == 1,
        "the kernels read rows of unit stride"
    );
    NchwLaunch::new(
        batch,
        channels,
        rows as u32,
        cols as u32,
        strides[0],
        strides[1],
        strides[2],
    )
}

/// The sizes of a matrix.
pub(crate) fn dims2<R: CubeRuntime>(tensor: &CubeTensor<R>) -> [usize; 2] {
    let shape = tensor.meta.shape();
    [shape[0], shape[1]]
}
