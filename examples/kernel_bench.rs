//! Times cubenet's kernels against Burn's on one device in one run: the single-conv CNN's
//! layer op by op, or (`--cifar`) each conv·ReLU·pool block of the CIFAR-shaped network
//! forward + backward, as a training step runs it (whole steps: `cubenet bench`;
//! `pytorch/pytorch_reference.py --blocks` times the same blocks in PyTorch).
//!
//! ```text
//! cargo run --release --example kernel_bench --features cuda -- --json kernels.json
//! cargo run --release --example kernel_bench --features cuda -- --cifar --batches 128,512
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use cubenet::atomic_file::write_atomically;
use cubenet::bench::{KernelBenchPlan, OpSection, Protocol, compare_kernels_on};
use cubenet::device::BackendKind;
use serde::Serialize;

#[derive(Debug, Parser)]
#[command(about = "Kernel microbenchmarks: cubenet vs Burn, same device, same run")]
struct Args {
    /// Backend to time [default: cuda when compiled in, else ndarray]
    #[arg(long, value_enum)]
    backend: Option<BackendKind>,
    /// Images per batch, one section each
    #[arg(long, value_delimiter = ',', default_value = "1000")]
    batches: Vec<usize>,
    /// Filter counts d of the single-conv CNN to time
    #[arg(long, value_delimiter = ',', default_value = "32,256")]
    filters: Vec<usize>,
    /// Time the CIFAR-shaped network's three blocks instead of the single-conv CNN's ops
    #[arg(long)]
    cifar: bool,
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
    sections: Vec<OpSection>,
}

fn print_report(report: &Report) {
    println!(
        "backend {}, milliseconds (median of timed runs)\n",
        report.backend
    );
    println!("| batch | layer | op | custom | burn | speedup |\n|---|---|---|---|---|---|");
    for section in &report.sections {
        for op in &section.ops {
            println!(
                "| {} | {} | {} | {:.3} | {:.3} | {:.2}x |",
                section.batch,
                section.layer,
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
    let plan = KernelBenchPlan {
        batches: args.batches,
        filters: args.filters,
        cifar: args.cifar,
        protocol: Protocol {
            warmup: args.warmup,
            repeats: args.repeats,
        },
    };
    // Progress goes to stderr as each section finishes: a run cut off by a time limit still
    // shows what it measured.
    let mut progress = |section: &OpSection| {
        for op in &section.ops {
            eprintln!(
                "batch {} {} {}: custom {:.3} ms, burn {:.3} ms",
                section.batch, section.layer, op.op, op.custom.median_ms, op.burn.median_ms
            );
        }
    };
    let report = match compare_kernels_on(backend, &plan, &mut progress) {
        Ok(sections) => Report { backend, sections },
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    print_report(&report);
    if let Some(path) = args.json {
        let text = serde_json::to_string_pretty(&report).expect("reports serialize");
        if let Err(error) = write_atomically(&path, text.as_bytes()) {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}
