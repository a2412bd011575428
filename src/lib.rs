//! cubenet: train small CNNs and MLPs with Burn, on any backend, with custom CubeCL kernels
//! on the GPU hot path.
//!
//! This crate is the `cubenet` command ([`cli`]) over the workspace's crates, each using only
//! those below it: `cubenet-studio` (the local web application, here [`studio`]) →
//! `cubenet-run-file` (the TOML schema resolved into a job, [`run_file`]) → `cubenet-engine`
//! (devices, data, models, training, saved runs and the benchmark, re-exported here under
//! their module names) → `cubenet-kernels`. The re-exports give the examples, the tests and
//! programs built on cubenet one path for everything: `cubenet::train::...`.

pub mod cli;

pub use cubenet_engine::{atomic_file, bench, data, device, error_line, model, plot, train};
pub use cubenet_run_file as run_file;
pub use cubenet_studio as studio;
