//! cubenet: train small CNNs and MLPs with Burn, on any backend, with custom CubeCL kernels
//! on the GPU hot path.
//!
//! The modules read top-down, each using only those below it: [`cli`] (the `cubenet`
//! command) → [`studio`] (the local web application) → [`run_file`] (the TOML schema, resolved into a job) and [`bench`] (the backend
//! benchmark) → [`train`] (the jobs, the loop around burn-train, the artifact directory,
//! saved runs and export) → [`model`] → [`data`] → [`device`], with the kernels in the
//! `cubenet-kernels` crate and the small utilities ([`atomic_file`], [`error_line`],
//! [`plot`]) below everything; `tests/suite/layering.rs` checks it.

pub mod atomic_file;
pub mod bench;
pub mod cli;
pub mod data;
pub mod device;
pub mod error_line;
pub mod model;
pub mod plot;
mod quiet_panic;
pub mod run_file;
pub mod studio;
pub mod train;
