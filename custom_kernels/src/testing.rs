//! Test support (feature `testing`): poisoned kernel outputs.

use std::sync::atomic::{AtomicBool, Ordering};

use burn::tensor::DType;

/// Whether kernel outputs are filled with a poison pattern before launch.
static POISON_OUTPUTS: AtomicBool = AtomicBool::new(false);

/// When on, every output buffer of the CubeCL kernels is filled before the launch with a
/// pattern no kernel writes (NaN for floats, 0xEE bytes for argmax), so an element a kernel
/// forgot to write shows up in a comparison instead of passing on stale memory.
pub fn poison_outputs(enabled: bool) {
    POISON_OUTPUTS.store(enabled, Ordering::Relaxed);
}

pub(crate) fn poisoning() -> bool {
    POISON_OUTPUTS.load(Ordering::Relaxed)
}

/// `elements` of a pattern no kernel writes: NaN for floats, 0xEE bytes otherwise.
pub(crate) fn poison(elements: usize, dtype: DType) -> Vec<u8> {
    match dtype {
        DType::F32 => f32::NAN.to_ne_bytes().repeat(elements),
        DType::F64 => f64::NAN.to_ne_bytes().repeat(elements),
        _ => vec![0xEE; elements * dtype.size()],
    }
}
