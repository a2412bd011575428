//! The ops of [`KernelBackend`](crate::KernelBackend) written with Burn's own tensor ops:
//! the default bodies (what NdArray and other non-CubeCL backends run) and the reference
//! the kernels are tested against.

use burn::prelude::*;
use burn::tensor::activation::{log_softmax, relu, softmax};
use burn::tensor::module;
use burn::tensor::ops::{ConvOptions, FloatTensor, IntTensor};
use burn::tensor::{Slice, TensorMetadata};

use crate::tensor_ops::{float, from_float};
use crate::{
    AdamMoments, AdamStep, ConvOptions2d, DenseActivation, GradsWanted, LayerGrads, MomentumStep,
    NO_ARGMAX, PendingRead, PoolOptions2d,
};

fn burn_conv_options(options: ConvOptions2d) -> ConvOptions<2> {
    ConvOptions::new(options.stride, options.padding, [1, 1], 1)
}

pub fn conv<B: Backend>(
    x: FloatTensor<B>,
    weight: FloatTensor<B>,
    bias: Option<FloatTensor<B>>,
    options: ConvOptions2d,
) -> FloatTensor<B> {
    B::conv2d(x, weight, bias, burn_conv_options(options))
}

pub fn conv_backward<B: Backend>(
    x: FloatTensor<B>,
    weight: FloatTensor<B>,
    grad: FloatTensor<B>,
    options: ConvOptions2d,
    wants: GradsWanted,
) -> LayerGrads<FloatTensor<B>> {
    let burn_options = burn_conv_options(options);
    let bias = wants.bias.then(|| {
        let grad = from_float::<B, 4>(grad.clone());
        let channels = grad.dims()[1];
        float(grad.sum_dim(0).sum_dim(2).sum_dim(3).reshape([channels]))
    });
    let x_grad = wants.x.then(|| {
        B::conv2d_x_backward(
            x.clone(),
            weight.clone(),
            grad.clone(),
            burn_options.clone(),
        )
    });
    LayerGrads {
        x: x_grad,
        weight: B::conv2d_weight_backward(x, weight, grad, burn_options),
        bias,
    }
}

/// Top-left input coordinate of each pooling window along one axis: `o·stride − pad`,
/// shaped to broadcast over `[N, C, OH, OW]` along `axis` (2 or 3).
fn window_origins<B: Backend>(
    outputs: usize,
    stride: usize,
    pad: usize,
    axis: usize,
    device: &B::Device,
) -> Tensor<B, 4, Int> {
    let origins = Tensor::<B, 1, Int>::arange(0..outputs as i64, device)
        .mul_scalar(stride as i64)
        .sub_scalar(pad as i64);
    let mut shape = [1; 4];
    shape[axis] = outputs;
    origins.reshape(shape)
}

/// Converts flat indices into the input plane (`ih·W + iw`, Burn's layout) to in-window
/// offsets (`kh·KW + kw`, ours).
fn plane_index_to_offset<B: Backend>(
    indices: Tensor<B, 4, Int>,
    input_w: usize,
    pool: PoolOptions2d,
) -> Tensor<B, 4, Int> {
    let [_, _, out_h, out_w] = indices.dims();
    let device = indices.device();
    let rows = window_origins::<B>(out_h, pool.stride[0], pool.padding[0], 2, &device);
    let cols = window_origins::<B>(out_w, pool.stride[1], pool.padding[1], 3, &device);
    let kh = indices.clone().div_scalar(input_w as i64) - rows;
    let kw = indices.remainder_scalar(input_w as i64) - cols;
    kh.mul_scalar(pool.kernel[1] as i64) + kw
}

/// Converts in-window offsets back to flat plane indices; entries equal to [`NO_ARGMAX`]
/// map to index 0 (callers zero their gradient).
fn offset_to_plane_index<B: Backend>(
    argmax: Tensor<B, 4, Int>,
    input_w: usize,
    pool: PoolOptions2d,
) -> Tensor<B, 4, Int> {
    let [_, _, out_h, out_w] = argmax.dims();
    let device = argmax.device();
    let rows = window_origins::<B>(out_h, pool.stride[0], pool.padding[0], 2, &device);
    let cols = window_origins::<B>(out_w, pool.stride[1], pool.padding[1], 3, &device);
    let none = argmax.clone().equal_elem(NO_ARGMAX as i64);
    let ih = argmax.clone().div_scalar(pool.kernel[1] as i64) + rows;
    let iw = argmax.remainder_scalar(pool.kernel[1] as i64) + cols;
    (ih.mul_scalar(input_w as i64) + iw).mask_fill(none, 0)
}

pub fn max_pool_with_argmax<B: Backend>(
    x: FloatTensor<B>,
    pool: PoolOptions2d,
) -> (FloatTensor<B>, IntTensor<B>) {
    let x = from_float::<B, 4>(x);
    let input_w = x.dims()[3];
    let (output, indices) =
        module::max_pool2d_with_indices(x, pool.kernel, pool.stride, pool.padding, [1, 1], false);
    let argmax = plane_index_to_offset(indices, input_w, pool);
    (float(output), argmax.into_primitive())
}

/// Scatters `grad` `[N, C, OH, OW]` into a zero map of `shape`, each element added at
/// its flat plane index.
fn scatter_to_plane<B: Backend>(
    grad: Tensor<B, 4>,
    plane_indices: Tensor<B, 4, Int>,
    shape: [usize; 4],
) -> Tensor<B, 4> {
    let [n, c, h, w] = shape;
    let [_, _, out_h, out_w] = grad.dims();
    let flat_grad = grad.reshape([n, c, out_h * out_w]);
    let flat_indices = plane_indices.reshape([n, c, out_h * out_w]);
    Tensor::<B, 3>::zeros([n, c, h * w], &flat_grad.device())
        .scatter(
            2,
            flat_indices,
            flat_grad,
            burn::tensor::IndexingUpdateOp::Add,
        )
        .reshape(shape)
}

pub fn max_pool_backward<B: Backend>(
    x: FloatTensor<B>,
    grad: FloatTensor<B>,
    argmax: IntTensor<B>,
    pool: PoolOptions2d,
) -> FloatTensor<B> {
    let shape = from_float::<B, 4>(x).dims();
    let indices = offset_to_plane_index::<B>(Tensor::from_primitive(argmax), shape[3], pool);
    float(scatter_to_plane(from_float(grad), indices, shape))
}

pub fn conv_relu_pool<B: Backend>(
    x: FloatTensor<B>,
    weight: FloatTensor<B>,
    bias: Option<FloatTensor<B>>,
    conv_options: ConvOptions2d,
    pool: PoolOptions2d,
) -> (FloatTensor<B>, IntTensor<B>) {
    let activated = from_float::<B, 4>(conv::<B>(x, weight, bias, conv_options)).clamp_min(0.0);
    let (output, argmax) = max_pool_with_argmax::<B>(float(activated), pool);
    let output = from_float::<B, 4>(output);
    let argmax = Tensor::<B, 4, Int>::from_primitive(argmax)
        .mask_fill(output.clone().lower_equal_elem(0.0), NO_ARGMAX as i64);
    (float(output), argmax.into_primitive())
}

#[allow(clippy::too_many_arguments)]
pub fn conv_relu_pool_backward<B: Backend>(
    x: FloatTensor<B>,
    weight: FloatTensor<B>,
    grad: FloatTensor<B>,
    argmax: IntTensor<B>,
    conv_options: ConvOptions2d,
    pool: PoolOptions2d,
    wants: GradsWanted,
) -> LayerGrads<FloatTensor<B>> {
    let x_dims = from_float::<B, 4>(x.clone()).dims();
    let weight_dims = from_float::<B, 4>(weight.clone()).dims();
    let [conv_h, conv_w] =
        conv_options.output_size([x_dims[2], x_dims[3]], [weight_dims[2], weight_dims[3]]);
    let argmax = Tensor::<B, 4, Int>::from_primitive(argmax);
    // Windows whose maximum ReLU cut pass no gradient.
    let grad = from_float::<B, 4>(grad).mask_fill(argmax.clone().equal_elem(NO_ARGMAX as i64), 0.0);
    let indices = offset_to_plane_index(argmax, conv_w, pool);
    let conv_grad = scatter_to_plane(grad, indices, [x_dims[0], weight_dims[0], conv_h, conv_w]);
    conv_backward::<B>(x, weight, float(conv_grad), conv_options, wants)
}

pub fn dense<B: Backend>(
    x: FloatTensor<B>,
    weight: FloatTensor<B>,
    bias: Option<FloatTensor<B>>,
    activation: DenseActivation,
) -> FloatTensor<B> {
    let mut y = from_float::<B, 2>(x).matmul(from_float::<B, 2>(weight).transpose());
    if let Some(bias) = bias {
        y = y + from_float::<B, 1>(bias).unsqueeze();
    }
    match activation {
        DenseActivation::Identity => float(y),
        DenseActivation::Relu => float(relu(y)),
    }
}

pub fn dense_backward<B: Backend>(
    x: FloatTensor<B>,
    weight: FloatTensor<B>,
    grad: FloatTensor<B>,
    relu_output: Option<FloatTensor<B>>,
    wants: GradsWanted,
) -> LayerGrads<FloatTensor<B>> {
    let mut grad = from_float::<B, 2>(grad);
    if let Some(y) = relu_output {
        grad = grad.mask_fill(from_float::<B, 2>(y).lower_equal_elem(0.0), 0.0);
    }
    let x_grad = wants
        .x
        .then(|| float(grad.clone().matmul(from_float::<B, 2>(weight))));
    let bias = wants
        .bias
        .then(|| float(grad.clone().sum_dim(0).squeeze_dim::<1>(0)));
    LayerGrads {
        x: x_grad,
        weight: float(grad.transpose().matmul(from_float::<B, 2>(x))),
        bias,
    }
}

pub fn cross_entropy<B: Backend>(logits: FloatTensor<B>, targets: IntTensor<B>) -> FloatTensor<B> {
    let logits = from_float::<B, 2>(logits);
    let [rows, _] = logits.dims();
    let targets = Tensor::<B, 1, Int>::from_primitive(targets).reshape([rows, 1]);
    float(log_softmax(logits, 1).gather(1, targets).mean().neg())
}

pub fn cross_entropy_backward<B: Backend>(
    logits: FloatTensor<B>,
    targets: IntTensor<B>,
    grad: FloatTensor<B>,
) -> FloatTensor<B> {
    let logits = from_float::<B, 2>(logits);
    let [rows, classes] = logits.dims();
    let device = logits.device();
    let targets = Tensor::<B, 1, Int>::from_primitive(targets)
        .reshape([rows, 1])
        .expand([rows, classes]);
    let classes = Tensor::<B, 1, Int>::arange(0..classes as i64, &device)
        .reshape([1, classes])
        .expand([rows, classes]);
    let one_hot = targets.equal(classes).float();
    let scale = from_float::<B, 1>(grad)
        .reshape([1, 1])
        .div_scalar(rows as f64);
    float((softmax(logits, 1) - one_hot) * scale)
}

pub fn sgd_update<B: Backend>(
    params: Vec<FloatTensor<B>>,
    grads: Vec<FloatTensor<B>>,
    lr: f64,
    weight_decay: f64,
) -> Vec<FloatTensor<B>> {
    let grads = with_weight_decay::<B>(&params, grads, weight_decay);
    step::<B>(params, grads, lr)
}

pub fn sgd_momentum_update<B: Backend>(
    params: Vec<FloatTensor<B>>,
    grads: Vec<FloatTensor<B>>,
    velocities: Vec<FloatTensor<B>>,
    sgd: MomentumStep,
) -> (Vec<FloatTensor<B>>, Vec<FloatTensor<B>>) {
    let grads = with_weight_decay::<B>(&params, grads, sgd.weight_decay);
    let mut new_velocities = Vec::new();
    let mut directions = Vec::new();
    for (velocity, grad) in velocities.into_iter().zip(grads) {
        let velocity = B::float_add(
            B::float_mul_scalar(velocity, sgd.momentum.into()),
            grad.clone(),
        );
        directions.push(match sgd.nesterov {
            true => B::float_add(
                grad,
                B::float_mul_scalar(velocity.clone(), sgd.momentum.into()),
            ),
            false => velocity.clone(),
        });
        new_velocities.push(velocity);
    }
    (step::<B>(params, directions, sgd.lr), new_velocities)
}

pub fn adam_update<B: Backend>(
    params: Vec<FloatTensor<B>>,
    grads: Vec<FloatTensor<B>>,
    moments: AdamMoments<FloatTensor<B>>,
    adam: AdamStep,
) -> (Vec<FloatTensor<B>>, AdamMoments<FloatTensor<B>>) {
    let grads = with_weight_decay::<B>(&params, grads, adam.weight_decay.into());
    let (beta_1, beta_2) = (adam.beta_1, adam.beta_2);
    let (factor, epsilon) = (adam.moment_factor(), adam.scaled_epsilon());
    let mut new = AdamMoments {
        first: Vec::new(),
        second: Vec::new(),
    };
    let mut directions = Vec::new();
    let operands = grads.into_iter().zip(moments.first).zip(moments.second);
    for ((grad, first), second) in operands {
        let first = B::float_add(
            B::float_mul_scalar(first, beta_1.into()),
            B::float_mul_scalar(grad.clone(), (1.0 - beta_1).into()),
        );
        let second = B::float_add(
            B::float_mul_scalar(second, beta_2.into()),
            B::float_mul_scalar(B::float_mul(grad.clone(), grad), (1.0 - beta_2).into()),
        );
        directions.push(B::float_div(
            B::float_mul_scalar(first.clone(), factor.into()),
            B::float_add_scalar(B::float_sqrt(second.clone()), epsilon.into()),
        ));
        new.first.push(first);
        new.second.push(second);
    }
    (step::<B>(params, directions, adam.lr), new)
}

/// `grad + λ · param` for each parameter, as Burn's `WeightDecay` computes it (λ = 0: the
/// gradients as they are).
fn with_weight_decay<B: Backend>(
    params: &[FloatTensor<B>],
    grads: Vec<FloatTensor<B>>,
    weight_decay: f64,
) -> Vec<FloatTensor<B>> {
    if weight_decay == 0.0 {
        return grads;
    }
    params
        .iter()
        .zip(grads)
        .map(|(param, grad)| {
            B::float_add(
                B::float_mul_scalar(param.clone(), weight_decay.into()),
                grad,
            )
        })
        .collect()
}

/// `param − lr · direction` for each parameter.
fn step<B: Backend>(
    params: Vec<FloatTensor<B>>,
    directions: Vec<FloatTensor<B>>,
    lr: f64,
) -> Vec<FloatTensor<B>> {
    params
        .into_iter()
        .zip(directions)
        .map(|(param, direction)| B::float_sub(param, B::float_mul_scalar(direction, lr.into())))
        .collect()
}

/// Each tensor flattened, one after the other.
pub fn pack<B: Backend>(tensors: Vec<FloatTensor<B>>) -> FloatTensor<B> {
    let flat = tensors
        .into_iter()
        .map(|t| {
            let elements = t.shape().num_elements();
            B::float_reshape(t, Shape::new([elements]))
        })
        .collect();
    B::float_cat(flat, 0)
}

/// [`pack`]'s tensors back: a slice of `packed` each, in order.
pub fn unpack<B: Backend>(packed: FloatTensor<B>, shapes: Vec<Shape>) -> Vec<FloatTensor<B>> {
    let mut start = 0;
    shapes
        .into_iter()
        .map(|shape| {
            let end = start + shape.num_elements();
            let slice = B::float_slice(packed.clone(), &[Slice::from(start..end)]);
            start = end;
            B::float_reshape(slice, shape)
        })
        .collect()
}

/// The values of `floats`, then of `ints`, read when awaited.
pub fn read_early<B: Backend>(floats: Vec<FloatTensor<B>>, ints: Vec<IntTensor<B>>) -> PendingRead {
    Box::pin(async move {
        let mut values = Vec::with_capacity(floats.len() + ints.len());
        for tensor in floats {
            values.push(B::float_into_data(tensor).await?);
        }
        for tensor in ints {
            values.push(B::int_into_data(tensor).await?);
        }
        Ok(values)
    })
}
