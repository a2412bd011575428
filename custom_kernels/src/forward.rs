//! [`KernelBackend`] for the CubeCL backend, on any runtime: allocation, launch geometry,
//! contiguity and handing launches to CubeCL's device thread; the math is in
//! [`crate::kernels`].
//!
//! Kernels are launched unchecked: CubeCL's checked launch clamps every tensor index and
//! selects a zero for out-of-range reads, which Nsight Compute showed as a large share of
//! the instructions of the issue-bound kernels. Each kernel instead guards its own indices
//! against the shapes it is launched with, and the tests run every kernel over hundreds of
//! random shapes with poisoned outputs.

use std::sync::atomic::{AtomicBool, Ordering};

use burn::tensor::{DType, Shape};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};
use cubecl::device::Device;
use cubecl::device_handle::DeviceHandle;
use cubecl::prelude::*;
use cubecl::server::MemoryLayoutDescriptor;
use cubecl::{CubeCount, CubeDim, calculate_cube_count_elemwise, tensor_vector_size_parallel};

use crate::kernels::conv::{conv2d_forward, conv2d_input_grad, conv2d_input_grad_rows};
use crate::kernels::dense::{
    dense_forward_partial, dense_forward_sum, dense_input_grad, dense_weight_grad,
};
use crate::kernels::fused::conv_relu_pool_forward;
use crate::kernels::geometry::Window;
use crate::kernels::loss::{cross_entropy_backward, cross_entropy_forward};
use crate::kernels::pool::{max_pool2d_backward, max_pool2d_forward};
use crate::kernels::reduce::{conv2d_weight_grad_partial, conv2d_weight_grad_sum};
use crate::kernels::update::{sgd_momentum_update, sgd_update};
use crate::{
    ConvOptions2d, DenseActivation, GradsWanted, KernelBackend, LayerGrads, PoolOptions2d,
};

/// Largest cube of the weight-gradient reduction (a power of two); smaller for large
/// filters, so that its shared memory (one row per tap) stays within 32 KB.
const REDUCE_CUBE_SIZE: u32 = 256;
/// Floats of shared memory the weight-gradient reduction may use.
const REDUCE_SHARED_FLOATS: u32 = 8192;
/// Most adjacent plane positions a cube of the weight-gradient reduction covers side by
/// side (a warp's worth, so that its loads coalesce); its other units are image lanes.
const REDUCE_POSITION_LANES: usize = 32;
/// Gradient elements each unit of the weight-gradient reduction visits, about: sets how
/// many images a cube takes. At d = 256, batch 1000 on an H200 (Nsight Compute, same
/// launches) 4, 8, 16 and 32 took 286, 194, 174 and 151 µs (larger groups, likely because
/// each unit's share of the final sum in shared memory shrinks).
const REDUCE_ELEMENTS_PER_UNIT: usize = 32;

/// Units per cube of the conv input gradient (one input position each, or one run of
/// [`INPUT_GRAD_COLS`] at stride 1), and the most input channels each unit computes from
/// one read of the output gradient.
const INPUT_GRAD_CUBE_SIZE: u32 = 256;
const INPUT_GRAD_CHANNELS: u32 = 8;
/// Adjacent input columns each unit of the stride-1 conv input gradient computes: each
/// weight it loads serves all of them.
const INPUT_GRAD_COLS: u32 = 4;

/// Units per cube of the fused conv·ReLU·pool forward.
const FUSED_CUBE_SIZE: u32 = 256;
/// Accumulators per unit of the fused forward (filters × window positions): bounds the
/// registers its filter block takes. At 64 the kernel took 154 registers, leaving one cube
/// per SM (12% occupancy, Nsight Compute on an H200); at 32, 108 registers and two cubes.
/// 16 (4 filters under a 2×2 pool) timed the same or faster than 32 and 8 at every
/// benchmark point on an H200.
const FUSED_ACCUMULATORS: usize = 16;
/// Most filters per unit of the fused forward.
const FUSED_MAX_FILTERS: usize = 16;
/// Most filter blocks one unit of the fused forward computes in turn: enough to spread its
/// position's index arithmetic over many multiply-adds, few enough to leave a grid of
/// many cubes (an SM with one cube more than the others sets the time of a short grid).
const FUSED_MAX_FILTER_BLOCKS: u32 = 8;

/// Units in the cross-entropy forward's single cube (a power of two).
const LOSS_CUBE_SIZE: u32 = 256;

/// Batch rows per cube of the dense forward, each weight load serving all of them; and
/// the most output columns per cube (fewer when the layer has fewer outputs). Its units
/// hold rows × columns sums: at 8 × 10 the kernel took 226 registers (Nsight Compute).
const DENSE_ROWS: u32 = 4;
const DENSE_MAX_COLS: u32 = 16;
/// Units per cube of the dense forward: at least one per output of its block, which adds
/// up that output's sums.
const DENSE_CUBE_SIZE: u32 = 64;
/// Vectors of inputs each unit of the dense forward multiplies, about: sets the splits of
/// K, so that the products outweigh the sum that follows them.
const DENSE_VECTORS_PER_UNIT: usize = 16;
const _: () = assert!(DENSE_ROWS * DENSE_MAX_COLS <= DENSE_CUBE_SIZE);
/// Units per cube of the dense input gradient (one vector of inputs each), and the most
/// batch rows each unit computes with one read of its weights.
const DENSE_INPUT_GRAD_UNITS: u32 = 256;
const DENSE_INPUT_GRAD_ROWS: u32 = 8;
/// Most output columns per unit of the dense weight gradient (its accumulators).
const DENSE_GRAD_MAX_COLS: u32 = 16;
/// Vectors of weight rows per cube of the dense weight gradient, and units per vector
/// sharing out the batch (a power of two: they combine by halving). 16 × 16 units.
const DENSE_GRAD_ROWS: u32 = 16;
const DENSE_GRAD_LANES: u32 = 16;
const _: () = assert!(DENSE_GRAD_LANES.is_power_of_two());

/// Whether kernel outputs are filled with a poison pattern before launch (tests only).
static POISON_OUTPUTS: AtomicBool = AtomicBool::new(false);

/// Testing aid: when on, every output buffer of these kernels is filled before the launch
/// with a pattern no kernel writes (NaN for floats, 0xEE bytes for argmax), so an element
/// a kernel forgot to write shows up in a comparison instead of passing on stale memory.
pub fn poison_outputs(enabled: bool) {
    POISON_OUTPUTS.store(enabled, Ordering::Relaxed);
}

/// A new contiguous tensor of `shape` and `dtype` on `like`'s device, for a kernel to fill.
fn empty_like<R: CubeRuntime, const D: usize>(
    like: &CubeTensor<R>,
    shape: [usize; D],
    dtype: DType,
) -> CubeTensor<R> {
    let [tensor] = empty_group(like, [(shape.into(), dtype)]);
    tensor
}

/// New contiguous tensors on `like`'s device, for one kernel to fill, in one allocation:
/// CubeCL's device thread runs each allocation as a task of its own, so a kernel's several
/// outputs cost one task instead of one each.
fn empty_group<R: CubeRuntime, const K: usize>(
    like: &CubeTensor<R>,
    outputs: [(Shape, DType); K],
) -> [CubeTensor<R>; K] {
    empty_tensors(like, outputs.into())
        .try_into()
        .unwrap_or_else(|_| unreachable!("one tensor per output"))
}

/// [`empty_group`] for a number of outputs known at run time.
fn empty_tensors<R: CubeRuntime>(
    like: &CubeTensor<R>,
    outputs: Vec<(Shape, DType)>,
) -> Vec<CubeTensor<R>> {
    let client = &like.client;
    let layouts = outputs
        .iter()
        .map(|(shape, dtype)| MemoryLayoutDescriptor::contiguous(shape.clone(), dtype.size()));
    let memory = if POISON_OUTPUTS.load(Ordering::Relaxed) {
        let patterns: Vec<_> = outputs
            .iter()
            .map(|(shape, dtype)| poison(shape.num_elements(), *dtype))
            .collect();
        client.create_tensors_from_slices(layouts.zip(patterns.iter().map(Vec::as_slice)).collect())
    } else {
        client.empty_tensors(layouts.collect())
    };
    outputs
        .into_iter()
        .zip(memory)
        .map(|((shape, dtype), layout)| {
            CubeTensor::new_contiguous(
                client.clone(),
                like.device.clone(),
                shape,
                layout.memory,
                dtype,
            )
        })
        .collect()
}

/// `elements` of a pattern no kernel writes: NaN for floats, 0xEE bytes otherwise.
fn poison(elements: usize, dtype: DType) -> Vec<u8> {
    match dtype {
        DType::F32 => f32::NAN.to_ne_bytes().repeat(elements),
        DType::F64 => f64::NAN.to_ne_bytes().repeat(elements),
        _ => vec![0xEE; elements * dtype.size()],
    }
}

/// Hands the tasks queued so far to CubeCL's device thread now. CubeCL 0.10 queues every
/// launch and allocation for one device thread that starts on them only when 32 have
/// accumulated or at a synchronization; a training step makes fewer, so without this its
/// kernels would wait for the host to finish building the whole step.
fn start_queued_tasks<R: CubeRuntime>(device: &R::Device) {
    DeviceHandle::<R::Server>::new(device.to_id()).flush_queue();
}

/// One unit per output element.
fn elementwise<R: CubeRuntime>(output: &CubeTensor<R>) -> (CubeCount, CubeDim) {
    elementwise_over(&output.client, output.meta.num_elements())
}

/// One unit per item of `count`.
fn elementwise_over<R: CubeRuntime>(
    client: &ComputeClient<R>,
    count: usize,
) -> (CubeCount, CubeDim) {
    let dim = CubeDim::new(client, count);
    (calculate_cube_count_elemwise(client, count, dim), dim)
}

/// A 2-D grid of cubes covering `extent` in blocks of `block`.
fn blocks(extent: [usize; 2], block: [u32; 2]) -> CubeCount {
    let [x, y] = block_counts(extent, block);
    CubeCount::Static(x, y, 1)
}

/// Blocks of `block` along each axis of `extent`.
fn block_counts(extent: [usize; 2], block: [u32; 2]) -> [u32; 2] {
    std::array::from_fn(|i| extent[i].div_ceil(block[i] as usize) as u32)
}

/// Units a launch needs per streaming multiprocessor to keep the GPU busy (two cubes of
/// 512, or four of 256).
const UNITS_PER_SM: usize = 1024;

/// How many of an axis's `extent` items (channels, batch rows) each unit takes, from
/// `widest` down: halved while a grid of `units_per_block` units for every block of the
/// axis would leave SMs short of [`UNITS_PER_SM`]. Wide blocks reuse each load more; narrow
/// ones fill the GPU when the batch is small (a LeNet epoch at batch 64 took 0.79 s this way
/// on an H200, 1.04 s with the widest channel blocks). Runtimes that do not report their SM
/// count get the widest block.
fn unit_block<R: CubeRuntime>(
    client: &ComputeClient<R>,
    widest: u32,
    extent: usize,
    units_per_block: usize,
) -> u32 {
    let Some(sms) = client.properties().hardware.num_streaming_multiprocessors else {
        return widest;
    };
    let wanted = sms as usize * UNITS_PER_SM;
    let mut block = widest;
    while block > 1 && units_per_block * extent.div_ceil(block as usize) < wanted {
        block /= 2;
    }
    block
}

/// The widest vector of a contiguous matrix's rows this runtime loads well, dividing the
/// row length (1 for odd lengths).
fn row_vector_size<R: CubeRuntime>(matrix: &CubeTensor<R>) -> usize {
    tensor_vector_size_parallel(
        matrix.client.io_optimized_vector_sizes(matrix.dtype.size()),
        matrix.meta.shape(),
        matrix.meta.strides(),
        1,
    )
}

/// `tensor` with rows of unit stride, copied only if its last axis is strided: the conv
/// kernels index the other axes through the strides, so that CUDA's pitched layouts (rows
/// of 28 floats padded to 32 in a batch of images) and slices of a batch are read in place
/// instead of copied before the forward and again before the weight gradient.
fn unit_stride_rows<R: CubeRuntime>(tensor: CubeTensor<R>) -> CubeTensor<R> {
    if tensor.meta.strides().last() == Some(&1) {
        tensor
    } else {
        into_contiguous(tensor)
    }
}

/// The argmax element type: `u8` where the runtime has 8-bit integers, else `u32`.
fn argmax_dtype<R: CubeRuntime>(client: &ComputeClient<R>) -> (DType, StorageType) {
    let u8_type = u8::as_type_native_unchecked().storage_type();
    if client.properties().supports_type(u8_type) {
        (DType::U8, u8_type)
    } else {
        (DType::U32, u32::as_type_native_unchecked().storage_type())
    }
}

fn storage_of(dtype: DType) -> StorageType {
    match dtype {
        DType::U8 => u8::as_type_native_unchecked().storage_type(),
        DType::U32 => u32::as_type_native_unchecked().storage_type(),
        other => panic!("argmax tensors are u8 or u32, got {other:?}"),
    }
}

fn dims4<R: CubeRuntime>(tensor: &CubeTensor<R>) -> [usize; 4] {
    let shape = tensor.meta.shape();
    [shape[0], shape[1], shape[2], shape[3]]
}

fn dims2<R: CubeRuntime>(tensor: &CubeTensor<R>) -> [usize; 2] {
    let shape = tensor.meta.shape();
    [shape[0], shape[1]]
}

fn pool_window(pool: PoolOptions2d) -> Window {
    Window::new(pool.kernel, pool.stride, pool.padding)
}

/// The identity "pool" used when a gradient is not routed through an argmax.
fn no_pool() -> Window {
    Window::new([1, 1], [1, 1], [0, 0])
}

/// The gradient of a max-pool's input of `shape`, gathered from the pooled gradient
/// `grad` (contiguous) through `argmax`.
fn max_pool_input_grad<R: CubeRuntime, F: FloatElement>(
    grad: &CubeTensor<R>,
    argmax: &CubeTensor<R>,
    window: Window,
    shape: [usize; 4],
) -> CubeTensor<R> {
    let x_grad = empty_like(grad, shape, F::dtype());
    let (count, dim) = elementwise(&x_grad);
    // SAFETY: see the module documentation (kernels guard their own indices).
    unsafe {
        max_pool2d_backward::launch_unchecked::<F, R>(
            &x_grad.client,
            count,
            dim,
            grad.clone().into_tensor_arg(),
            argmax.clone().into_tensor_arg(),
            x_grad.clone().into_tensor_arg(),
            window,
            storage_of(argmax.dtype),
        )
    }
    start_queued_tasks::<R>(&x_grad.device);
    x_grad
}

/// A convolution's input (rows of unit stride) and filters (contiguous), with their sizes.
struct ConvOperands<R: CubeRuntime> {
    x: CubeTensor<R>,
    weight: CubeTensor<R>,
    x_dims: [usize; 4],
    weight_dims: [usize; 4],
    /// The filter window with the convolution's stride and padding.
    window: Window,
    /// Height and width of the convolution's output.
    out_size: [usize; 2],
}

impl<R: CubeRuntime> ConvOperands<R> {
    fn new(x: CubeTensor<R>, weight: CubeTensor<R>, options: ConvOptions2d) -> Self {
        let (x, weight) = (unit_stride_rows(x), into_contiguous(weight));
        let (x_dims, weight_dims) = (dims4(&x), dims4(&weight));
        let kernel = [weight_dims[2], weight_dims[3]];
        Self {
            window: Window::new(kernel, options.stride, options.padding),
            out_size: options.output_size([x_dims[2], x_dims[3]], kernel),
            x,
            weight,
            x_dims,
            weight_dims,
        }
    }

    /// `[N, C_out, h, w]`: the output shape for a map of `size` per filter.
    fn output_shape(&self, size: [usize; 2]) -> [usize; 4] {
        [self.x_dims[0], self.weight_dims[0], size[0], size[1]]
    }

    /// Input (if `wants.x`), weight and bias gradients from `grad`: the conv output's own
    /// gradient, or a pooled gradient routed through `argmax` over `pool` windows.
    fn grads<F: FloatElement>(
        &self,
        grad: CubeTensor<R>,
        argmax: Option<CubeTensor<R>>,
        pool: Window,
        wants: GradsWanted,
    ) -> (Option<CubeTensor<R>>, CubeTensor<R>, Option<CubeTensor<R>>) {
        let grad = into_contiguous(grad);
        let argmax = argmax.map(into_contiguous);
        let x_grad = wants
            .x
            .then(|| self.input_grad::<F>(&grad, argmax.as_ref(), pool));
        let (weight_grad, bias_grad) =
            self.weight_grad::<F>(&grad, argmax.as_ref(), pool, wants.bias);
        (x_grad, weight_grad, bias_grad)
    }

    /// Input gradient: a pooled `grad` is first routed through `argmax` back to the conv
    /// output's shape (the max-pool backward), then the gather kernel runs over blocks of
    /// input channels (and, at stride 1, of input columns).
    fn input_grad<F: FloatElement>(
        &self,
        grad: &CubeTensor<R>,
        argmax: Option<&CubeTensor<R>>,
        pool: Window,
    ) -> CubeTensor<R> {
        let conv_grad = match argmax {
            Some(argmax) => {
                max_pool_input_grad::<R, F>(grad, argmax, pool, self.output_shape(self.out_size))
            }
            None => grad.clone(),
        };
        let x_grad = empty_like(&self.x, self.x_dims, F::dtype());
        let [batch, c_in, h, w] = self.x_dims;
        let unit_stride = self.window.stride_h == 1 && self.window.stride_w == 1;
        let cols = if unit_stride { INPUT_GRAD_COLS } else { 1 };
        let positions = batch * h * w.div_ceil(cols as usize);
        let channels = unit_block(
            &x_grad.client,
            (c_in as u32).min(INPUT_GRAD_CHANNELS),
            c_in,
            positions.next_multiple_of(INPUT_GRAD_CUBE_SIZE as usize),
        );
        let count = blocks([positions, c_in], [INPUT_GRAD_CUBE_SIZE, channels]);
        let dim = CubeDim::new_1d(INPUT_GRAD_CUBE_SIZE);
        let (grad, weight) = (
            conv_grad.into_tensor_arg(),
            self.weight.clone().into_tensor_arg(),
        );
        // SAFETY: see the module documentation (kernels guard their own indices).
        unsafe {
            if unit_stride {
                conv2d_input_grad_rows::launch_unchecked::<F, R>(
                    &x_grad.client,
                    count,
                    dim,
                    grad,
                    weight,
                    x_grad.clone().into_tensor_arg(),
                    self.window,
                    channels,
                    cols,
                )
            } else {
                conv2d_input_grad::launch_unchecked::<F, R>(
                    &x_grad.client,
                    count,
                    dim,
                    grad,
                    weight,
                    x_grad.clone().into_tensor_arg(),
                    self.window,
                    channels,
                )
            }
        }
        start_queued_tasks::<R>(&x_grad.device);
        x_grad
    }

    /// Weight (and bias) gradient by the two-stage reduction: partial sums per group of
    /// images, then their sum.
    fn weight_grad<F: FloatElement>(
        &self,
        grad: &CubeTensor<R>,
        argmax: Option<&CubeTensor<R>>,
        pool: Window,
        with_bias: bool,
    ) -> (CubeTensor<R>, Option<CubeTensor<R>>) {
        let [c_out, c_in, kh, kw] = self.weight_dims;
        let [batch, _, grad_h, grad_w] = dims4(grad);
        let terms = kh * kw + 1;
        let fit = REDUCE_SHARED_FLOATS / terms as u32;
        let cube_size = (1 << fit.ilog2()).clamp(32, REDUCE_CUBE_SIZE);
        let plane = grad_h * grad_w;
        let position_lanes = plane.next_power_of_two().min(REDUCE_POSITION_LANES);
        let image_lanes = cube_size as usize / position_lanes;
        let images_per_lane = REDUCE_ELEMENTS_PER_UNIT.div_ceil(plane.div_ceil(position_lanes));
        let per_group = (images_per_lane * image_lanes).min(batch);
        let groups = batch.div_ceil(per_group);
        // Without a bias its one-element buffer is not written.
        let [partials, weight_grad, bias_grad] = empty_group(
            &self.x,
            [
                ([groups, c_out, c_in, terms].into(), F::dtype()),
                (self.weight_dims.into(), F::dtype()),
                ([if with_bias { c_out } else { 1 }].into(), F::dtype()),
            ],
        );
        // SAFETY: see the module documentation (kernels guard their own indices).
        unsafe {
            conv2d_weight_grad_partial::launch_unchecked::<F, R>(
                &self.x.client,
                CubeCount::Static(c_out as u32, groups as u32, c_in as u32),
                CubeDim::new_2d(position_lanes as u32, image_lanes as u32),
                self.x.clone().into_tensor_arg(),
                grad.clone().into_tensor_arg(),
                argmax.map(|a| a.clone().into_tensor_arg()).into(),
                partials.clone().into_tensor_arg(),
                per_group as u32,
                self.window,
                pool,
                cube_size,
                argmax_storage(argmax),
            )
        }
        start_queued_tasks::<R>(&self.x.device);
        let (count, dim) = elementwise_over(&self.x.client, c_out * c_in * terms);
        // SAFETY: see the module documentation (kernels guard their own indices).
        unsafe {
            conv2d_weight_grad_sum::launch_unchecked::<F, R>(
                &self.x.client,
                count,
                dim,
                partials.into_tensor_arg(),
                weight_grad.clone().into_tensor_arg(),
                bias_grad.clone().into_tensor_arg(),
                terms as u32,
                with_bias,
            )
        }
        start_queued_tasks::<R>(&self.x.device);
        (weight_grad, with_bias.then_some(bias_grad))
    }
}

/// Storage type of an optional argmax; kernels without one still need a type for it.
fn argmax_storage<R: CubeRuntime>(argmax: Option<&CubeTensor<R>>) -> StorageType {
    storage_of(argmax.map_or(DType::U8, |a| a.dtype))
}

impl<R, F, I, BT> KernelBackend for CubeBackend<R, F, I, BT>
where
    R: CubeRuntime,
    F: FloatElement,
    I: IntElement,
    BT: BoolElement,
{
    fn conv(
        x: CubeTensor<R>,
        weight: CubeTensor<R>,
        bias: Option<CubeTensor<R>>,
        options: ConvOptions2d,
    ) -> CubeTensor<R> {
        let operands = ConvOperands::new(x, weight, options);
        let output = empty_like(
            &operands.x,
            operands.output_shape(operands.out_size),
            F::dtype(),
        );
        let (count, dim) = elementwise(&output);
        // SAFETY: see the module documentation (kernels guard their own indices).
        unsafe {
            conv2d_forward::launch_unchecked::<F, R>(
                &output.client,
                count,
                dim,
                operands.x.into_tensor_arg(),
                operands.weight.into_tensor_arg(),
                bias.map(|b| into_contiguous(b).into_tensor_arg()).into(),
                output.clone().into_tensor_arg(),
                operands.window,
            )
        }
        start_queued_tasks::<R>(&output.device);
        output
    }

    fn conv_backward(
        x: CubeTensor<R>,
        weight: CubeTensor<R>,
        grad: CubeTensor<R>,
        options: ConvOptions2d,
        wants: GradsWanted,
    ) -> LayerGrads<Self> {
        let operands = ConvOperands::new(x, weight, options);
        let (x, weight, bias) = operands.grads::<F>(grad, None, no_pool(), wants);
        LayerGrads { x, weight, bias }
    }

    fn max_pool_with_argmax(
        x: CubeTensor<R>,
        pool: PoolOptions2d,
    ) -> (CubeTensor<R>, CubeTensor<R>) {
        let x = into_contiguous(x);
        let [n, c, h, w] = dims4(&x);
        let [out_h, out_w] = pool.output_size([h, w]);
        let (argmax_dtype, argmax_type) = argmax_dtype(&x.client);
        let shape = Shape::from([n, c, out_h, out_w]);
        let [output, argmax] =
            empty_group(&x, [(shape.clone(), F::dtype()), (shape, argmax_dtype)]);
        let (count, dim) = elementwise(&output);
        // SAFETY: see the module documentation (kernels guard their own indices).
        unsafe {
            max_pool2d_forward::launch_unchecked::<F, R>(
                &output.client,
                count,
                dim,
                x.into_tensor_arg(),
                output.clone().into_tensor_arg(),
                argmax.clone().into_tensor_arg(),
                pool_window(pool),
                argmax_type,
            )
        }
        start_queued_tasks::<R>(&output.device);
        (output, argmax)
    }

    fn max_pool_backward(
        x: CubeTensor<R>,
        grad: CubeTensor<R>,
        argmax: CubeTensor<R>,
        pool: PoolOptions2d,
    ) -> CubeTensor<R> {
        let (grad, argmax) = (into_contiguous(grad), into_contiguous(argmax));
        max_pool_input_grad::<R, F>(&grad, &argmax, pool_window(pool), dims4(&x))
    }

    fn conv_relu_pool(
        x: CubeTensor<R>,
        weight: CubeTensor<R>,
        bias: Option<CubeTensor<R>>,
        conv: ConvOptions2d,
        pool: PoolOptions2d,
    ) -> (CubeTensor<R>, CubeTensor<R>) {
        let operands = ConvOperands::new(x, weight, conv);
        let out_shape = operands.output_shape(pool.output_size(operands.out_size));
        let (argmax_dtype, argmax_type) = argmax_dtype(&operands.x.client);
        let [output, argmax] = empty_group(
            &operands.x,
            [
                (out_shape.into(), F::dtype()),
                (out_shape.into(), argmax_dtype),
            ],
        );
        let [batch, c_out, out_h, out_w] = out_shape;
        let windows = pool.kernel[0] * pool.kernel[1];
        let positions = (batch * out_h * out_w).div_ceil(FUSED_CUBE_SIZE as usize);
        let filters = unit_block(
            &output.client,
            (FUSED_ACCUMULATORS / windows).clamp(1, FUSED_MAX_FILTERS) as u32,
            c_out,
            positions * FUSED_CUBE_SIZE as usize,
        ) as usize;
        let blocks = c_out.div_ceil(filters);
        let filter_blocks = unit_block(
            &output.client,
            FUSED_MAX_FILTER_BLOCKS.min(blocks as u32),
            blocks,
            positions * FUSED_CUBE_SIZE as usize,
        ) as usize;
        // SAFETY: see the module documentation (kernels guard their own indices).
        unsafe {
            conv_relu_pool_forward::launch_unchecked::<F, R>(
                &output.client,
                CubeCount::Static(positions as u32, blocks.div_ceil(filter_blocks) as u32, 1),
                CubeDim::new_1d(FUSED_CUBE_SIZE),
                operands.x.into_tensor_arg(),
                operands.weight.into_tensor_arg(),
                bias.map(|b| into_contiguous(b).into_tensor_arg()).into(),
                output.clone().into_tensor_arg(),
                argmax.clone().into_tensor_arg(),
                operands.out_size[0] as u32,
                operands.out_size[1] as u32,
                filter_blocks as u32,
                operands.window,
                pool_window(pool),
                filters as u32,
                argmax_type,
            )
        }
        start_queued_tasks::<R>(&output.device);
        (output, argmax)
    }

    fn conv_relu_pool_backward(
        x: CubeTensor<R>,
        weight: CubeTensor<R>,
        grad: CubeTensor<R>,
        argmax: CubeTensor<R>,
        conv: ConvOptions2d,
        pool: PoolOptions2d,
        wants: GradsWanted,
    ) -> LayerGrads<Self> {
        let operands = ConvOperands::new(x, weight, conv);
        let (x, weight, bias) = operands.grads::<F>(grad, Some(argmax), pool_window(pool), wants);
        LayerGrads { x, weight, bias }
    }

    fn dense(
        x: CubeTensor<R>,
        weight: CubeTensor<R>,
        bias: Option<CubeTensor<R>>,
        activation: DenseActivation,
    ) -> CubeTensor<R> {
        let (x, weight) = (into_contiguous(x), into_contiguous(weight));
        let ([batch, inputs], [outputs, _]) = (dims2(&x), dims2(&weight));
        let width = row_vector_size(&x);
        let row_vectors = inputs / width;
        let splits = row_vectors
            .div_ceil(DENSE_CUBE_SIZE as usize * DENSE_VECTORS_PER_UNIT)
            .max(1);
        let vectors_per_split = row_vectors.div_ceil(splits);
        let single_split = splits == 1;
        let relu = activation == DenseActivation::Relu;
        let bias = bias.map(into_contiguous);
        // One split writes the output itself; more write partial sums for a second kernel.
        let [partials, output] = if single_split {
            let output = empty_like(&x, [batch, outputs], F::dtype());
            [output.clone(), output]
        } else {
            empty_group(
                &x,
                [
                    ([splits, batch, outputs].into(), F::dtype()),
                    ([batch, outputs].into(), F::dtype()),
                ],
            )
        };
        let block = [DENSE_ROWS, (outputs as u32).clamp(1, DENSE_MAX_COLS)];
        let [rows, cols] = block;
        let [row_blocks, col_blocks] = block_counts([batch, outputs], block);
        let first_stage_bias = bias.clone().filter(|_| single_split);
        // SAFETY: see the module documentation (kernels guard their own indices).
        unsafe {
            dense_forward_partial::launch_unchecked::<F, R>(
                &partials.client,
                CubeCount::Static(row_blocks, col_blocks, splits as u32),
                CubeDim::new_1d(DENSE_CUBE_SIZE),
                width,
                x.into_tensor_arg(),
                weight.into_tensor_arg(),
                first_stage_bias.map(CubeTensor::into_tensor_arg).into(),
                partials.clone().into_tensor_arg(),
                vectors_per_split as u32,
                rows,
                cols,
                DENSE_CUBE_SIZE,
                single_split,
                relu && single_split,
            )
        }
        start_queued_tasks::<R>(&partials.device);
        if single_split {
            return output;
        }
        let (count, dim) = elementwise(&output);
        // SAFETY: see the module documentation (kernels guard their own indices).
        unsafe {
            dense_forward_sum::launch_unchecked::<F, R>(
                &output.client,
                count,
                dim,
                partials.into_tensor_arg(),
                bias.map(CubeTensor::into_tensor_arg).into(),
                output.clone().into_tensor_arg(),
                relu,
            )
        }
        start_queued_tasks::<R>(&output.device);
        output
    }

    fn dense_backward(
        x: CubeTensor<R>,
        weight: CubeTensor<R>,
        grad: CubeTensor<R>,
        relu_output: Option<CubeTensor<R>>,
        wants: GradsWanted,
    ) -> LayerGrads<Self> {
        let (x, grad) = (into_contiguous(x), into_contiguous(grad));
        let relu_output = relu_output.map(into_contiguous);
        let ([batch, inputs], [outputs, _]) = (dims2(&x), dims2(&weight));
        let width = row_vector_size(&x);
        let row_vectors = inputs / width;
        let x_grad = wants.x.then(|| {
            let weight = into_contiguous(weight);
            let x_grad = empty_like(&x, [batch, inputs], F::dtype());
            let rows = unit_block(
                &x_grad.client,
                DENSE_INPUT_GRAD_ROWS,
                batch,
                row_vectors.next_multiple_of(DENSE_INPUT_GRAD_UNITS as usize),
            );
            // SAFETY: see the module documentation (kernels guard their own indices).
            unsafe {
                dense_input_grad::launch_unchecked::<F, R>(
                    &x_grad.client,
                    blocks([row_vectors, batch], [DENSE_INPUT_GRAD_UNITS, rows]),
                    CubeDim::new_1d(DENSE_INPUT_GRAD_UNITS),
                    width,
                    grad.clone().into_tensor_arg(),
                    relu_output.clone().map(CubeTensor::into_tensor_arg).into(),
                    weight.into_tensor_arg(),
                    x_grad.clone().into_tensor_arg(),
                    rows,
                )
            }
            start_queued_tasks::<R>(&x_grad.device);
            x_grad
        });
        // Without a bias its unit is not launched and its one-element buffer is not written.
        let [weight_grad, bias_grad] = empty_group(
            &x,
            [
                ([outputs, inputs].into(), F::dtype()),
                ([if wants.bias { outputs } else { 1 }].into(), F::dtype()),
            ],
        );
        let units = row_vectors + usize::from(wants.bias);
        let cols = (outputs as u32).clamp(1, DENSE_GRAD_MAX_COLS);
        // SAFETY: see the module documentation (kernels guard their own indices).
        unsafe {
            dense_weight_grad::launch_unchecked::<F, R>(
                &weight_grad.client,
                blocks([units, outputs], [DENSE_GRAD_ROWS, cols]),
                CubeDim::new_2d(DENSE_GRAD_ROWS, DENSE_GRAD_LANES),
                width,
                x.into_tensor_arg(),
                grad.into_tensor_arg(),
                relu_output.map(CubeTensor::into_tensor_arg).into(),
                weight_grad.clone().into_tensor_arg(),
                bias_grad.clone().into_tensor_arg(),
                cols,
                DENSE_GRAD_ROWS,
                DENSE_GRAD_LANES,
                wants.bias,
            )
        }
        start_queued_tasks::<R>(&weight_grad.device);
        LayerGrads {
            x: x_grad,
            weight: weight_grad,
            bias: wants.bias.then_some(bias_grad),
        }
    }

    fn cross_entropy(logits: CubeTensor<R>, targets: CubeTensor<R>) -> CubeTensor<R> {
        let (logits, targets) = (into_contiguous(logits), into_contiguous(targets));
        let loss = empty_like(&logits, [1], F::dtype());
        // SAFETY: see the module documentation (kernels guard their own indices).
        unsafe {
            cross_entropy_forward::launch_unchecked::<F, I, R>(
                &loss.client,
                CubeCount::Static(1, 1, 1),
                CubeDim::new_1d(LOSS_CUBE_SIZE),
                logits.into_tensor_arg(),
                targets.into_tensor_arg(),
                loss.clone().into_tensor_arg(),
                LOSS_CUBE_SIZE,
            )
        }
        start_queued_tasks::<R>(&loss.device);
        loss
    }

    fn cross_entropy_backward(
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
        // SAFETY: see the module documentation (kernels guard their own indices).
        unsafe {
            cross_entropy_backward::launch_unchecked::<F, I, R>(
                &logits_grad.client,
                count,
                dim,
                logits.into_tensor_arg(),
                targets.into_tensor_arg(),
                grad.into_tensor_arg(),
                logits_grad.clone().into_tensor_arg(),
            )
        }
        start_queued_tasks::<R>(&logits_grad.device);
        logits_grad
    }

    fn sgd_update(
        params: Vec<CubeTensor<R>>,
        grads: Vec<CubeTensor<R>>,
        lr: f64,
    ) -> Vec<CubeTensor<R>> {
        let mut all_updated = Vec::new();
        for group in UpdateGroup::split([params, grads], 3) {
            let updated = group.outputs(1);
            // SAFETY: see the module documentation (kernels guard their own indices).
            unsafe {
                sgd_update::launch_unchecked::<F, R>(
                    &group.client,
                    group.count.clone(),
                    group.dim,
                    group.inputs(0),
                    group.inputs(1),
                    sequence(&updated),
                    lr as f32,
                )
            }
            start_queued_tasks::<R>(&group.device);
            all_updated.extend(updated);
        }
        all_updated
    }

    fn sgd_momentum_update(
        params: Vec<CubeTensor<R>>,
        grads: Vec<CubeTensor<R>>,
        velocities: Vec<CubeTensor<R>>,
        lr: f64,
        momentum: f64,
    ) -> (Vec<CubeTensor<R>>, Vec<CubeTensor<R>>) {
        let (mut all_updated, mut all_velocities) = (Vec::new(), Vec::new());
        for group in UpdateGroup::split([params, grads, velocities], 5) {
            let mut updated = group.outputs(2);
            let updated_velocities = updated.split_off(updated.len() / 2);
            // SAFETY: see the module documentation (kernels guard their own indices).
            unsafe {
                sgd_momentum_update::launch_unchecked::<F, R>(
                    &group.client,
                    group.count.clone(),
                    group.dim,
                    group.inputs(0),
                    group.inputs(1),
                    group.inputs(2),
                    sequence(&updated),
                    sequence(&updated_velocities),
                    lr as f32,
                    momentum as f32,
                )
            }
            start_queued_tasks::<R>(&group.device);
            all_updated.extend(updated);
            all_velocities.extend(updated_velocities);
        }
        (all_updated, all_velocities)
    }
}

/// The operands of one launch of an SGD update: each kind (parameters, gradients,
/// velocities) as contiguous tensors in parameter order, and a grid that covers the
/// largest parameter.
struct UpdateGroup<R: CubeRuntime> {
    operands: Vec<Vec<CubeTensor<R>>>,
    client: ComputeClient<R>,
    device: R::Device,
    count: CubeCount,
    dim: CubeDim,
}

impl<R: CubeRuntime> UpdateGroup<R> {
    /// `kinds` (each one tensor per parameter) in as few launches as the runtime's buffer
    /// bindings allow, each parameter taking `buffers` of them (its inputs and outputs): all
    /// at once on CUDA, a few parameters per launch on wgpu (32 storage buffers, one of
    /// them the kernel's metadata).
    fn split<const K: usize>(kinds: [Vec<CubeTensor<R>>; K], buffers: usize) -> Vec<Self> {
        let Some(first) = kinds[0].first() else {
            return Vec::new();
        };
        let (client, device) = (first.client.clone(), first.device.clone());
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
                client: client.clone(),
                device: device.clone(),
                count,
                dim,
            });
        }
        groups
    }

    /// The operands of kind `kind` (0: parameters, 1: gradients, 2: velocities).
    fn inputs<E: CubePrimitive>(&self, kind: usize) -> SequenceArg<R, Tensor<E>> {
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

/// `tensors` as one kernel argument.
fn sequence<R: CubeRuntime, E: CubePrimitive>(
    tensors: &[CubeTensor<R>],
) -> SequenceArg<R, Tensor<E>> {
    tensors
        .iter()
        .map(|t| t.clone().into_tensor_arg())
        .collect()
}
