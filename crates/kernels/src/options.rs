//! The settings the ops take besides their tensors (convolution and pool geometry with
//! their output sizes, the dense activation, the wanted gradients, an Adam step), apart
//! from [`crate::KernelBackend`] so that models can check their geometry with no backend.

use crate::{NO_ARGMAX, Precision};

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

/// One SGD-with-momentum step's scalars (see [`crate::KernelBackend::sgd_momentum_update`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MomentumStep {
    pub lr: f64,
    /// Momentum μ: `v' = μ · v + g`.
    pub momentum: f64,
    /// The L2 penalty λ folded into each gradient as `g + λ·param` (0: none).
    pub weight_decay: f64,
    /// Nesterov's momentum, as PyTorch's `nesterov=True`: the step is `g + μ · v'` instead
    /// of `v'`, looking ahead along the velocity.
    pub nesterov: bool,
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
