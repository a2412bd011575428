//! Backends to test the kernels on, tensor transfer and the error measure.

use std::cell::Cell;

use burn::backend::{Autodiff, NdArray};
use burn::prelude::*;
use cubenet_kernels::{AutodiffKernelBackend, KernelBackend, Precision};

/// The reference: Burn's own ops on the CPU, with Burn's autodiff.
pub type Reference = Autodiff<NdArray>;

/// Largest accepted error, relative to the largest magnitude of the reference tensor.
pub const TOLERANCE: f64 = 1e-4;
/// The same for products computed in TF32 (`Precision::Tf32` on the tensor cores): each
/// operand keeps 10 mantissa bits, so a product is off by up to ≈ 2⁻⁹ of its size, in
/// either direction, and a sum of K of them by ≈ 2⁻⁹ · √K · its typical term — about
/// 1e-4 of the largest output for the tests' uniform values (the worst errors seen on a GPU
/// are in `docs/perf-log/2026-11-25-v16-tf32-tile.md`). 2e-3 leaves room for that; a wrong
/// index or a lost slice is off by the size of a term, ≳ 1e-2.
pub const TF32_TOLERANCE: f64 = 2e-3;
/// The same for products of operands rounded to bf16 (`Precision::Bf16`): 8 significant
/// bits where TF32 keeps 11, so each rounding, and the sums' error with them, is 2³ times
/// TF32's. The bound is too loose to catch a wrong index; the checks on bf16 values
/// (operands bf16 rounding leaves unchanged, compared at [`TOLERANCE`]) catch those.
pub const BF16_TOLERANCE: f64 = 8.0 * TF32_TOLERANCE;

/// What a convolution check asks its products to multiply in, and on which operands: the
/// comparison's tolerance follows from the two.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Operands {
    pub precision: Precision,
    /// Operands that bf16 holds exactly: every precision's products are then exact, only
    /// the sums round (in fp32), so a wrong index, slice or staged value shows at
    /// [`TOLERANCE`].
    pub bf16_values: bool,
}

impl Operands {
    /// Any values, multiplied at `precision`.
    pub fn any_values(precision: Precision) -> Self {
        Self {
            precision,
            bf16_values: false,
        }
    }

    /// How a check of these operands runs on runtime `B` on `device`.
    ///
    /// Where `B` has the precision's matrix units: all `random_cases` (at most the
    /// runtime's cap, [`random_case_cap`]) and every fixed shape. Where it falls back to
    /// the fp32 kernels, the fp32 checks already cover them with their random cases and
    /// large shapes: no random case, and only the networks' layers, which hold the fallback
    /// to fp32's tolerance.
    pub fn on<B: KernelBackend>(self, device: &B::Device, random_cases: u64) -> CheckPlan {
        let operands = Self {
            precision: B::conv_precision(self.precision, device),
            ..self
        };
        let falls_back = operands != self;
        CheckPlan {
            operands,
            random_cases: match falls_back {
                true => 0,
                false => capped(random_cases),
            },
            large_shapes: !falls_back,
        }
    }

    /// The tolerance of a convolution's output and its input and weight gradients.
    pub fn tolerance(self) -> f64 {
        match self.precision {
            _ if self.bf16_values => TOLERANCE,
            Precision::Fp32 => TOLERANCE,
            Precision::Tf32 => TF32_TOLERANCE,
            Precision::Bf16 => BF16_TOLERANCE,
        }
    }

    /// The tolerance of the input and weight gradients behind a max-pool whose windows
    /// may `overlap`: there several windows' gradients add up at a conv position, a sum
    /// bf16 no longer holds, so the gradients' products round it as on any values.
    pub fn gradient_tolerance(self, overlap: bool) -> f64 {
        match overlap {
            true => Self::any_values(self.precision).tolerance(),
            false => self.tolerance(),
        }
    }
}

/// What a convolution check runs on one runtime ([`Operands::on`]).
pub struct CheckPlan {
    /// The operands as the runtime multiplies them.
    pub operands: Operands,
    /// How many of the seeded random cases to run.
    pub random_cases: u64,
    /// Whether the large fixed shapes run besides the networks' layers.
    pub large_shapes: bool,
}

/// A check that can run on any backend with the kernels.
pub trait KernelCheck {
    /// Runs every case on `B`, returning (cases run, worst relative error seen).
    fn run<B: AutodiffKernelBackend>(&self, device: &B::Device) -> (usize, f64);
}

/// Runs `check` on NdArray (cubenet's CPU kernels) and on every GPU runtime that is
/// compiled in and has a device. A GPU runtime without a device is skipped, unless
/// `CUBENET_REQUIRE_WGPU=1` / `CUBENET_REQUIRE_CUDA=1` asks for it, in which case the test
/// fails.
pub fn on_each_backend(name: &str, check: impl KernelCheck) {
    cubenet_kernels::testing::poison_outputs(true);
    report(
        name,
        "ndarray",
        check.run::<Autodiff<NdArray>>(&Default::default()),
    );
    let gpu_runs: &[bool] = &[
        #[cfg(feature = "wgpu")]
        on_gpu::<cubenet_kernels::CubeWgpu>(name, "wgpu", &check),
        #[cfg(feature = "cuda")]
        on_gpu::<cubenet_kernels::CubeCuda>(name, "cuda", &check),
    ];
    if !gpu_runs.contains(&true) {
        println!("{name}: no GPU runtime ran (build with --features wgpu and/or cuda)");
    }
}

/// Runs `check` on runtime `B` (with autodiff) on its default device if it has one; whether it ran.
#[allow(dead_code)] // unused when no GPU runtime is compiled in
fn on_gpu<B: KernelBackend>(name: &str, runtime: &str, check: &impl KernelCheck) -> bool {
    let device = B::Device::default();
    let usable = available::<B>(runtime, &device);
    if usable {
        RANDOM_CASE_CAP.set(random_case_cap(runtime));
        report(name, runtime, check.run::<Autodiff<B>>(&device));
        RANDOM_CASE_CAP.set(u64::MAX);
    }
    usable
}

thread_local! {
    /// The cap of the runtime the check on this thread runs on (none on ndarray).
    static RANDOM_CASE_CAP: Cell<u64> = const { Cell::new(u64::MAX) };
}

/// How many of a check's `cases` seeded random cases run on the runtime the check runs on:
/// all on the CPU kernels, at most the runtime's cap ([`random_case_cap`]) on a GPU.
pub fn capped(cases: u64) -> u64 {
    cases.min(RANDOM_CASE_CAP.get())
}

/// The most random cases a convolution or max-pool check runs on `runtime`, where each case
/// compiles kernels of its own (its window is part of them):
/// `CUBENET_<RUNTIME>_RANDOM_CASES` (e.g. `CUBENET_WGPU_RANDOM_CASES=30`), else all. CI sets
/// it for wgpu, whose adapter there is Mesa's software one: compiling and running every
/// implicit-GEMM launch is slow there whatever the case's size, so all the random cases of
/// each check would take most of CI's time; on CUDA, NVRTC compiles each case's kernels,
/// and all of them do not fit one device call
/// (`docs/perf-log/2026-11-28-ci-build-time.md`). The fixed shapes (the networks' layers, a
/// large grid) always run.
fn random_case_cap(runtime: &str) -> u64 {
    let variable = format!("CUBENET_{}_RANDOM_CASES", runtime.to_uppercase());
    match std::env::var(&variable) {
        Ok(value) => value
            .parse()
            .unwrap_or_else(|_| panic!("{variable}={value} is not a number of cases")),
        Err(_) => u64::MAX,
    }
}

/// Prints what a check of `name` on `runtime` ran, and fails it where it ran no case (a
/// case cap of 0, every case filtered out): a check that compares nothing would pass on
/// any kernel. A runtime with no device never gets here ([`available`] skips it).
fn report(name: &str, runtime: &str, (cases, worst): (usize, f64)) {
    assert!(
        cases > 0,
        "{name} on {runtime}: no case ran, so nothing was checked (is a \
         CUBENET_<RUNTIME>_RANDOM_CASES cap 0, or every case filtered out?)"
    );
    println!("{name} on {runtime}: {cases} cases passed, worst relative error {worst:.2e}");
}

/// A check whose case list comes out empty.
struct NoCases;

impl KernelCheck for NoCases {
    fn run<B: AutodiffKernelBackend>(&self, _device: &B::Device) -> (usize, f64) {
        (0, 0.0)
    }
}

/// The harness fails a check that ran no case, on the first backend it runs on (NdArray,
/// which every build has), instead of reporting it passed.
#[test]
#[should_panic(expected = "no case ran, so nothing was checked")]
fn a_check_that_runs_no_case_fails() {
    on_each_backend("a check with no cases", NoCases);
}

fn available<B: Backend>(runtime: &str, device: &B::Device) -> bool {
    let probe = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        Tensor::<B, 1>::from_floats([1.0, 2.0], device)
            .sum()
            .into_scalar()
            .elem::<f32>()
    }));
    let usable = matches!(probe, Ok(sum) if sum == 3.0);
    if !usable {
        cubenet_kernels::testing::skip_missing_device(runtime, "no usable device");
    }
    usable
}

/// A tensor holding `values` on backend `B`.
pub fn tensor<B: Backend, const D: usize>(
    values: &[f32],
    shape: [usize; D],
    device: &B::Device,
) -> Tensor<B, D> {
    Tensor::from_data(TensorData::new(values.to_vec(), shape), device)
}

pub fn floats<B: Backend, const D: usize>(tensor: Tensor<B, D>) -> Vec<f32> {
    tensor
        .into_data()
        .convert::<f32>()
        .to_vec()
        .expect("float data")
}

pub fn ints<B: Backend, const D: usize>(tensor: Tensor<B, D, Int>) -> Vec<i64> {
    tensor.into_data().iter::<i64>().collect()
}

/// Largest |ours − reference| over all elements, relative to the largest |reference|.
/// Panics, naming `what` and the first bad element, above [`TOLERANCE`] or on any NaN
/// (which is what an element no kernel wrote holds).
pub fn compare(what: &str, ours: &[f32], reference: &[f32]) -> f64 {
    compare_within(what, ours, reference, TOLERANCE)
}

/// [`compare`] with another bound than [`TOLERANCE`].
pub fn compare_within(what: &str, ours: &[f32], reference: &[f32], tolerance: f64) -> f64 {
    assert_eq!(ours.len(), reference.len(), "{what}: lengths differ");
    let scale = reference
        .iter()
        .fold(0f64, |m, &v| m.max(f64::from(v).abs()))
        .max(1e-12);
    let mut worst = 0f64;
    for (i, (&a, &b)) in ours.iter().zip(reference).enumerate() {
        let err = (f64::from(a) - f64::from(b)).abs() / scale;
        assert!(
            err <= tolerance,
            "{what}: element {i} is {a}, reference {b} (error {err:.2e} of max |ref| {scale:.3e})"
        );
        worst = worst.max(err);
    }
    worst
}

/// A layer's output and the gradients of Σ upstream ⊙ output, for comparison.
pub struct LayerResult {
    pub output: Vec<f32>,
    pub x_grad: Option<Vec<f32>>,
    pub weight_grad: Vec<f32>,
    pub bias_grad: Option<Vec<f32>>,
}

/// Compares every tensor of two results of the case `label`; returns the worst relative
/// error.
pub fn compare_results(label: &str, ours: &LayerResult, reference: &LayerResult) -> f64 {
    compare_results_within(label, ours, reference, [TOLERANCE; 2])
}

/// [`compare_results`] with the bounds `[of the output and x gradient, of the weight and
/// bias gradients]`; returns the worst relative error of each.
pub fn compare_results_within(
    label: &str,
    ours: &LayerResult,
    reference: &LayerResult,
    [maps, params]: [f64; 2],
) -> f64 {
    let what = |name: &str| format!("{name} of {label}");
    let mut worst = compare_within(&what("output"), &ours.output, &reference.output, maps);
    assert_eq!(ours.x_grad.is_some(), reference.x_grad.is_some());
    if let (Some(a), Some(b)) = (&ours.x_grad, &reference.x_grad) {
        worst = worst.max(compare_within(&what("x grad"), a, b, maps));
    }
    worst = worst.max(compare_within(
        &what("weight grad"),
        &ours.weight_grad,
        &reference.weight_grad,
        params,
    ));
    assert_eq!(ours.bias_grad.is_some(), reference.bias_grad.is_some());
    if let (Some(a), Some(b)) = (&ours.bias_grad, &reference.bias_grad) {
        worst = worst.max(compare_within(&what("bias grad"), a, b, params));
    }
    worst
}
