//! [`KernelBackend`] for the CubeCL backend, on any runtime: allocation, launch geometry
//! and contiguity; the math is in [`crate::kernels`].

use std::sync::atomic::{AtomicBool, Ordering};

use burn::tensor::{DType, Shape};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};
use cubecl::prelude::*;
use cubecl::{CubeCount, CubeDim, calculate_cube_count_elemwise};

use crate::kernels::conv::{conv2d_forward, conv2d_input_grad};
use crate::kernels::dense::{dense_forward, dense_input_grad, dense_weight_grad};
use crate::kernels::fused::conv_relu_pool_forward;
use crate::kernels::geometry::Window;
use crate::kernels::pool::{max_pool2d_backward, max_pool2d_forward};
use crate::kernels::reduce::conv2d_weight_grad;
use crate::{ConvOptions2d, GradsWanted, KernelBackend, LayerGrads, PoolOptions2d};

/// Units per cube of the weight-gradient reduction (a power of two).
const REDUCE_CUBE_SIZE: u32 = 256;

/// Block of outputs per cube of the dense forward: rows (batch) × columns (outputs).
const DENSE_BLOCK: [u32; 2] = [4, 16];
/// Units per cube of the dense forward (a power of two, at least the block's columns).
const DENSE_CUBE_SIZE: u32 = 256;
// The dense forward's tree reduction halves the cube down to one unit per column.
const _: () = assert!(DENSE_CUBE_SIZE.is_power_of_two() && DENSE_CUBE_SIZE >= DENSE_BLOCK[1]);
/// Output columns per unit of the dense weight gradient.
const DENSE_GRAD_COLS: u32 = 16;
/// Weight rows per cube of the dense weight gradient, and units per row sharing out the
/// batch (a power of two: they combine by halving). 16 × 16 units, 16 KB of shared memory.
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
    let shape = Shape::from(shape.to_vec());
    let bytes = shape.num_elements() * dtype.size();
    let handle = if POISON_OUTPUTS.load(Ordering::Relaxed) {
        let poison = match dtype {
            DType::F32 => f32::NAN.to_ne_bytes().repeat(bytes / 4),
            DType::F64 => f64::NAN.to_ne_bytes().repeat(bytes / 8),
            _ => vec![0xEE; bytes],
        };
        like.client.create_from_slice(&poison)
    } else {
        like.client.empty(bytes)
    };
    CubeTensor::new_contiguous(
        like.client.clone(),
        like.device.clone(),
        shape,
        handle,
        dtype,
    )
}

/// One unit per output element.
fn elementwise<R: CubeRuntime>(output: &CubeTensor<R>) -> (CubeCount, CubeDim) {
    let count = output.meta.num_elements();
    let dim = CubeDim::new(&output.client, count);
    (
        calculate_cube_count_elemwise(&output.client, count, dim),
        dim,
    )
}

/// A 2-D grid of cubes covering `extent` in blocks of `block`.
fn blocks(extent: [usize; 2], block: [u32; 2]) -> CubeCount {
    let count = |i: usize| extent[i].div_ceil(block[i] as usize) as u32;
    CubeCount::Static(count(0), count(1), 1)
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

/// A convolution's input and filters, contiguous, with their sizes.
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
        let (x, weight) = (into_contiguous(x), into_contiguous(weight));
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

    /// Input gradient by the gather kernel.
    fn input_grad<F: FloatElement>(
        &self,
        grad: &CubeTensor<R>,
        argmax: Option<&CubeTensor<R>>,
        pool: Window,
    ) -> CubeTensor<R> {
        let x_grad = empty_like(&self.x, self.x_dims, F::dtype());
        let (count, dim) = elementwise(&x_grad);
        conv2d_input_grad::launch::<F, R>(
            &x_grad.client,
            count,
            dim,
            grad.clone().into_tensor_arg(),
            argmax.map(|a| a.clone().into_tensor_arg()).into(),
            self.weight.clone().into_tensor_arg(),
            x_grad.clone().into_tensor_arg(),
            self.out_size[0] as u32,
            self.out_size[1] as u32,
            self.window,
            pool,
            argmax_storage(argmax),
        );
        x_grad
    }

    /// Weight (and bias) gradient by the cube-per-element reduction.
    fn weight_grad<F: FloatElement>(
        &self,
        grad: &CubeTensor<R>,
        argmax: Option<&CubeTensor<R>>,
        pool: Window,
        with_bias: bool,
    ) -> (CubeTensor<R>, Option<CubeTensor<R>>) {
        let [c_out, c_in, kh, kw] = self.weight_dims;
        let weight_grad = empty_like(&self.x, self.weight_dims, F::dtype());
        // Without a bias the bias cube is not launched and this one-element buffer is not written.
        let bias_grad = empty_like(&self.x, [if with_bias { c_out } else { 1 }], F::dtype());
        let cubes_per_filter = c_in * kh * kw + usize::from(with_bias);
        conv2d_weight_grad::launch::<F, R>(
            &self.x.client,
            CubeCount::Static(cubes_per_filter as u32, c_out as u32, 1),
            CubeDim::new_1d(REDUCE_CUBE_SIZE),
            self.x.clone().into_tensor_arg(),
            grad.clone().into_tensor_arg(),
            argmax.map(|a| a.clone().into_tensor_arg()).into(),
            weight_grad.clone().into_tensor_arg(),
            bias_grad.clone().into_tensor_arg(),
            self.window,
            pool,
            REDUCE_CUBE_SIZE,
            argmax_storage(argmax),
        );
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
        conv2d_forward::launch::<F, R>(
            &output.client,
            count,
            dim,
            operands.x.into_tensor_arg(),
            operands.weight.into_tensor_arg(),
            bias.map(|b| into_contiguous(b).into_tensor_arg()).into(),
            output.clone().into_tensor_arg(),
            operands.window,
        );
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
        let output = empty_like(&x, [n, c, out_h, out_w], F::dtype());
        let (argmax_dtype, argmax_type) = argmax_dtype(&x.client);
        let argmax = empty_like(&x, [n, c, out_h, out_w], argmax_dtype);
        let (count, dim) = elementwise(&output);
        max_pool2d_forward::launch::<F, R>(
            &output.client,
            count,
            dim,
            x.into_tensor_arg(),
            output.clone().into_tensor_arg(),
            argmax.clone().into_tensor_arg(),
            pool_window(pool),
            argmax_type,
        );
        (output, argmax)
    }

    fn max_pool_backward(
        x: CubeTensor<R>,
        grad: CubeTensor<R>,
        argmax: CubeTensor<R>,
        pool: PoolOptions2d,
    ) -> CubeTensor<R> {
        let (grad, argmax) = (into_contiguous(grad), into_contiguous(argmax));
        let x_grad = empty_like(&grad, dims4(&x), F::dtype());
        let (count, dim) = elementwise(&x_grad);
        let argmax_type = storage_of(argmax.dtype);
        max_pool2d_backward::launch::<F, R>(
            &x_grad.client,
            count,
            dim,
            grad.into_tensor_arg(),
            argmax.into_tensor_arg(),
            x_grad.clone().into_tensor_arg(),
            pool_window(pool),
            argmax_type,
        );
        x_grad
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
        let output = empty_like(&operands.x, out_shape, F::dtype());
        let (argmax_dtype, argmax_type) = argmax_dtype(&operands.x.client);
        let argmax = empty_like(&operands.x, out_shape, argmax_dtype);
        let (count, dim) = elementwise(&output);
        conv_relu_pool_forward::launch::<F, R>(
            &output.client,
            count,
            dim,
            operands.x.into_tensor_arg(),
            operands.weight.into_tensor_arg(),
            bias.map(|b| into_contiguous(b).into_tensor_arg()).into(),
            output.clone().into_tensor_arg(),
            argmax.clone().into_tensor_arg(),
            operands.out_size[0] as u32,
            operands.out_size[1] as u32,
            operands.window,
            pool_window(pool),
            argmax_type,
        );
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
    ) -> CubeTensor<R> {
        let (x, weight) = (into_contiguous(x), into_contiguous(weight));
        let ([batch, _], [_, outputs]) = (dims2(&x), dims2(&weight));
        let output = empty_like(&x, [batch, outputs], F::dtype());
        let [rows, cols] = DENSE_BLOCK;
        dense_forward::launch::<F, R>(
            &output.client,
            blocks([batch, outputs], DENSE_BLOCK),
            CubeDim::new_1d(DENSE_CUBE_SIZE),
            x.into_tensor_arg(),
            weight.into_tensor_arg(),
            bias.map(|b| into_contiguous(b).into_tensor_arg()).into(),
            output.clone().into_tensor_arg(),
            rows,
            cols,
            DENSE_CUBE_SIZE,
        );
        output
    }

    fn dense_backward(
        x: CubeTensor<R>,
        weight: CubeTensor<R>,
        grad: CubeTensor<R>,
        wants: GradsWanted,
    ) -> LayerGrads<Self> {
        let (x, weight, grad) = (
            into_contiguous(x),
            into_contiguous(weight),
            into_contiguous(grad),
        );
        let ([_, inputs], [_, outputs]) = (dims2(&x), dims2(&weight));
        let x_grad = wants.x.then(|| {
            let x_grad = empty_like(&x, dims2(&x), F::dtype());
            let (count, dim) = elementwise(&x_grad);
            dense_input_grad::launch::<F, R>(
                &x_grad.client,
                count,
                dim,
                grad.clone().into_tensor_arg(),
                weight.clone().into_tensor_arg(),
                x_grad.clone().into_tensor_arg(),
            );
            x_grad
        });
        let weight_grad = empty_like(&x, [inputs, outputs], F::dtype());
        // Without a bias its unit is not launched and this one-element buffer is not written.
        let bias_grad = empty_like(&x, [if wants.bias { outputs } else { 1 }], F::dtype());
        let units = inputs + usize::from(wants.bias);
        dense_weight_grad::launch::<F, R>(
            &weight_grad.client,
            blocks([units, outputs], [DENSE_GRAD_ROWS, DENSE_GRAD_COLS]),
            CubeDim::new_2d(DENSE_GRAD_ROWS, DENSE_GRAD_LANES),
            x.into_tensor_arg(),
            grad.into_tensor_arg(),
            weight_grad.clone().into_tensor_arg(),
            bias_grad.clone().into_tensor_arg(),
            DENSE_GRAD_COLS,
            DENSE_GRAD_ROWS,
            DENSE_GRAD_LANES,
            wants.bias,
        );
        LayerGrads {
            x: x_grad,
            weight: weight_grad,
            bias: wants.bias.then_some(bias_grad),
        }
    }
}
