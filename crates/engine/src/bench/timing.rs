//! The timing protocol: warm-up runs excluded (autotune, JIT compilation, allocation), the
//! device synchronized before the clock is read, the median of many timed runs reported.

use std::time::Instant;

use burn::prelude::*;
use serde::{Deserialize, Serialize};

/// Milliseconds per run over the timed repeats.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timing {
    pub median_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    pub runs: usize,
}

impl Timing {
    /// Summarizes timed runs in milliseconds; the median is the upper middle element
    /// (`sorted[n / 2]`), the definition `pytorch_reference.py` uses too.
    pub fn from_samples(mut samples: Vec<f64>) -> Timing {
        assert!(!samples.is_empty(), "at least one timed run");
        samples.sort_by(f64::total_cmp);
        let runs = samples.len();
        Timing {
            median_ms: samples[runs / 2],
            min_ms: samples[0],
            max_ms: samples[runs - 1],
            runs,
        }
    }
}

/// How many runs to discard and to time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Protocol {
    pub warmup: usize,
    pub repeats: usize,
}

/// Times `run` on `device`: `protocol.warmup` untimed runs, then `protocol.repeats` runs
/// each closed by a device synchronization.
pub fn time_synced<B: Backend>(
    device: &B::Device,
    protocol: Protocol,
    mut run: impl FnMut(),
) -> Timing {
    for _ in 0..protocol.warmup {
        run();
    }
    sync::<B>(device);
    let samples = (0..protocol.repeats)
        .map(|_| {
            let start = Instant::now();
            run();
            sync::<B>(device);
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    Timing::from_samples(samples)
}

/// Waits until `device` has finished all queued work.
pub fn sync<B: Backend>(device: &B::Device) {
    B::sync(device).expect("the device failed while benchmarking");
}
