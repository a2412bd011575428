//! `cubenet bench`: the backend benchmark ([`crate::bench::BenchArgs`] says what it measures).

pub use crate::bench::BenchArgs as Args;

/// Measures, merges and writes the tables and plots.
pub fn run(args: Args) -> anyhow::Result<()> {
    Ok(crate::bench::run_bench(args)?)
}
