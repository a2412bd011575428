//! cubenet-kernels: convolution, max-pool with argmax, a fused conv·bias·ReLU·pool and a
//! dense layer as a Burn backend extension.
//!
//! [`KernelBackend`] adds these ops to a Burn backend. Its default bodies are Burn's own
//! ops ([`reference`]), so every backend (Burn's fused CUDA/wgpu, …) runs them; the CubeCL
//! backend (`CubeBackend<R, F, I, BT>`, any runtime: CUDA, wgpu) overrides them with the
//! kernels in [`kernels`], NdArray with CPU kernels (`cpu/`), and `Autodiff<B>` wraps them
//! with backward passes built from the same trait. Model code calls the tensor-level
//! functions ([`conv2d`], [`conv_relu_pool`], [`dense`], …) and stays generic.
//!
//! # Argmax layout
//! A max-pool argmax is the position of the maximum *inside its window*, row-major:
//! `kh · window_w + kw` for the first maximum in row-major window order. On CubeCL backends
//! it is stored as `u8` where the runtime supports 8-bit integers (CUDA; wgpu on Vulkan,
//! whose SPIR-V compiler does), as `u32` elsewhere; other backends store it in their own
//! integer type. Windows are therefore limited to 255 positions. The fused
//! [`conv_relu_pool`] writes [`NO_ARGMAX`] where ReLU zeroed the pooled value.

mod autodiff;
mod cpu;
mod cube;
pub mod kernels;
mod options;
mod precision;
pub mod reference;
mod tensor_ops;
#[cfg(feature = "testing")]
pub mod testing;

use std::pin::Pin;

use burn::prelude::*;
use burn::tensor::TensorData;
use burn::tensor::backend::{AutodiffBackend, ExecutionError};
use burn::tensor::ops::{FloatTensor, IntTensor};

pub use kernels::geometry::NO_ARGMAX;
pub use options::{
    AdamStep, ConvOptions2d, DenseActivation, GradsWanted, MomentumStep, PoolOptions2d,
    window_output_size,
};
pub use precision::Precision;
pub use tensor_ops::{
    conv_relu_pool, conv_relu_pool_with_argmax, conv2d, cross_entropy, dense, dense_relu,
    max_pool2d, max_pool2d_with_argmax,
};

/// The CubeCL backend on CUDA, without Burn's fusion: where these kernels run.
#[cfg(feature = "cuda")]
pub type CubeCuda = burn_cubecl::CubeBackend<cubecl::cuda::CudaRuntime, f32, i32, u8>;

/// The CubeCL backend on wgpu (Vulkan, SPIR-V), without Burn's fusion.
#[cfg(feature = "wgpu")]
pub type CubeWgpu = burn_cubecl::CubeBackend<cubecl::wgpu::WgpuRuntime, f32, i32, u8>;

/// Gradients of a layer (convolution, fused conv·ReLU·pool, dense) with respect to its
/// inputs, as tensors `T` of a backend; `x` and `bias` are present only when asked for.
#[derive(Debug)]
pub struct LayerGrads<T> {
    pub x: Option<T>,
    pub weight: T,
    pub bias: Option<T>,
}

/// The copy of a convolution's input that its forward made for its own kernels, returned
/// for the backward, whose weight gradient reads the same copy instead of making it again:
/// cubenet's CubeCL kernels in bf16 copy the input channels-last; `None` where the forward
/// made none (the backward then works from the input).
pub type InputCopy<B> = Option<FloatTensor<B>>;

/// A Burn backend with cubenet's convolution, pooling and dense ops. Images are NCHW;
/// filters are `[C_out, C_in, KH, KW]`; dense weights are `[outputs, inputs]`, one row per
/// output as in PyTorch's and candle's `Linear`. Every method has a default body made of
/// Burn's ops.
pub trait KernelBackend: Backend {
    /// The precision [`KernelBackend::conv`] and the fused layer multiply in on `device`
    /// when asked for `precision`: `precision` itself where the device has its matrix units,
    /// else [`Precision::Fp32`] (Burn's ops and the CPU kernels compute in fp32).
    fn conv_precision(precision: Precision, device: &Self::Device) -> Precision {
        let _ = (precision, device);
        Precision::Fp32
    }

    /// 2-D convolution with optional bias, and the [`InputCopy`] it made.
    fn conv(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        options: ConvOptions2d,
    ) -> (FloatTensor<Self>, InputCopy<Self>) {
        (reference::conv::<Self>(x, weight, bias, options), None)
    }

    /// Gradients of [`KernelBackend::conv`] given the output's gradient `grad` and the
    /// forward's `input_copy`.
    fn conv_backward(
        x: FloatTensor<Self>,
        input_copy: InputCopy<Self>,
        weight: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        options: ConvOptions2d,
        wants: GradsWanted,
    ) -> LayerGrads<FloatTensor<Self>> {
        let _ = input_copy;
        reference::conv_backward::<Self>(x, weight, grad, options, wants)
    }

    /// Max-pool, returning the pooled map and the in-window argmax.
    fn max_pool_with_argmax(
        x: FloatTensor<Self>,
        pool: PoolOptions2d,
    ) -> (FloatTensor<Self>, IntTensor<Self>) {
        reference::max_pool_with_argmax::<Self>(x, pool)
    }

    /// Gradient of the pool's input: each `grad` element goes to its window's argmax.
    fn max_pool_backward(
        x: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        argmax: IntTensor<Self>,
        pool: PoolOptions2d,
    ) -> FloatTensor<Self> {
        reference::max_pool_backward::<Self>(x, grad, argmax, pool)
    }

    /// max-pool(ReLU(conv(x) + bias)), returning the pooled map, the argmax ([`NO_ARGMAX`]
    /// where the pooled value is 0) and the [`InputCopy`] it made.
    fn conv_relu_pool(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        conv: ConvOptions2d,
        pool: PoolOptions2d,
    ) -> (FloatTensor<Self>, IntTensor<Self>, InputCopy<Self>) {
        let (output, argmax) = reference::conv_relu_pool::<Self>(x, weight, bias, conv, pool);
        (output, argmax, None)
    }

    /// Gradients of [`KernelBackend::conv_relu_pool`] from the pooled gradient, the argmax
    /// and the forward's `input_copy`.
    #[allow(clippy::too_many_arguments)]
    fn conv_relu_pool_backward(
        x: FloatTensor<Self>,
        input_copy: InputCopy<Self>,
        weight: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        argmax: IntTensor<Self>,
        conv: ConvOptions2d,
        pool: PoolOptions2d,
        wants: GradsWanted,
    ) -> LayerGrads<FloatTensor<Self>> {
        let _ = input_copy;
        reference::conv_relu_pool_backward::<Self>(x, weight, grad, argmax, conv, pool, wants)
    }

    /// Dense layer `activation(x · weightᵀ + bias)` for `x` `[M, inputs]`.
    fn dense(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        activation: DenseActivation,
    ) -> FloatTensor<Self> {
        reference::dense::<Self>(x, weight, bias, activation)
    }

    /// Gradients of [`KernelBackend::dense`] given the output's gradient `grad`;
    /// `relu_output` is the layer's output when its activation was ReLU (the gradient passes
    /// where it is positive).
    fn dense_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        relu_output: Option<FloatTensor<Self>>,
        wants: GradsWanted,
    ) -> LayerGrads<FloatTensor<Self>> {
        reference::dense_backward::<Self>(x, weight, grad, relu_output, wants)
    }

    /// Mean softmax cross-entropy of `logits` `[N, C]` against class indices `targets`
    /// `[N]`, as a one-element tensor (kept on the device: reading it is the caller's sync).
    fn cross_entropy(logits: FloatTensor<Self>, targets: IntTensor<Self>) -> FloatTensor<Self> {
        reference::cross_entropy::<Self>(logits, targets)
    }

    /// Gradient of [`KernelBackend::cross_entropy`] with respect to the logits, given the
    /// loss's own (one-element) gradient `grad`.
    fn cross_entropy_backward(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        reference::cross_entropy_backward::<Self>(logits, targets, grad)
    }

    /// Plain SGD step of a group of parameters (a model's: one launch where the backend
    /// has the kernel): `param − lr · g` for each, with `g = grad + weight_decay · param`
    /// (the L2 penalty's gradient folded in); `grads[i]` has `params[i]`'s shape.
    fn sgd_update(
        params: Vec<FloatTensor<Self>>,
        grads: Vec<FloatTensor<Self>>,
        lr: f64,
        weight_decay: f64,
    ) -> Vec<FloatTensor<Self>> {
        reference::sgd_update::<Self>(params, grads, lr, weight_decay)
    }

    /// SGD step with momentum μ of a group of parameters: for each, `(param − lr · d, v')`
    /// with `v' = μ · velocity + g`, `g` as in [`Self::sgd_update`], and the direction
    /// `d = v'` (or `g + μ · v'` with Nesterov's momentum); velocities and gradients have
    /// their parameter's shape. Returns the updated parameters and velocities.
    fn sgd_momentum_update(
        params: Vec<FloatTensor<Self>>,
        grads: Vec<FloatTensor<Self>>,
        velocities: Vec<FloatTensor<Self>>,
        step: MomentumStep,
    ) -> (Vec<FloatTensor<Self>>, Vec<FloatTensor<Self>>) {
        reference::sgd_momentum_update::<Self>(params, grads, velocities, step)
    }

    /// Adam step (Burn's, without AMSGrad) of a group of parameters at the same step count:
    /// for each, with `g` as in [`Self::sgd_update`],
    /// `m' = β1·m + (1−β1)·g`, `v' = β2·v + (1−β2)·g²` and
    /// `param − lr · (m'·c) / (√v' + ε·b)`, where `b = √(1−β2^t)` and `c = b / (1−β1^t)`
    /// ([`AdamStep`]). Moments have their parameter's shape (zeros before the first step).
    /// Returns the updated parameters, first moments and second moments.
    fn adam_update(
        params: Vec<FloatTensor<Self>>,
        grads: Vec<FloatTensor<Self>>,
        moments: AdamMoments<FloatTensor<Self>>,
        step: AdamStep,
    ) -> (Vec<FloatTensor<Self>>, AdamMoments<FloatTensor<Self>>) {
        reference::adam_update::<Self>(params, grads, moments, step)
    }

    /// `tensors` (at least one) in one new flat buffer, for one collective over all of them
    /// (a data-parallel step averages its gradients in one all-reduce); [`Self::unpack`]
    /// takes them back out. Where each lies is the backend's choice, read only by `unpack`:
    /// the default body concatenates them; the CubeCL backends copy them in one launch, each
    /// starting at the runtime's memory alignment, so that unpacking makes views, not
    /// copies. What lies between them is no value.
    fn pack(tensors: Vec<FloatTensor<Self>>) -> FloatTensor<Self> {
        reference::pack::<Self>(tensors)
    }

    /// The tensors of `shapes`, in order, that [`Self::pack`] put into `packed` (or into
    /// what a collective made of that buffer: one of the same length and layout).
    fn unpack(packed: FloatTensor<Self>, shapes: Vec<Shape>) -> Vec<FloatTensor<Self>> {
        reference::unpack::<Self>(packed, shapes)
    }

    /// The values of `floats`, then of `ints`, when awaited, copied to the host behind the
    /// work launched so far. The default body reads them when awaited, as Burn's
    /// transactions do; the CubeCL backends queue the copies now, so that a read awaited
    /// later waits for the work launched before this call only, not for what was launched
    /// in between (burn-train reads a training step's outputs after the next step's
    /// backward pass has been queued).
    fn read_early(floats: Vec<FloatTensor<Self>>, ints: Vec<IntTensor<Self>>) -> PendingRead {
        reference::read_early::<Self>(floats, ints)
    }
}

/// Tensor values on their way to the host: see [`KernelBackend::read_early`].
pub type PendingRead =
    Pin<Box<dyn Future<Output = Result<Vec<TensorData>, ExecutionError>> + Send>>;

/// Adam's first and second moments of a group of parameters, one tensor each per parameter.
#[derive(Debug, Clone)]
pub struct AdamMoments<T> {
    pub first: Vec<T>,
    pub second: Vec<T>,
}

/// An autodiff backend whose inner backend also has the kernels: what training needs.
pub trait AutodiffKernelBackend:
    KernelBackend + AutodiffBackend<InnerBackend: KernelBackend>
{
}

impl<B> AutodiffKernelBackend for B where
    B: KernelBackend + AutodiffBackend<InnerBackend: KernelBackend>
{
}
