//! Each op of the single-conv CNN's conv layer, and each conv·ReLU·pool block of a deeper
//! network, forward and backward, by cubenet's kernels and by Burn's, on the same backend and
//! the same data.

use burn::prelude::*;
use burn::tensor::Distribution;
use burn::tensor::ops::{ConvOptions, FloatTensor, IntTensor};
use cubenet_kernels::{
    AutodiffKernelBackend, ConvOptions2d, GradsWanted, KernelBackend, PoolOptions2d, reference,
};
use serde::Serialize;

use super::block_shape::BlockShape;
use super::sweep::BenchModel;
use super::timing::{Protocol, Timing, time_synced};
use crate::device::{BackendError, BackendKind, BackendTask, run_on};

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

/// What the kernel benchmark (`kernel_bench`) times on one device, at each batch size: the
/// single-conv CNN's ops at each filter count, or the CIFAR-shaped network's blocks.
#[derive(Debug, Clone)]
pub struct KernelBenchPlan {
    pub batches: Vec<usize>,
    pub filters: Vec<usize>,
    /// The CIFAR-shaped network's blocks instead of the single-conv CNN's ops.
    pub cifar: bool,
    pub protocol: Protocol,
}

/// The ops timed on one layer (or network) at one batch size.
#[derive(Debug, Clone, Serialize)]
pub struct OpSection {
    pub batch: usize,
    pub layer: String,
    pub ops: Vec<OpComparison>,
}

/// Runs `plan` on the backend `kind`; `progress` sees each section as it is timed. Not
/// generic, so that the benchmark's callers do not compile every op again for each backend
/// (generic code is compiled in the crate that names its concrete types).
pub fn compare_kernels_on(
    kind: BackendKind,
    plan: &KernelBenchPlan,
    progress: &mut dyn FnMut(&OpSection),
) -> Result<Vec<OpSection>, BackendError> {
    struct Task<'a> {
        plan: &'a KernelBenchPlan,
        progress: &'a mut dyn FnMut(&OpSection),
    }
    impl BackendTask for Task<'_> {
        type Output = Vec<OpSection>;

        fn run<B: AutodiffKernelBackend>(self, device: B::Device, _: BackendKind) -> Self::Output {
            let KernelBenchPlan {
                batches,
                filters,
                cifar,
                protocol,
            } = self.plan;
            let mut sections = Vec::new();
            for &batch in batches {
                let layers: Vec<(String, Vec<OpComparison>)> = if *cifar {
                    let blocks = BenchModel::cifar_blocks();
                    let ops = compare_blocks::<B::InnerBackend>(&device, batch, &blocks, *protocol);
                    vec![("CIFAR-shaped".to_string(), ops)]
                } else {
                    filters
                        .iter()
                        .map(|&d| {
                            let ops = compare_ops::<B::InnerBackend>(&device, batch, d, *protocol);
                            (format!("d={d}"), ops)
                        })
                        .collect()
                };
                for (layer, ops) in layers {
                    let section = OpSection { batch, layer, ops };
                    (self.progress)(&section);
                    sections.push(section);
                }
            }
            sections
        }
    }
    run_on(kind, Task { plan, progress })
}

/// The single-conv CNN's conv layer on random data, with Burn's calls for each op.
struct SeedLayer<B: Backend> {
    x: FloatTensor<B>,
    weight: FloatTensor<B>,
    bias: FloatTensor<B>,
}

const CONV: ConvOptions2d = ConvOptions2d::new([1, 1], [0, 0]);
const POOL: PoolOptions2d = PoolOptions2d {
    kernel: [2, 2],
    stride: [2, 2],
    padding: [0, 0],
};

impl<B: KernelBackend> SeedLayer<B> {
    fn burn_conv(&self) -> FloatTensor<B> {
        let options = ConvOptions::new(CONV.stride, CONV.padding, [1, 1], 1);
        B::conv2d(
            self.x.clone(),
            self.weight.clone(),
            Some(self.bias.clone()),
            options,
        )
    }

    fn burn_conv_weight_bias_grads(&self, grad: FloatTensor<B>) {
        let options = ConvOptions::new(CONV.stride, CONV.padding, [1, 1], 1);
        drop(B::conv2d_weight_backward(
            self.x.clone(),
            self.weight.clone(),
            grad.clone(),
            options,
        ));
        drop(B::conv2d_bias_backward(
            self.x.clone(),
            self.bias.clone(),
            grad,
        ));
    }

    fn burn_pool(&self, x: FloatTensor<B>) -> (FloatTensor<B>, IntTensor<B>) {
        let pooled =
            B::max_pool2d_with_indices(x, POOL.kernel, POOL.stride, POOL.padding, [1, 1], false);
        (pooled.output, pooled.indices)
    }

    fn burn_pool_grad(
        &self,
        x: FloatTensor<B>,
        grad: FloatTensor<B>,
        indices: IntTensor<B>,
    ) -> FloatTensor<B> {
        let (kernel, stride, padding) = (POOL.kernel, POOL.stride, POOL.padding);
        B::max_pool2d_with_indices_backward(
            x,
            kernel,
            stride,
            padding,
            [1, 1],
            false,
            grad,
            indices,
        )
        .x_grad
    }
}

fn random<B: Backend, const D: usize>(shape: [usize; D], device: &B::Device) -> FloatTensor<B> {
    Tensor::<B, D>::random(shape, Distribution::Normal(0.0, 1.0), device)
        .into_primitive()
        .tensor()
}

/// Times conv, max-pool and the fused block, forward and backward, for a conv 3x3
/// (1 → `filters`) over `batch` 28x28 images followed by a 2x2 pool: the single-conv CNN's layer.
pub fn compare_ops<B: KernelBackend>(
    device: &B::Device,
    batch: usize,
    filters: usize,
    protocol: Protocol,
) -> Vec<OpComparison> {
    let layer = SeedLayer::<B> {
        x: random::<B, 4>([batch, 1, 28, 28], device),
        weight: random::<B, 4>([filters, 1, 3, 3], device),
        bias: random::<B, 1>([filters], device),
    };
    let (x, weight, bias) = (&layer.x, &layer.weight, &layer.bias);
    let conv_out = layer.burn_conv();
    let activated = B::relu(conv_out.clone());
    let conv_grad = random::<B, 4>([batch, filters, 26, 26], device);
    let pooled_grad = random::<B, 4>([batch, filters, 13, 13], device);
    let (_, argmax) = B::max_pool_with_argmax(conv_out.clone(), POOL);
    let (_, burn_indices) = layer.burn_pool(conv_out.clone());
    // The backward ops take what training hands them: the forward's copy of the input, if
    // it made one.
    let (_, conv_copy) = B::conv(x.clone(), weight.clone(), Some(bias.clone()), CONV);
    let (_, fused_argmax, fused_copy) =
        B::conv_relu_pool(x.clone(), weight.clone(), Some(bias.clone()), CONV, POOL);
    let weights_only = GradsWanted {
        x: false,
        bias: true,
    };

    let time = |op: &str, mut custom: Box<dyn FnMut() + '_>, mut burn: Box<dyn FnMut() + '_>| {
        OpComparison {
            op: op.to_string(),
            custom: time_synced::<B>(device, protocol, &mut *custom),
            burn: time_synced::<B>(device, protocol, &mut *burn),
        }
    };
    vec![
        time(
            "conv2d forward",
            Box::new(|| drop(B::conv(x.clone(), weight.clone(), Some(bias.clone()), CONV))),
            Box::new(|| drop(layer.burn_conv())),
        ),
        time(
            "conv2d backward (weight, bias)",
            Box::new(|| {
                drop(B::conv_backward(
                    x.clone(),
                    conv_copy.clone(),
                    weight.clone(),
                    conv_grad.clone(),
                    CONV,
                    weights_only,
                ))
            }),
            Box::new(|| layer.burn_conv_weight_bias_grads(conv_grad.clone())),
        ),
        time(
            "max-pool 2x2 forward (+argmax)",
            Box::new(|| drop(B::max_pool_with_argmax(conv_out.clone(), POOL))),
            Box::new(|| drop(layer.burn_pool(conv_out.clone()))),
        ),
        time(
            "max-pool 2x2 backward",
            Box::new(|| {
                drop(B::max_pool_backward(
                    conv_out.clone(),
                    pooled_grad.clone(),
                    argmax.clone(),
                    POOL,
                ))
            }),
            Box::new(|| {
                drop(layer.burn_pool_grad(
                    conv_out.clone(),
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
                    CONV,
                    POOL,
                ))
            }),
            Box::new(|| drop(layer.burn_pool(B::relu(layer.burn_conv())))),
        ),
        time(
            "conv·bias·ReLU·pool backward (weight, bias)",
            Box::new(|| {
                let grad = pooled_grad.clone();
                drop(B::conv_relu_pool_backward(
                    x.clone(),
                    fused_copy.clone(),
                    weight.clone(),
                    grad,
                    fused_argmax.clone(),
                    CONV,
                    POOL,
                    weights_only,
                ))
            }),
            Box::new(|| {
                // Burn's chain: pool backward, ReLU mask, conv weight and bias backward.
                let grad = layer.burn_pool_grad(
                    activated.clone(),
                    pooled_grad.clone(),
                    burn_indices.clone(),
                );
                layer.burn_conv_weight_bias_grads(B::relu_backward(activated.clone(), grad));
            }),
        ),
    ]
}

/// Times each of `blocks` (a network's, in order) forward and backward together, as a
/// training step runs it: the fused forward, then the weight, bias and — for every block
/// but the first, which is fed with data — input gradients from a random pooled gradient;
/// cubenet's kernels against Burn's chain of ops (conv, ReLU, max-pool and their backward).
pub fn compare_blocks<B: KernelBackend>(
    device: &B::Device,
    batch: usize,
    blocks: &[BlockShape],
    protocol: Protocol,
) -> Vec<OpComparison> {
    blocks
        .iter()
        .enumerate()
        .map(|(index, block)| {
            let [c, h, w] = block.input;
            let [f, k] = [block.filters, block.kernel];
            let x = random::<B, 4>([batch, c, h, w], device);
            let weight = random::<B, 4>([f, c, k, k], device);
            let bias = random::<B, 1>([f], device);
            let [_, pooled_h, pooled_w] = block.output();
            let grad = random::<B, 4>([batch, f, pooled_h, pooled_w], device);
            let conv = block.conv();
            let wants = GradsWanted {
                x: index > 0,
                bias: true,
            };
            // One block's forward then backward, by either implementation of the ops; the
            // kernels' backward with the forward's copy of the input, as in training.
            let custom = time_synced::<B>(device, protocol, || {
                let bias = Some(bias.clone());
                let (_, argmax, copy) =
                    B::conv_relu_pool(x.clone(), weight.clone(), bias, conv, POOL);
                let (x, weight, grad) = (x.clone(), weight.clone(), grad.clone());
                drop(B::conv_relu_pool_backward(
                    x, copy, weight, grad, argmax, conv, POOL, wants,
                ));
            });
            let burn = time_synced::<B>(device, protocol, || {
                let bias = Some(bias.clone());
                let (_, argmax) =
                    reference::conv_relu_pool::<B>(x.clone(), weight.clone(), bias, conv, POOL);
                let (x, weight, grad) = (x.clone(), weight.clone(), grad.clone());
                drop(reference::conv_relu_pool_backward::<B>(
                    x, weight, grad, argmax, conv, POOL, wants,
                ));
            });
            OpComparison {
                op: format!(
                    "block {}: conv {k}x{k} {c}→{f} on {h}x{w}, ReLU, pool: forward + backward",
                    index + 1
                ),
                custom,
                burn,
            }
        })
        .collect()
}
