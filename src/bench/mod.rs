//! Benchmarks: the timing protocol, kernel microbenchmarks and training steps.

mod ops;
mod step;
mod timing;

pub use ops::{OpComparison, compare_ops};
pub use step::{StepBench, seed_cnn_step};
pub use timing::{Timing, time_synced};
