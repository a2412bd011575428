//! Launch geometry shared by the launches: element-wise grids, 2-D blocks, unit blocks sized
//! to fill the GPU, and vector widths.

use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::*;
use cubecl::{CubeCount, CubeDim, calculate_cube_count_elemwise, tensor_vector_size_parallel};

/// Units a launch needs per streaming multiprocessor to keep the GPU busy (two cubes of
/// 512, or four of 256).
const UNITS_PER_SM: usize = 1024;

/// One unit per output element.
pub(crate) fn elementwise<R: CubeRuntime>(output: &CubeTensor<R>) -> (CubeCount, CubeDim) {
    elementwise_over(&output.client, output.meta.num_elements())
}

/// One unit per item of `count`.
pub(crate) fn elementwise_over<R: CubeRuntime>(
    client: &ComputeClient<R>,
    count: usize,
) -> (CubeCount, CubeDim) {
    let dim = CubeDim::new(client, count);
    (calculate_cube_count_elemwise(client, count, dim), dim)
}

/// A 2-D grid of cubes covering `extent` in blocks of `block`.
pub(crate) fn blocks(extent: [usize; 2], block: [u32; 2]) -> CubeCount {
    let [x, y] = block_counts(extent, block);
    CubeCount::Static(x, y, 1)
}

/// Blocks of `block` along each axis of `extent`.
pub(crate) fn block_counts(extent: [usize; 2], block: [u32; 2]) -> [u32; 2] {
    std::array::from_fn(|i| extent[i].div_ceil(block[i] as usize) as u32)
}

/// How many of an axis's `extent` items (channels, batch rows) each unit takes, from
/// `widest` down: halved while a grid of `units_per_block` units for every block of the
/// axis would leave SMs short of [`UNITS_PER_SM`]. Wide blocks reuse each load more; narrow
/// ones fill the GPU when the batch is small, where a grid of the widest blocks leaves SMs
/// idle. Runtimes that do not report their SM count get the widest block.
pub(crate) fn unit_block<R: CubeRuntime>(
    client: &ComputeClient<R>,
    widest: u32,
    extent: usize,
    units_per_block: usize,
) -> u32 {
    let Some(sms) = sm_count(client) else {
        return widest;
    };
    let wanted = sms * UNITS_PER_SM;
    let mut block = widest;
    while block > 1 && units_per_block * extent.div_ceil(block as usize) < wanted {
        block /= 2;
    }
    block
}

/// The GPU's streaming multiprocessors, where the runtime reports them.
pub(crate) fn sm_count<R: CubeRuntime>(client: &ComputeClient<R>) -> Option<usize> {
    client
        .properties()
        .hardware
        .num_streaming_multiprocessors
        .map(|sms| sms as usize)
}

/// The widest vector of a contiguous matrix's rows this runtime loads well, dividing the
/// row length (1 for odd lengths).
pub(crate) fn row_vector_size<R: CubeRuntime>(matrix: &CubeTensor<R>) -> usize {
    tensor_vector_size_parallel(
        matrix.client.io_optimized_vector_sizes(matrix.dtype.size()),
        matrix.meta.shape(),
        matrix.meta.strides(),
        1,
    )
}
