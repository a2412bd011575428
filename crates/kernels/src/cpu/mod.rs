//! [`KernelBackend`] for Burn's NdArray backend (f32): CPU kernels for every op of a small
//! network's step — the convolution (alone and fused with ReLU and max-pool), the max-pool,
//! the dense layer, the softmax cross-entropy and the SGD updates — multi-threaded over
//! images, rows or elements with rayon, the products in `gemm`'s vectorized kernels.
//!
//! Tensors of another float type (NdArray can hold f64) keep the default bodies.

mod conv;
mod dense;
mod fused;
mod loss;
mod matmul;
mod pool;
mod tensor;
mod update;

use burn::backend::NdArray;
use burn::backend::ndarray::NdArrayTensor;
use burn::tensor::ops::{FloatTensor, IntTensor};

use crate::{
    AdamMoments, AdamStep, ConvOptions2d, DenseActivation, GradsWanted, InputCopy, KernelBackend,
    LayerGrads, MomentumStep, PoolOptions2d, reference,
};

impl KernelBackend for NdArray {
    fn conv(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        options: ConvOptions2d,
    ) -> (FloatTensor<Self>, InputCopy<Self>) {
        if !kernels_take(&x) {
            return (reference::conv::<Self>(x, weight, bias, options), None);
        }
        (conv::forward(&x, &weight, bias.as_ref(), options), None)
    }

    fn conv_backward(
        x: FloatTensor<Self>,
        _: InputCopy<Self>,
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
    ) -> (FloatTensor<Self>, IntTensor<Self>, InputCopy<Self>) {
        let (output, argmax) = if kernels_take(&x) {
            fused::forward(&x, &weight, bias.as_ref(), conv, pool)
        } else {
            reference::conv_relu_pool::<Self>(x, weight, bias, conv, pool)
        };
        (output, argmax, None)
    }

    fn conv_relu_pool_backward(
        x: FloatTensor<Self>,
        _: InputCopy<Self>,
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

    fn cross_entropy(logits: FloatTensor<Self>, targets: IntTensor<Self>) -> FloatTensor<Self> {
        if !kernels_take(&logits) {
            return reference::cross_entropy::<Self>(logits, targets);
        }
        loss::forward(&logits, &targets)
    }

    fn cross_entropy_backward(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        if !kernels_take(&logits) {
            return reference::cross_entropy_backward::<Self>(logits, targets, grad);
        }
        loss::backward(&logits, &targets, &grad)
    }

    fn sgd_update(
        params: Vec<FloatTensor<Self>>,
        grads: Vec<FloatTensor<Self>>,
        lr: f64,
        weight_decay: f64,
    ) -> Vec<FloatTensor<Self>> {
        if !params.iter().all(kernels_take) {
            return reference::sgd_update::<Self>(params, grads, lr, weight_decay);
        }
        update::sgd(&params, &grads, lr, weight_decay)
    }

    fn sgd_momentum_update(
        params: Vec<FloatTensor<Self>>,
        grads: Vec<FloatTensor<Self>>,
        velocities: Vec<FloatTensor<Self>>,
        step: MomentumStep,
    ) -> (Vec<FloatTensor<Self>>, Vec<FloatTensor<Self>>) {
        if !params.iter().all(kernels_take) {
            return reference::sgd_momentum_update::<Self>(params, grads, velocities, step);
        }
        update::sgd_momentum(&params, &grads, &velocities, step)
    }

    fn adam_update(
        params: Vec<FloatTensor<Self>>,
        grads: Vec<FloatTensor<Self>>,
        moments: AdamMoments<FloatTensor<Self>>,
        step: AdamStep,
    ) -> (Vec<FloatTensor<Self>>, AdamMoments<FloatTensor<Self>>) {
        let operands = [&params, &grads, &moments.first, &moments.second];
        if !operands.into_iter().flatten().all(kernels_take) {
            return reference::adam_update::<Self>(params, grads, moments, step);
        }
        update::adam(&params, &grads, &moments, step)
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
