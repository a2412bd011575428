//! The timing protocol: warm-up runs excluded (autotune, JIT compilation, allocation), the
//! device synchronized before the clock is read, the median of many timed runs reported.

use std::time::Instant;

use burn::prelude::*;
use serde::Serialize;

/// Milliseconds per run over the timed repeats.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Timing {
    pub median_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    pub runs: usize,
}

/// Times `run` on `device`: `warmup` untimed runs, then `repeats` runs each closed by a
/// device synchronization.
pub fn time_synced<B: Backend>(
    device: &B::Device,
    warmup: usize,
    repeats: usize,
    mut run: impl FnMut(),
) -> Timing {
    assert!(repeats > 0, "at least one timed run");
    for _ in 0..warmup {
        run();
    }
    sync::<B>(device);
    let mut samples: Vec<f64> = (0..repeats)
        .map(|_| {
            let start = Instant::now();
            run();
            sync::<B>(device);
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    Timing {
        median_ms: samples[repeats / 2],
        min_ms: samples[0],
        max_ms: samples[repeats - 1],
        runs: repeats,
    }
}

fn sync<B: Backend>(device: &B::Device) {
    B::sync(device).expect("the device failed while benchmarking");
}
