//! Max-pool with argmax on CubeCL: the forward and the gradient routed through the argmax,
//! which the fused conv·ReLU·pool's backward reuses; and the argmax's element type.

use burn::tensor::{DType, Shape};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeRuntime, FloatElement};
use cubecl::prelude::*;

use super::alloc::{empty_group, empty_like};
use super::grid::{elementwise, elementwise_over};
use super::launch::launch;
use super::layout::{dims4, nchw};
use crate::PoolOptions2d;
use crate::kernels::geometry::Window;
use crate::kernels::pool::{max_pool2d_backward, max_pool2d_forward, max_pool2x2_backward};

/// The pooled map and its argmax.
pub(crate) fn forward<R: CubeRuntime, F: FloatElement>(
    x: CubeTensor<R>,
    pool: PoolOptions2d,
) -> (CubeTensor<R>, CubeTensor<R>) {
    let x = into_contiguous(x);
    let [n, c, h, w] = dims4(&x);
    let [out_h, out_w] = pool.output_size([h, w]);
    let (argmax_dtype, argmax_type) = argmax_dtype(&x.client);
    let shape = Shape::from([n, c, out_h, out_w]);
    let [output, argmax] = empty_group(&x, [(shape.clone(), F::dtype()), (shape, argmax_dtype)]);
    let (count, dim) = elementwise(&output);
    launch!(max_pool2d_forward::<F, R>(
        &output,
        count,
        dim,
        x.clone().into_array_arg(),
        output.clone().into_array_arg(),
        argmax.clone().into_array_arg(),
        nchw(&x),
        nchw(&output),
        window(pool),
        argmax_type,
    ));
    (output, argmax)
}

/// The gradient of the input `x` of [`forward`].
pub(crate) fn backward<R: CubeRuntime, F: FloatElement>(
    x: CubeTensor<R>,
    grad: CubeTensor<R>,
    argmax: CubeTensor<R>,
    pool: PoolOptions2d,
) -> CubeTensor<R> {
    let (grad, argmax) = (into_contiguous(grad), into_contiguous(argmax));
    input_grad::<R, F>(&grad, &argmax, window(pool), dims4(&x))
}

/// The gradient of a max-pool's input of `shape`, from the pooled gradient `grad`
/// (contiguous) through `argmax`: a 2×2 block per unit under the 2×2 stride-2 pool, else
/// gathered over the windows covering each position.
pub(crate) fn input_grad<R: CubeRuntime, F: FloatElement>(
    grad: &CubeTensor<R>,
    argmax: &CubeTensor<R>,
    window: Window,
    shape: [usize; 4],
) -> CubeTensor<R> {
    let x_grad = empty_like(grad, shape, F::dtype());
    let (grad_arg, argmax_arg) = (
        grad.clone().into_array_arg(),
        argmax.clone().into_array_arg(),
    );
    let argmax_type = argmax_storage(Some(argmax));
    if window.is_2x2_tiling() {
        let [n, c, h, w] = shape;
        let (count, dim) = elementwise_over(&x_grad.client, n * c * h.div_ceil(2) * w.div_ceil(2));
        launch!(max_pool2x2_backward::<F, R>(
            &x_grad,
            count,
            dim,
            grad_arg,
            argmax_arg,
            x_grad.clone().into_array_arg(),
            nchw(grad),
            nchw(&x_grad),
            argmax_type,
        ));
    } else {
        let (count, dim) = elementwise(&x_grad);
        launch!(max_pool2d_backward::<F, R>(
            &x_grad,
            count,
            dim,
            grad_arg,
            argmax_arg,
            x_grad.clone().into_array_arg(),
            nchw(grad),
            nchw(&x_grad),
            window,
            argmax_type,
        ));
    }
    x_grad
}

/// The kernels' window of a pool.
pub(crate) fn window(pool: PoolOptions2d) -> Window {
    Window::new(pool.kernel, pool.stride, pool.padding)
}

/// The identity "pool" used when a gradient is not routed through an argmax.
pub(crate) fn no_pool() -> Window {
    Window::new([1, 1], [1, 1], [0, 0])
}

/// The argmax element type: `u8` where the runtime has 8-bit integers, else `u32`.
pub(crate) fn argmax_dtype<R: CubeRuntime>(client: &ComputeClient<R>) -> (DType, StorageType) {
    let u8_type = u8::as_type_native_unchecked().storage_type();
    if client.properties().supports_type(u8_type) {
        (DType::U8, u8_type)
    } else {
        (DType::U32, u32::as_type_native_unchecked().storage_type())
    }
}

/// Storage type of an optional argmax; kernels without one still need a type for it.
pub(crate) fn argmax_storage<R: CubeRuntime>(argmax: Option<&CubeTensor<R>>) -> StorageType {
    match argmax.map_or(DType::U8, |a| a.dtype) {
        DType::U8 => u8::as_type_native_unchecked().storage_type(),
        DType::U32 => u32::as_type_native_unchecked().storage_type(),
        other => panic!("argmax tensors are u8 or u32, got {other:?}"),
    }
}
