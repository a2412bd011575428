//! cubenet-kernels: convolution, max-pool with argmax, a fused conv·bias·ReLU·pool and a
//! dense layer as a Burn backend extension.
//!
//! [`KernelBackend`] adds these ops to a Burn backend. Its default bodies are Burn's own
//! ops ([`reference`]), so every backend (Burn's fused CUDA/wgpu, …) runs them; the CubeCL
//! backend (`CubeBackend<R, F, I, BT>`, any runtime: CUDA, wgpu) overrides them with the
//! kernels in [`kernels`], NdArray with CPU kernels (`cpu/`), and `Autodiff<B>` wraps them
//! with backward passes built from the same trait. Model code calls the tensor-level
//! functions below and stays generic.
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
pub mod reference;
#[cfg(feature = "testing")]
pub mod testing;

use std::pin::Pin;

use burn::prelude::*;
use burn::tensor::backend::{AutodiffBackend, ExecutionError};
use burn::tensor::ops::{FloatTensor, IntTensor};
use burn::tensor::{TensorData, TensorPrimitive};

pub use kernels::geometry::NO_ARGMAX;

/// The CubeCL backend on CUDA, without Burn's fusion: where these kernels run.
#[cfg(feature = "cuda")]
pub type CubeCuda = burn_cubecl::CubeBackend<cubecl::cuda::CudaRuntime, f32, i32, u8>;

/// The CubeCL backend on wgpu (Vulkan, SPIR-V), without Burn's fusion.
#[cfg(feature = "wgpu")]
pub type CubeWgpu = burn_cubecl::CubeBackend<cubecl::wgpu::WgpuRuntime, f32, i32, u8>;

/// How a convolution's products are computed.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// fp32 multiply-adds, exact to fp32 rounding against the references.
    #[default]
    Fp32,
    /// The multi-channel GEMMs (forward, input and weight gradients) on the tensor cores,
    /// which read each fp32 operand as TF32 (10-bit mantissa) and accumulate in fp32, as
    /// PyTorch does with `allow_tf32`. Runtimes without TF32 matrix units (or an element
    /// type other than f32) compute in fp32, as does every other op.
    Tf32,
    /// The same GEMMs on the tensor cores with each operand rounded to bf16 (8-bit
    /// significand) and fp32 sums, as PyTorch's bf16 autocast multiplies; activations,
    /// weights, gradients and every other op stay fp32. Runtimes without bf16 matrix units
    /// (the CPU, Vulkan) compute in fp32.
    Bf16,
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Precision::Fp32 => "fp32",
            Precision::Tf32 => "tf32",
            Precision::Bf16 => "bf16",
        })
    }
}

impl std::str::FromStr for Precision {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "fp32" => Ok(Precision::Fp32),
            "tf32" => Ok(Precision::Tf32),
            "bf16" => Ok(Precision::Bf16),
            other => Err(format!("unknown precision {other:?} (fp32, tf32 or bf16)")),
        }
    }
}

/// Stride and zero padding of a 2-D convolution, per axis `[h, w]` (dilation 1, one group),
/// and the [`Precision`] of its products.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConvOptions2d {
    pub stride: [usize; 2],
    pub padding: [usize; 2],
    pub precision: Precision,
}

impl ConvOptions2d {
    /// In fp32.
    pub const fn new(stride: [usize; 2], padding: [usize; 2]) -> Self {
        Self {
            stride,
            padding,
            precision: Precision::Fp32,
        }
    }

    pub fn with_precision(self, precision: Precision) -> Self {
        Self { precision, ..self }
    }

    /// Output size of the convolution with a `kernel`-sized filter over an `input`-sized
    /// map; panics where [`window_output_size`] has none (layers check their geometry first).
    pub fn output_size(&self, input: [usize; 2], kernel: [usize; 2]) -> [usize; 2] {
        expect_output_size(input, kernel, self.stride, self.padding)
    }
}

/// Window, stride and zero padding of a 2-D max-pool, per axis `[h, w]` (dilation 1, floor
/// mode: windows that would run past the padded input are dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PoolOptions2d {
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub padding: [usize; 2],
}

impl PoolOptions2d {
    pub fn new(kernel: [usize; 2], stride: [usize; 2], padding: [usize; 2]) -> Self {
        let pool = Self {
            kernel,
            stride,
            padding,
        };
        assert!(
            kernel[0] * kernel[1] < NO_ARGMAX as usize,
            "pool windows hold at most {} positions, got {kernel:?}",
            NO_ARGMAX
        );
        assert!(
            padding[0] * 2 < kernel[0] + 1 && padding[1] * 2 < kernel[1] + 1,
            "pool padding {padding:?} must be at most half the window {kernel:?}"
        );
        pool
    }

    /// Output size of the pool over an `input`-sized map; panics where
    /// [`window_output_size`] has none.
    pub fn output_size(&self, input: [usize; 2]) -> [usize; 2] {
        expect_output_size(input, self.kernel, self.stride, self.padding)
    }
}

/// Output size `[h, w]` of a `window` (filter or pool) sliding by `stride` over an
/// `input`-sized map zero-padded by `padding` on each side, dropping windows that would run
/// past it; `None` when a stride is zero or the window is larger than the padded input.
/// The one formula for every layer: models check their geometry with it.
pub fn window_output_size(
    input: [usize; 2],
    window: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
) -> Option<[usize; 2]> {
    let mut size = [0; 2];
    for i in 0..2 {
        let padded = input[i] + 2 * padding[i];
        if stride[i] == 0 || window[i] > padded {
            return None;
        }
        size[i] = (padded - window[i]) / stride[i] + 1;
    }
    Some(size)
}

fn expect_output_size(
    input: [usize; 2],
    window: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
) -> [usize; 2] {
    window_output_size(input, window, stride, padding).unwrap_or_else(|| {
        panic!("window {window:?} (stride {stride:?}) does not fit the padded input {input:?}")
    })
}

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

    /// SGD step with momentum μ of a group of parameters: for each, `(param − lr · v', v')`
    /// with `v' = μ · velocity + g` and `g` as in [`Self::sgd_update`]; velocities and
    /// gradients have their parameter's shape. Returns the updated parameters and velocities.
    fn sgd_momentum_update(
        params: Vec<FloatTensor<Self>>,
        grads: Vec<FloatTensor<Self>>,
        velocities: Vec<FloatTensor<Self>>,
        lr: f64,
        momentum: f64,
        weight_decay: f64,
    ) -> (Vec<FloatTensor<Self>>, Vec<FloatTensor<Self>>) {
        reference::sgd_momentum_update::<Self>(
            params,
            grads,
            velocities,
            lr,
            momentum,
            weight_decay,
        )
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

/// The settings and step count of one Adam update, and the scalars Burn derives from them
/// (in f32, as Burn computes them, so that the update is Burn's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamStep {
    pub lr: f64,
    pub beta_1: f32,
    pub beta_2: f32,
    pub epsilon: f32,
    /// The L2 penalty λ folded into each gradient as `g + λ·param` (0: none).
    pub weight_decay: f32,
    /// The step count `t` after this update: 1 for a parameter's first.
    pub time: usize,
}

impl AdamStep {
    /// `b = √(1 − β2^t)`, the second moment's bias correction.
    fn second_correction(&self) -> f32 {
        (1.0 - self.beta_2.powi(self.time as i32)).sqrt()
    }

    /// `c = b / (1 − β1^t)`: the first moment's factor.
    pub fn moment_factor(&self) -> f32 {
        self.second_correction() / (1.0 - self.beta_1.powi(self.time as i32))
    }

    /// `ε · b`: what is added to `√v'`.
    pub fn scaled_epsilon(&self) -> f32 {
        self.epsilon * self.second_correction()
    }
}

/// What a dense layer applies to its outputs, inside its own kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DenseActivation {
    Identity,
    Relu,
}

/// Which optional gradients a backward pass must produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GradsWanted {
    /// The input's gradient (false for a first layer fed with data).
    pub x: bool,
    /// The bias gradient (false when the layer has no bias).
    pub bias: bool,
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

fn float<B: Backend, const D: usize>(tensor: Tensor<B, D>) -> FloatTensor<B> {
    tensor.into_primitive().tensor()
}

fn from_float<B: Backend, const D: usize>(primitive: FloatTensor<B>) -> Tensor<B, D> {
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
