//! The tensor-level functions model code calls: each wraps one [`KernelBackend`] op in Burn
//! `Tensor`s, so that models stay generic over the backend and never touch primitives.

use burn::prelude::*;
use burn::tensor::TensorPrimitive;
use burn::tensor::ops::FloatTensor;

use crate::{ConvOptions2d, DenseActivation, KernelBackend, PoolOptions2d};

pub(crate) fn float<B: Backend, const D: usize>(tensor: Tensor<B, D>) -> FloatTensor<B> {
    tensor.into_primitive().tensor()
}

pub(crate) fn from_float<B: Backend, const D: usize>(primitive: FloatTensor<B>) -> Tensor<B, D> {
    Tensor::from_primitive(TensorPrimitive::Float(primitive))
}

/// 2-D convolution of `x` `[N, C_in, H, W]` with `weight` `[C_out, C_in, KH, KW]`.
pub fn conv2d<B: KernelBackend>(
    x: Tensor<B, 4>,
    weight: Tensor<B, 4>,
    bias: Option<Tensor<B, 1>>,
    options: ConvOptions2d,
) -> Tensor<B, 4> {
    from_float(B::conv(float(x), float(weight), bias.map(float), options).0)
}

/// Max-pool of `x` and the in-window argmax of each output (see the crate docs).
pub fn max_pool2d_with_argmax<B: KernelBackend>(
    x: Tensor<B, 4>,
    pool: PoolOptions2d,
) -> (Tensor<B, 4>, Tensor<B, 4, Int>) {
    let (output, argmax) = B::max_pool_with_argmax(float(x), pool);
    (from_float(output), Tensor::from_primitive(argmax))
}

/// Max-pool of `x`.
pub fn max_pool2d<B: KernelBackend>(x: Tensor<B, 4>, pool: PoolOptions2d) -> Tensor<B, 4> {
    max_pool2d_with_argmax(x, pool).0
}

/// max-pool(ReLU(conv(x) + bias)) and its argmax, in one pass that never stores the
/// full-resolution conv output.
pub fn conv_relu_pool_with_argmax<B: KernelBackend>(
    x: Tensor<B, 4>,
    weight: Tensor<B, 4>,
    bias: Option<Tensor<B, 1>>,
    conv: ConvOptions2d,
    pool: PoolOptions2d,
) -> (Tensor<B, 4>, Tensor<B, 4, Int>) {
    let (output, argmax, _) =
        B::conv_relu_pool(float(x), float(weight), bias.map(float), conv, pool);
    (from_float(output), Tensor::from_primitive(argmax))
}

/// max-pool(ReLU(conv(x) + bias)) in one pass.
pub fn conv_relu_pool<B: KernelBackend>(
    x: Tensor<B, 4>,
    weight: Tensor<B, 4>,
    bias: Option<Tensor<B, 1>>,
    conv: ConvOptions2d,
    pool: PoolOptions2d,
) -> Tensor<B, 4> {
    conv_relu_pool_with_argmax(x, weight, bias, conv, pool).0
}

/// Mean softmax cross-entropy of class `logits` `[N, C]` against `targets` `[N]`, in one
/// kernel forward and one backward where the backend has them (Burn's `CrossEntropyLoss`
/// with its defaults computes the same value from about ten ops each way).
pub fn cross_entropy<B: KernelBackend>(
    logits: Tensor<B, 2>,
    targets: Tensor<B, 1, Int>,
) -> Tensor<B, 1> {
    from_float(B::cross_entropy(float(logits), targets.into_primitive()))
}

/// Dense layer `x · weightᵀ + bias`: `x` `[M, inputs]`, `weight` `[outputs, inputs]` (one
/// row per output, as in PyTorch's and candle's `Linear`), `bias` `[outputs]`.
pub fn dense<B: KernelBackend>(
    x: Tensor<B, 2>,
    weight: Tensor<B, 2>,
    bias: Option<Tensor<B, 1>>,
) -> Tensor<B, 2> {
    dense_with(x, weight, bias, DenseActivation::Identity)
}

/// ReLU(x · weightᵀ + bias), the activation applied by the dense kernels themselves (no
/// launch of its own forward or backward where the backend has them).
pub fn dense_relu<B: KernelBackend>(
    x: Tensor<B, 2>,
    weight: Tensor<B, 2>,
    bias: Option<Tensor<B, 1>>,
) -> Tensor<B, 2> {
    dense_with(x, weight, bias, DenseActivation::Relu)
}

fn dense_with<B: KernelBackend>(
    x: Tensor<B, 2>,
    weight: Tensor<B, 2>,
    bias: Option<Tensor<B, 1>>,
    activation: DenseActivation,
) -> Tensor<B, 2> {
    from_float(B::dense(
        float(x),
        float(weight),
        bias.map(float),
        activation,
    ))
}
