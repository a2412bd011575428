//! What the tabular examples share: training on a generated table through the CSV path,
//! checking the test accuracy, and the exit convention of every cubenet command (a one-line
//! error and exit code 2). Each example uses a subset.
#![allow(dead_code)]

use std::path::Path;
use std::process::ExitCode;

use anyhow::ensure;
use cubenet::data::{Table, TableSource};
use cubenet::device::BackendKind;
use cubenet::error_line::error_line;
use cubenet::train::Run;
use cubenet::train::RunDir;
use cubenet::train::tabular::{TabularConfig, TabularJob, TabularReport, TestMetrics};

/// Writes `table` to `artifact_dir/data/csv_name`, trains `config` on that file on
/// `backend`, and prints the report.
pub fn train_on_csv(
    table: Table,
    csv_name: &str,
    config: TabularConfig,
    backend: BackendKind,
    artifact_dir: &Path,
) -> anyhow::Result<TabularReport> {
    let run_dir = RunDir::claim(artifact_dir, &[])?;
    let data_dir = artifact_dir.join("data");
    std::fs::create_dir_all(&data_dir)?;
    let csv = data_dir.join(csv_name);
    table.write_csv(&csv)?;
    let job = TabularJob {
        config,
        data: TableSource::Csv(csv),
    };
    let report = job.launch(Run::fresh(run_dir), backend)?;
    println!("{report}");
    Ok(report)
}

/// Fails unless the report's test accuracy is at least `floor` (0 to 1).
pub fn require_accuracy(report: &TabularReport, floor: f64) -> anyhow::Result<()> {
    let Some(TestMetrics::Classification { accuracy }) = report.test else {
        anyhow::bail!("the run reported no test accuracy");
    };
    ensure!(
        accuracy >= floor,
        "test accuracy {:.2}% is below {:.2}%",
        accuracy * 100.0,
        floor * 100.0
    );
    Ok(())
}

/// Exit code 0, or 2 after printing the error on one line.
pub fn exit_code(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {}", error_line(error.as_ref()));
            ExitCode::from(2)
        }
    }
}
