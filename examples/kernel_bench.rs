//! Times cubenet's kernels against Burn's on the single-conv CNN's shapes, op by op, on one device
//! in one run (whole training steps: the `backend_swap` example).
//!
//! ```text
//! cargo run --release --example kernel_bench --features cuda -- --json kernels.json
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use cubenet::atomic_file::write_atomically;
use cubenet::backend::{BackendKind, BackendTask, run_on};
use cubenet::bench::{OpComparison, Protocol, compare_ops};
use cubenet_kernels::AutodiffKernelBackend;
use serde::Serialize;

#[derive(Debug, Parser)]
#[command(about = "Kernel microbenchmarks: cubenet vs Burn, same device, same run")]
struct Args {
    /// Backend to time [default: cuda when compiled in, else ndarray]
    #[arg(long, value_enum)]
    backend: Option<BackendKind>,
    /// Images per batch
    #[arg(long, default_value_t = 1000)]
    batch: usize,
    /// Filter counts d to time
    #[arg(long, value_delimiter = ',', default_value = "32,256")]
    filters: Vec<usize>,
    /// Untimed runs before timing
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    /// Timed runs (the median is reported)
    #[arg(long, default_value_t = 30)]
    repeats: usize,
    /// Also write the results as JSON here
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Serialize)]
struct Report {
    backend: BackendKind,
    batch: usize,
    ops: Vec<(usize, Vec<OpComparison>)>,
}

struct Bench(Args);

impl BackendTask for Bench {
    type Output = Report;

    fn run<B: AutodiffKernelBackend>(self, device: B::Device, kind: BackendKind) -> Report {
        let Args {
            batch,
            filters,
            warmup,
            repeats,
            ..
        } = self.0;
        let protocol = Protocol { warmup, repeats };
        // Progress goes to stderr as each section finishes: a run cut off by a time limit
        // still shows what it measured.
        let ops = filters
            .iter()
            .map(|&d| {
                let ops = compare_ops::<B::InnerBackend>(&device, batch, d, protocol);
                for op in &ops {
                    eprintln!(
                        "d={d} {}: custom {:.3} ms, burn {:.3} ms",
                        op.op, op.custom.median_ms, op.burn.median_ms
                    );
                }
                (d, ops)
            })
            .collect();
        Report {
            backend: kind,
            batch,
            ops,
        }
    }
}

fn print_report(report: &Report) {
    println!(
        "backend {}, batch {}, milliseconds (median of timed runs)\n",
        report.backend, report.batch
    );
    println!("| d | op | custom | burn | speedup |\n|---|---|---|---|---|");
    for (d, ops) in &report.ops {
        for op in ops {
            println!(
                "| {d} | {} | {:.3} | {:.3} | {:.2}x |",
                op.op,
                op.custom.median_ms,
                op.burn.median_ms,
                op.speedup()
            );
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let backend = args.backend.unwrap_or_else(BackendKind::default_for_build);
    let json = args.json.clone();
    let report = match run_on(backend, Bench(args)) {
        Ok(report) => report,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    print_report(&report);
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(&report).expect("reports serialize");
        if let Err(error) = write_atomically(&path, text.as_bytes()) {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}
