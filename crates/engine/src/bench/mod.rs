//! Benchmarks: the timing protocol, kernel microbenchmarks, and the backend comparison
//! (training steps, phase breakdowns, real epochs and data-parallel scaling per variant;
//! reports, tables, plots).

mod block_shape;
mod charts;
mod command;
mod epoch;
mod ops;
mod phases;
mod report;
mod run;
mod scaling;
mod speedrun;
mod step;
mod sweep;
mod table;
mod timing;
mod variant;

pub use block_shape::BlockShape;
pub use command::{BenchArgs, BenchError, run_bench};
pub use epoch::{EpochResult, time_epoch};
pub use ops::{
    KernelBenchPlan, OpComparison, OpSection, compare_blocks, compare_kernels_on, compare_ops,
};
pub use phases::{PHASES, time_phases};
pub use report::{
    EPOCH_IMAGES, EpochRecord, PhaseRecord, Report, ReportError, ScalingRecord, Source, StepRecord,
};
pub use run::{EpochPlan, Measurement, measurement_count, run_variant, this_run};
pub use scaling::{ScalingError, ScalingPlan, run_scaling};
pub use speedrun::{EpochMark, SpeedrunConfig, SpeedrunResult, speedrun, speedrun_on};
pub use step::{BENCH_LR, SgdStep, bench_model, random_batch, time_training_step, train_step};
pub use sweep::{BenchModel, BenchPlan, MLP_HIDDEN, Point, Sweep};
pub use table::FULL_RUNS;
pub use timing::{Protocol, Timing, sync, time_synced};
pub use variant::{BurnSetup, Variant};
