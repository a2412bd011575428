//! `cubenet bench`: the backend benchmark ([`cubenet_engine::bench::BenchArgs`] says what it measures).

pub use cubenet_engine::bench::BenchArgs as Args;

/// Measures, merges and writes the tables and plots.
pub fn run(args: Args) -> anyhow::Result<()> {
    Ok(cubenet_engine::bench::run_bench(args)?)
}
