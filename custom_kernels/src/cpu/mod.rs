//! [`KernelBackend`] for Burn's NdArray backend (f32): CPU kernels for the ops that dominate
//! a small network's step — the convolution (alone and fused with ReLU and max-pool), the
//! max-pool and the dense layer — multi-threaded over images or rows with rayon, their
//! arithmetic in `gemm`'s vectorized products. The loss and the SGD update keep the default
//! bodies (Burn's ops): a few element-wise passes over small tensors.
//!
//! Tensors of another float type (NdArray can hold f64) keep the default bodies.

mod conv;
mod dense;
mod fused;
mod matmul;
mod pool;
mod tensor;

use burn::backend::NdArray;
use burn::backend::ndarray::NdArrayTensor;
use burn::tensor::ops::{FloatTensor, IntTensor};

use crate::{
    ConvOptions2d, DenseActivation, GradsWanted, KernelBackend, LayerGrads, PoolOptions2d,
    reference,
};

impl KernelBackend for NdArray {
    fn conv(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        options: ConvOptions2d,
    ) -> FloatTensor<Self> {
        if !kernels_take(&x) {
            return reference::conv::<Self>(x, weight, bias, options);
        }
        conv::forward(&x, &weight, bias.as_ref(), options)
    }

    fn conv_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        options: ConvOptions2d,
        wants: GradsWanted,
    ) -> LayerGrads<FloatTensor<Self>> {
        if !kernels_take(&x) {
            return reference::conv_backward::<Self>(x, weight, grad, options, wants);
        }
        let geometry = conv::ConvGeometry::new(&x, &weight, options);
        let grad = tensor::values(&grad);
        let image_len = geometry.output_image_len();
        conv::backward(geometry, &x, &weight, wants, |index, image_grad| {
            image_grad.copy_from_slice(&grad[index * image_len..][..image_len]);
        })
    }

    fn max_pool_with_argmax(
        x: FloatTensor<Self>,
        pool: PoolOptions2d,
    ) -> (FloatTensor<Self>, IntTensor<Self>) {
        if !kernels_take(&x) {
            return reference::max_pool_with_argmax::<Self>(x, pool);
        }
        pool::forward(&x, pool)
    }

    fn max_pool_backward(
        x: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        argmax: IntTensor<Self>,
        pool: PoolOptions2d,
    ) -> FloatTensor<Self> {
        if !kernels_take(&x) {
            return reference::max_pool_backward::<Self>(x, grad, argmax, pool);
        }
        pool::backward(&x, &grad, &argmax, pool)
    }

    fn conv_relu_pool(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        conv: ConvOptions2d,
        pool: PoolOptions2d,
    ) -> (FloatTensor<Self>, IntTensor<Self>) {
        if !kernels_take(&x) {
            return reference::conv_relu_pool::<Self>(x, weight, bias, conv, pool);
        }
        fused::forward(&x, &weight, bias.as_ref(), conv, pool)
    }

    fn conv_relu_pool_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        argmax: IntTensor<Self>,
        conv: ConvOptions2d,
        pool: PoolOptions2d,
        wants: GradsWanted,
    ) -> LayerGrads<FloatTensor<Self>> {
        if !kernels_take(&x) {
            return reference::conv_relu_pool_backward::<Self>(
                x, weight, grad, argmax, conv, pool, wants,
            );
        }
        fused::backward(&x, &weight, &grad, &argmax, conv, pool, wants)
    }

    fn dense(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        activation: DenseActivation,
    ) -> FloatTensor<Self> {
        if !kernels_take(&x) {
            return reference::dense::<Self>(x, weight, bias, activation);
        }
        dense::forward(&x, &weight, bias.as_ref(), activation)
    }

    fn dense_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        relu_output: Option<FloatTensor<Self>>,
        wants: GradsWanted,
    ) -> LayerGrads<FloatTensor<Self>> {
        if !kernels_take(&x) {
            return reference::dense_backward::<Self>(x, weight, grad, relu_output, wants);
        }
        dense::backward(&x, &weight, &grad, relu_output.as_ref(), wants)
    }
}

/// Whether the CPU kernels take a call on `x`: f32 tensors, unless the tests asked for the
/// default bodies ([`crate::testing::with_default_bodies`]).
fn kernels_take(x: &NdArrayTensor) -> bool {
    #[cfg(feature = "testing")]
    if crate::testing::default_bodies() {
        return false;
    }
    matches!(x, NdArrayTensor::F32(_))
}
