//! Each op of the seed CNN's conv layer, forward and backward, by cubenet's kernels and by
//! Burn's, on the same backend and the same data.

use burn::prelude::*;
use burn::tensor::Distribution;
use burn::tensor::ops::{ConvOptions, FloatTensor};
use cubenet_kernels::{ConvOptions2d, GradsWanted, KernelBackend, PoolOptions2d};
use serde::Serialize;

use super::timing::{Timing, time_synced};

/// One op timed both ways.
#[derive(Debug, Clone, Serialize)]
pub struct OpComparison {
    pub op: String,
    pub custom: Timing,
    pub burn: Timing,
}

impl OpComparison {
    /// How many times faster the custom kernel is.
    pub fn speedup(&self) -> f64 {
        self.burn.median_ms / self.custom.median_ms
    }
}

fn random<B: Backend>(shape: [usize; 4], device: &B::Device) -> FloatTensor<B> {
    Tensor::<B, 4>::random(shape, Distribution::Normal(0.0, 1.0), device)
        .into_primitive()
        .tensor()
}

/// Times conv, max-pool and the fused block, forward and backward, for a conv 3x3
/// (1 → `filters`) over `batch` 28x28 images followed by a 2x2 pool: the seed CNN's layer.
pub fn compare_ops<B: KernelBackend>(
    device: &B::Device,
    batch: usize,
    filters: usize,
    warmup: usize,
    repeats: usize,
) -> Vec<OpComparison> {
    let conv = ConvOptions2d::new([1, 1], [0, 0]);
    let burn_conv = ConvOptions::new([1, 1], [0, 0], [1, 1], 1);
    let pool = PoolOptions2d::new([2, 2], [2, 2], [0, 0]);
    let x = random::<B>([batch, 1, 28, 28], device);
    let weight = random::<B>([filters, 1, 3, 3], device);
    let bias = Tensor::<B, 1>::random([filters], Distribution::Default, device)
        .into_primitive()
        .tensor();
    let conv_out = B::conv2d(
        x.clone(),
        weight.clone(),
        Some(bias.clone()),
        burn_conv.clone(),
    );
    let conv_grad = random::<B>([batch, filters, 26, 26], device);
    let pooled_grad = random::<B>([batch, filters, 13, 13], device);
    let (_, argmax) = B::max_pool_with_argmax(conv_out.clone(), pool);
    let burn_indices =
        B::max_pool2d_with_indices(conv_out.clone(), [2, 2], [2, 2], [0, 0], [1, 1], false).indices;
    let (_, fused_argmax) =
        B::conv_relu_pool(x.clone(), weight.clone(), Some(bias.clone()), conv, pool);
    let weights_only = GradsWanted {
        x: false,
        bias: true,
    };

    let time = |op: &str, mut custom: Box<dyn FnMut() + '_>, mut burn: Box<dyn FnMut() + '_>| {
        OpComparison {
            op: op.to_string(),
            custom: time_synced::<B>(device, warmup, repeats, &mut *custom),
            burn: time_synced::<B>(device, warmup, repeats, &mut *burn),
        }
    };
    vec![
        time(
            "conv2d forward",
            Box::new(|| drop(B::conv(x.clone(), weight.clone(), Some(bias.clone()), conv))),
            Box::new(|| {
                drop(B::conv2d(
                    x.clone(),
                    weight.clone(),
                    Some(bias.clone()),
                    burn_conv.clone(),
                ))
            }),
        ),
        time(
            "conv2d backward (weight, bias)",
            Box::new(|| {
                drop(B::conv_backward(
                    x.clone(),
                    weight.clone(),
                    conv_grad.clone(),
                    conv,
                    weights_only,
                ))
            }),
            Box::new(|| {
                drop(B::conv2d_weight_backward(
                    x.clone(),
                    weight.clone(),
                    conv_grad.clone(),
                    burn_conv.clone(),
                ));
                drop(B::conv2d_bias_backward(
                    x.clone(),
                    bias.clone(),
                    conv_grad.clone(),
                ));
            }),
        ),
        time(
            "max-pool 2x2 forward (+argmax)",
            Box::new(|| drop(B::max_pool_with_argmax(conv_out.clone(), pool))),
            Box::new(|| {
                drop(B::max_pool2d_with_indices(
                    conv_out.clone(),
                    [2, 2],
                    [2, 2],
                    [0, 0],
                    [1, 1],
                    false,
                ))
            }),
        ),
        time(
            "max-pool 2x2 backward",
            Box::new(|| {
                drop(B::max_pool_backward(
                    conv_out.clone(),
                    pooled_grad.clone(),
                    argmax.clone(),
                    pool,
                ))
            }),
            Box::new(|| {
                drop(B::max_pool2d_with_indices_backward(
                    conv_out.clone(),
                    [2, 2],
                    [2, 2],
                    [0, 0],
                    [1, 1],
                    false,
                    pooled_grad.clone(),
                    burn_indices.clone(),
                ))
            }),
        ),
        time(
            "conv·bias·ReLU·pool forward",
            Box::new(|| {
                drop(B::conv_relu_pool(
                    x.clone(),
                    weight.clone(),
                    Some(bias.clone()),
                    conv,
                    pool,
                ))
            }),
            Box::new(|| {
                let y = B::conv2d(
                    x.clone(),
                    weight.clone(),
                    Some(bias.clone()),
                    burn_conv.clone(),
                );
                drop(B::max_pool2d_with_indices(
                    B::relu(y),
                    [2, 2],
                    [2, 2],
                    [0, 0],
                    [1, 1],
                    false,
                ));
            }),
        ),
        time(
            "conv·bias·ReLU·pool backward (weight, bias)",
            Box::new(|| {
                drop(B::conv_relu_pool_backward(
                    x.clone(),
                    weight.clone(),
                    pooled_grad.clone(),
                    fused_argmax.clone(),
                    conv,
                    pool,
                    weights_only,
                ))
            }),
            Box::new(|| {
                // Burn's chain: pool backward, ReLU mask, conv weight and bias backward.
                let activated = B::relu(conv_out.clone());
                let grad = B::max_pool2d_with_indices_backward(
                    activated.clone(),
                    [2, 2],
                    [2, 2],
                    [0, 0],
                    [1, 1],
                    false,
                    pooled_grad.clone(),
                    burn_indices.clone(),
                )
                .x_grad;
                let grad = B::relu_backward(activated, grad);
                drop(B::conv2d_weight_backward(
                    x.clone(),
                    weight.clone(),
                    grad.clone(),
                    burn_conv.clone(),
                ));
                drop(B::conv2d_bias_backward(x.clone(), bias.clone(), grad));
            }),
        ),
    ]
}
