//! Test support (feature `testing`): poisoned kernel outputs, the default bodies on
//! demand where a backend has kernels, the one rule for skipping a missing GPU, and model
//! weights that are the same in every run.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

use burn::module::{ModuleMapper, Param};
use burn::prelude::*;
use burn::tensor::{DType, bf16};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// Whether kernel outputs are filled with a poison pattern before launch.
static POISON_OUTPUTS: AtomicBool = AtomicBool::new(false);

/// When on, every output buffer of the kernels (CubeCL and CPU) is filled before the launch
/// with a pattern no kernel writes (NaN for floats, 0xEE bytes for argmax), so an element a
/// kernel forgot to write shows up in a comparison instead of passing on stale memory.
pub fn poison_outputs(enabled: bool) {
    POISON_OUTPUTS.store(enabled, Ordering::Relaxed);
}

pub(crate) fn poisoning() -> bool {
    POISON_OUTPUTS.load(Ordering::Relaxed)
}

thread_local! {
    static DEFAULT_BODIES: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with NdArray's ops on their default bodies (Burn's ops) instead of the CPU
/// kernels, on this thread: how the tests check the default bodies, which one process
/// cannot reach through a second float type (Burn fixes a device's float type for the
/// whole process).
pub fn with_default_bodies<R>(f: impl FnOnce() -> R) -> R {
    let before = DEFAULT_BODIES.replace(true);
    let result = f();
    DEFAULT_BODIES.set(before);
    result
}

/// Whether [`with_default_bodies`] is running on this thread.
pub(crate) fn default_bodies() -> bool {
    DEFAULT_BODIES.get()
}

/// `elements` of a pattern no kernel writes: NaN for floats, 0xEE bytes otherwise.
pub(crate) fn poison(elements: usize, dtype: DType) -> Vec<u8> {
    match dtype {
        DType::F32 => f32::NAN.to_ne_bytes().repeat(elements),
        DType::F64 => f64::NAN.to_ne_bytes().repeat(elements),
        DType::BF16 => bf16::NAN.to_ne_bytes().repeat(elements),
        _ => vec![0xEE; elements * dtype.size()],
    }
}

/// Skips a test's `runtime` ("wgpu", "cuda") that has no usable device, saying so with
/// `reason` — unless `CUBENET_REQUIRE_<RUNTIME>=1` asks for that runtime (CI sets it for
/// wgpu), in which case the test fails: a lost Vulkan driver must not turn GPU tests into
/// silent passes.
pub fn skip_missing_device(runtime: &str, reason: &str) {
    let var = format!("CUBENET_REQUIRE_{}", runtime.to_uppercase());
    assert!(
        std::env::var(&var).as_deref() != Ok("1"),
        "{var}=1 but {runtime} has no usable device: {reason}"
    );
    println!("skipping {runtime}: {reason} ({var}=1 makes this an error)");
}

/// Redraws a module's drawn parameters from a generator of its own, seeded, as Burn's default
/// initializers draw them: a weight (outputs first) uniform in ±1/√(its inputs per output), a
/// bias in the bound of the weight before it. Parameters holding one repeated value (batch
/// norm's scale, shift and statistics) stay. Use it as `module.map(&mut SeededInit::new(seed))`.
///
/// Burn draws from one generator for the whole process, which every test thread shares: a
/// model drawn beside other tests gets other weights in each run, `B::seed` or not. Two
/// kernel paths compared on such weights fail now and then, where a value lands within
/// rounding of a kink (a ReLU input at zero, two values of a max-pool window that tie) and
/// each path takes a different one-sided gradient; with fixed weights a test passes or fails
/// in every run.
pub struct SeededInit {
    rng: StdRng,
    bound: f32,
}

impl SeededInit {
    pub fn new(seed: u64) -> Self {
        Self {
            rng: StdRng::seed_from_u64(seed),
            bound: 1.0,
        }
    }
}

impl<B: Backend> ModuleMapper<B> for SeededInit {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        param.map(|tensor| {
            let drawn = tensor.to_data().convert::<f32>().to_vec::<f32>().unwrap();
            if drawn.len() > 1 && drawn.iter().all(|&v| v == drawn[0]) {
                return tensor;
            }
            let dims = tensor.dims();
            if D > 1 {
                self.bound = (dims[0] as f32 / drawn.len() as f32).sqrt();
            }
            let values: Vec<f32> = drawn
                .iter()
                .map(|_| self.rng.random_range(-self.bound..self.bound))
                .collect();
            Tensor::from_data(TensorData::new(values, dims), &tensor.device())
                .set_require_grad(tensor.is_require_grad())
        })
    }
}

#[cfg(test)]
mod tests {
    use burn::backend::NdArray;
    use burn::module::Module;
    use burn::nn::BatchNormConfig;
    use burn::nn::conv::{Conv2d, Conv2dConfig};

    use super::*;

    fn values<const D: usize>(param: &Param<Tensor<NdArray, D>>) -> Vec<f32> {
        param.val().into_data().to_vec().unwrap()
    }

    #[test]
    fn redraws_the_same_weights_for_a_seed_within_burns_bounds() {
        let device = Default::default();
        let conv = || -> Conv2d<NdArray> { Conv2dConfig::new([2, 3], [3, 3]).init(&device) };
        let [a, b, c] = [7, 7, 8].map(|seed| conv().map(&mut SeededInit::new(seed)));
        assert_eq!(values(&a.weight), values(&b.weight));
        assert_eq!(values(&a.bias.clone().unwrap()), values(&b.bias.unwrap()));
        assert_ne!(values(&a.weight), values(&c.weight));
        // Burn's bound for 2 input channels of 3 × 3: 1/√18, for the bias as for the weight.
        let bound = 1.0 / 18f32.sqrt();
        let (weight, bias) = (values(&a.weight), values(&a.bias.unwrap()));
        assert_eq!((weight.len(), bias.len()), (54, 3));
        assert!(weight.iter().chain(&bias).all(|v| v.abs() < bound));
        assert!(weight.iter().any(|v| v.abs() > bound / 2.0));

        let norm = BatchNormConfig::new(4)
            .init::<NdArray>(&device)
            .map(&mut SeededInit::new(7));
        assert_eq!(values(&norm.gamma), [1.0; 4]);
        assert_eq!(values(&norm.beta), [0.0; 4]);
    }
}
