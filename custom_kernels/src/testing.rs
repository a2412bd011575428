//! Test support (feature `testing`): poisoned kernel outputs, the default bodies on
//! demand where a backend has kernels, and the one rule for skipping a missing GPU.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

use burn::tensor::{DType, bf16};

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
