//! cubenet's engine: everything that trains, evaluates and benchmarks a network, on any
//! backend compiled in.
//!
//! The modules read top-down, each using only those below it: [`bench`] (the backend
//! benchmark) → [`train`] (the jobs, the loop around burn-train, the artifact directory,
//! saved runs and export) → [`model`] → [`data`] → [`device`], with the kernels in the
//! `cubenet-kernels` crate and the small utilities ([`atomic_file`], [`error_line`],
//! [`plot`]) below everything; `tests/suite/layering.rs` checks it.
//!
//! Model and training code is generic over the backend, and this crate is where it is made
//! concrete: each job's `launch`, a saved run's loading and the benchmark's entry points take
//! a [`device::BackendKind`] and compile the generic code once per backend here, so the
//! crates above (run files, the studio, the command line) compile in seconds.

pub mod atomic_file;
pub mod bench;
pub mod data;
pub mod device;
pub mod error_line;
pub mod model;
pub mod plot;
mod quiet_panic;
pub mod train;
