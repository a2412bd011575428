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
use crate::kernels::fused::conv_relu_pool_forward;
use crate::kernels::geometry::Window;
use crate::kernels::pool::{max_pool2d_backward, max_pool2d_forward};
use crate::kernels::reduce::conv2d_weight_grad;
use crate::{ConvGrads, ConvOptions2d, GradsWanted, KernelBackend, PoolOptions2d};

/// Units per cube of the weight-gradient reduction (a power of two).
const REDUCE_CUBE_SIZE: u32 = 256;

/// Whether kernel outputs are filled with a poison pattern before launch (tests only).
static POISON_OUTPUTS: AtomicBool = AtomicBool::new(false);

/// Testing aid: when on, every output buffer of these kernels is filled before the launch
/// with a pattern no kernel writes (NaN for floats, 0xEE bytes for argmax), so an element
/// a kernel forgot to write shows up in a comparison instead of passing on stale memory.
pub fn poison_outputs(enabled: bool) {
    POISON_OUTPUTS.store(enabled, Ordering::Relaxed);
}

/// A new contiguous tensor of `shape` and `dtype` on `like`'s device, for a kernel to fill.
fn empty_like<R: CubeRuntime>(
    like: &CubeTensor<R>,
    shape: [usize; 4],
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

fn conv_window(weight: [usize; 4], options: ConvOptions2d) -> Window {
    Window::new([weight[2], weight[3]], options.stride, options.padding)
}

fn pool_window(pool: PoolOptions2d) -> Window {
    Window::new(pool.kernel, pool.stride, pool.padding)
}

/// The identity "pool" used when a gradient is not routed through an argmax.
fn no_pool() -> Window {
    Window::new([1, 1], [1, 1], [0, 0])
}

/// Weight (and bias) gradient by the cube-per-element reduction; `argmax` routes a pooled
/// gradient to the conv positions it came from.
fn weight_grad<R: CubeRuntime, F: FloatElement>(
    x: &CubeTensor<R>,
    grad: &CubeTensor<R>,
    argmax: Option<&CubeTensor<R>>,
    weight_dims: [usize; 4],
    conv: Window,
    pool: Window,
    with_bias: bool,
) -> (CubeTensor<R>, Option<CubeTensor<R>>) {
    let [c_out, c_in, kh, kw] = weight_dims;
    let weight_grad = empty_like(x, weight_dims, F::dtype());
    // Without a bias the bias cube is not launched and this one-element buffer is not written.
    let bias_grad = empty_like(x, [if with_bias { c_out } else { 1 }, 1, 1, 1], F::dtype());
    let cubes_per_filter = c_in * kh * kw + usize::from(with_bias);
    conv2d_weight_grad::launch::<F, R>(
        &x.client,
        CubeCount::Static(cubes_per_filter as u32, c_out as u32, 1),
        CubeDim::new_1d(REDUCE_CUBE_SIZE),
        x.clone().into_tensor_arg(),
        grad.clone().into_tensor_arg(),
        argmax.map(|a| a.clone().into_tensor_arg()).into(),
        weight_grad.clone().into_tensor_arg(),
        bias_grad.clone().into_tensor_arg(),
        conv,
        pool,
        REDUCE_CUBE_SIZE,
        argmax_storage(argmax),
    );
    let bias_grad = with_bias.then(|| reshape(bias_grad, vec![c_out]));
    (weight_grad, bias_grad)
}

/// The same buffer under a new shape (the tensor is contiguous, so no data moves).
fn reshape<R: CubeRuntime>(tensor: CubeTensor<R>, shape: Vec<usize>) -> CubeTensor<R> {
    CubeTensor::new_contiguous(
        tensor.client,
        tensor.device,
        Shape::from(shape),
        tensor.handle,
        tensor.dtype,
    )
}

/// Storage type of an optional argmax; kernels without one still need a type for it.
fn argmax_storage<R: CubeRuntime>(argmax: Option<&CubeTensor<R>>) -> StorageType {
    storage_of(argmax.map_or(DType::U8, |a| a.dtype))
}

/// Input gradient by the gather kernel; `argmax` routes a pooled gradient.
fn input_grad<R: CubeRuntime, F: FloatElement>(
    x_dims: [usize; 4],
    weight: &CubeTensor<R>,
    grad: &CubeTensor<R>,
    argmax: Option<&CubeTensor<R>>,
    conv_size: [usize; 2],
    conv: Window,
    pool: Window,
) -> CubeTensor<R> {
    let x_grad = empty_like(weight, x_dims, F::dtype());
    let (count, dim) = elementwise(&x_grad);
    conv2d_input_grad::launch::<F, R>(
        &x_grad.client,
        count,
        dim,
        grad.clone().into_tensor_arg(),
        argmax.map(|a| a.clone().into_tensor_arg()).into(),
        weight.clone().into_tensor_arg(),
        x_grad.clone().into_tensor_arg(),
        conv_size[0] as u32,
        conv_size[1] as u32,
        conv,
        pool,
        argmax_storage(argmax),
    );
    x_grad
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
        let (x, weight) = (into_contiguous(x), into_contiguous(weight));
        let bias = bias.map(into_contiguous);
        let [n, _, h, w] = dims4(&x);
        let weight_dims = dims4(&weight);
        let [out_h, out_w] = options.output_size([h, w], [weight_dims[2], weight_dims[3]]);
        let output = empty_like(&x, [n, weight_dims[0], out_h, out_w], F::dtype());
        let (count, dim) = elementwise(&output);
        conv2d_forward::launch::<F, R>(
            &output.client,
            count,
            dim,
            x.into_tensor_arg(),
            weight.into_tensor_arg(),
            bias.map(|b| b.into_tensor_arg()).into(),
            output.clone().into_tensor_arg(),
            conv_window(weight_dims, options),
        );
        output
    }

    fn conv_backward(
        x: CubeTensor<R>,
        weight: CubeTensor<R>,
        grad: CubeTensor<R>,
        options: ConvOptions2d,
        wants: GradsWanted,
    ) -> ConvGrads<Self> {
        let (x, weight, grad) = (
            into_contiguous(x),
            into_contiguous(weight),
            into_contiguous(grad),
        );
        let weight_dims = dims4(&weight);
        let conv = conv_window(weight_dims, options);
        let [_, _, out_h, out_w] = dims4(&grad);
        let x_grad = wants.x.then(|| {
            input_grad::<R, F>(
                dims4(&x),
                &weight,
                &grad,
                None,
                [out_h, out_w],
                conv,
                no_pool(),
            )
        });
        let (weight_grad, bias_grad) =
            weight_grad::<R, F>(&x, &grad, None, weight_dims, conv, no_pool(), wants.bias);
        ConvGrads {
            x: x_grad,
            weight: weight_grad,
            bias: bias_grad,
        }
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
        let (x, weight) = (into_contiguous(x), into_contiguous(weight));
        let bias = bias.map(into_contiguous);
        let [n, _, h, w] = dims4(&x);
        let weight_dims = dims4(&weight);
        let [conv_h, conv_w] = conv.output_size([h, w], [weight_dims[2], weight_dims[3]]);
        let [out_h, out_w] = pool.output_size([conv_h, conv_w]);
        let output = empty_like(&x, [n, weight_dims[0], out_h, out_w], F::dtype());
        let (argmax_dtype, argmax_type) = argmax_dtype(&x.client);
        let argmax = empty_like(&x, [n, weight_dims[0], out_h, out_w], argmax_dtype);
        let (count, dim) = elementwise(&output);
        conv_relu_pool_forward::launch::<F, R>(
            &output.client,
            count,
            dim,
            x.into_tensor_arg(),
            weight.into_tensor_arg(),
            bias.map(|b| b.into_tensor_arg()).into(),
            output.clone().into_tensor_arg(),
            argmax.clone().into_tensor_arg(),
            conv_h as u32,
            conv_w as u32,
            conv_window(weight_dims, conv),
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
    ) -> ConvGrads<Self> {
        let (x, weight, grad) = (
            into_contiguous(x),
            into_contiguous(weight),
            into_contiguous(grad),
        );
        let argmax = into_contiguous(argmax);
        let x_dims = dims4(&x);
        let weight_dims = dims4(&weight);
        let conv_size = conv.output_size([x_dims[2], x_dims[3]], [weight_dims[2], weight_dims[3]]);
        let conv = conv_window(weight_dims, conv);
        let pool = pool_window(pool);
        let x_grad = wants.x.then(|| {
            input_grad::<R, F>(x_dims, &weight, &grad, Some(&argmax), conv_size, conv, pool)
        });
        let (weight_grad, bias_grad) = weight_grad::<R, F>(
            &x,
            &grad,
            Some(&argmax),
            weight_dims,
            conv,
            pool,
            wants.bias,
        );
        ConvGrads {
            x: x_grad,
            weight: weight_grad,
            bias: bias_grad,
        }
    }
}
