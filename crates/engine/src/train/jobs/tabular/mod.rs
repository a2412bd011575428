//! Tabular runs: a CSV's columns → seeded train/valid/test split → standardization fitted on
//! the training rows → an MLP trained with burn-train (data resident on the device) → the
//! best epoch's weights, saved with the config and preprocessing → test metrics.

mod config;
mod metrics;
mod model_files;

use std::path::Path;
use std::time::Instant;

use burn::data::dataloader::DataLoaderBuilder;
use burn::data::dataset::InMemDataset;
use burn::optim::Optimizer;
use burn::train::SupervisedTraining;
use burn::train::metric::{AccuracyMetric, LossMetric};
use cubenet_kernels::AutodiffKernelBackend;
use serde::Serialize;

pub use crate::train::OptimizerConfig;
pub use config::TabularConfig;
pub use metrics::{RegressionMetrics, TestMetrics};
pub use model_files::TabularModel;

use crate::data::{
    DataError, DeviceRows, EpochShuffled, Standardizer, Table, TableSource, inferred_classes,
};
use crate::device::BackendKind;
use crate::model::{TabularNet, Task};
use crate::train::fit::memory_check;
use crate::train::fit::run::{Run, RunJob, launch};
use crate::train::fit::train_loop::{LoopResult, TrainLoop};
use crate::train::run_dir::artifacts::plot_learning_curves;
use crate::train::{RunError, TrainError, read_weights};

/// Rows per batch when validating (no gradients, so it can be larger than training's).
const VALID_BATCH: usize = 65_536;

/// Inputs and targets of one split.
#[derive(Debug, Clone)]
pub struct Rows {
    pub inputs: Table,
    pub targets: Table,
}

/// A CSV cut into the three splits (raw values), with the standardization fitted on the
/// training split when the config asks for one.
#[derive(Debug, Clone)]
pub struct TabularSplits {
    pub train: Rows,
    pub valid: Rows,
    pub test: Rows,
    pub standardizer: Option<Standardizer>,
    /// Classes of a classification task (2 for binary); 0 for regression.
    pub classes: usize,
}

impl TabularSplits {
    /// `rows` as the train, valid and test split at once, unstandardized: for a problem
    /// whose every point must be learned (XOR's four).
    pub fn all_in_one(rows: Rows, classes: usize) -> Self {
        Self {
            train: rows.clone(),
            valid: rows.clone(),
            test: rows,
            standardizer: None,
            classes,
        }
    }

    /// Reads the configured columns of `source`, checks the targets against the task, and
    /// splits and standardizes as `config` says.
    pub fn load(source: &TableSource, config: &TabularConfig) -> Result<Self, TrainError> {
        let table = source.load(&config.columns())?;
        let (inputs, targets) = table.split_columns(config.features.len());
        let classes = check_targets(&source.name(), config, &targets)?;
        let [train, valid, test] = config
            .split
            .split(table.rows(), config.seed)
            .map_err(TrainError::Config)?;
        let rows = |indices: &[usize]| Rows {
            inputs: inputs.select_rows(indices),
            targets: targets.select_rows(indices),
        };
        let (train, valid, test) = (rows(&train), rows(&valid), rows(&test));
        let standardizer = config.standardize.then(|| Standardizer::fit(&train.inputs));
        Ok(Self {
            train,
            valid,
            test,
            standardizer,
            classes,
        })
    }
}

/// Binary targets must be 0 or 1, multi-class ones class indices below the configured
/// count. Returns the number of classes (0 for regression).
fn check_targets(csv: &Path, config: &TabularConfig, targets: &Table) -> Result<usize, TrainError> {
    let bad = |row: usize, what: String| {
        TrainError::Data(DataError::CsvTarget {
            path: csv.to_path_buf(),
            row: row + 1,
            column: config.targets[0].clone(),
            what,
        })
    };
    match config.task {
        Task::Regression => Ok(0),
        Task::Binary => match targets.values.iter().position(|&v| v != 0.0 && v != 1.0) {
            Some(row) => Err(bad(
                row,
                format!("binary targets are 0 or 1, got {}", targets.values[row]),
            )),
            None => Ok(2),
        },
        Task::Multiclass => {
            if let Some(row) = targets
                .values
                .iter()
                .position(|&v| v < 0.0 || v.fract() != 0.0)
            {
                return Err(bad(
                    row,
                    format!("class labels are 0, 1, 2…, got {}", targets.values[row]),
                ));
            }
            let largest = targets.values.iter().fold(0.0f32, |m, &v| m.max(v)) as usize;
            match config.classes {
                Some(classes) if largest >= classes => {
                    let row = targets
                        .values
                        .iter()
                        .position(|&v| v as usize >= classes)
                        .unwrap_or(0);
                    Err(bad(
                        row,
                        format!("label {largest} is not below the {classes} classes configured"),
                    ))
                }
                Some(classes) => Ok(classes),
                None => inferred_classes(
                    targets.values.iter().map(|&v| v as u64),
                    "`classes = N` in [model]",
                )
                .map_err(|what| {
                    TrainError::Data(DataError::Csv {
                        path: csv.to_path_buf(),
                        reason: format!("column `{}`: {what}", config.targets[0]),
                    })
                }),
            }
        }
    }
}

/// What a finished run reports.
#[derive(Debug, Clone, Serialize)]
pub struct TabularReport {
    /// Rows in the train, valid and test splits.
    pub rows: [usize; 3],
    /// Epochs trained (early stopping may end sooner than configured).
    pub epochs: usize,
    /// The epoch whose weights were kept (lowest validation loss).
    pub best_epoch: usize,
    /// Wall time of training and validation, all epochs this process ran.
    pub train_seconds: f64,
    /// Wall time of each epoch this process ran, validation included. On a GPU the first
    /// also compiles and autotunes the kernels (once per machine and shape).
    pub epoch_seconds: Vec<f64>,
    /// Metrics on the test split, when it has rows.
    pub test: Option<TestMetrics>,
}

impl TabularReport {
    /// The steady pace: mean wall time of the epochs after the first (the first when it is
    /// the only one).
    pub fn seconds_per_epoch(&self) -> f64 {
        let later = self
            .epoch_seconds
            .get(1..)
            .filter(|later| !later.is_empty());
        let epochs = later.unwrap_or(&self.epoch_seconds);
        epochs.iter().sum::<f64>() / epochs.len().max(1) as f64
    }

    /// Training rows per second at the steady pace.
    pub fn rows_per_second(&self) -> f64 {
        self.rows[0] as f64 / self.seconds_per_epoch()
    }
}

/// Three lines: the split sizes, the training time and speed, the test metrics.
impl std::fmt::Display for TabularReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [train, valid, test] = self.rows;
        writeln!(f, "rows: {train} train, {valid} valid, {test} test")?;
        write!(
            f,
            "trained {} epochs (kept epoch {}) in {:.2} s: ",
            self.epochs, self.best_epoch, self.train_seconds,
        )?;
        if let [first, _, ..] = self.epoch_seconds[..] {
            write!(f, "first epoch {first:.3} s, then ")?;
        }
        write!(
            f,
            "{:.3} s/epoch, {:.0} rows/s",
            self.seconds_per_epoch(),
            self.rows_per_second()
        )?;
        if let Some(test) = &self.test {
            write!(f, "\n{test}")?;
        }
        Ok(())
    }
}

/// Trains the configured network on `splits` on `device`, writes the artifacts (config,
/// preprocessing, model, metric logs, `curves.png`) into the run's directory and returns the
/// model of the epoch with the lowest validation loss.
pub fn train<B: AutodiffKernelBackend>(
    config: &TabularConfig,
    splits: &TabularSplits,
    run: &Run,
    device: &B::Device,
) -> Result<(TabularModel<B::InnerBackend>, TabularReport), TrainError> {
    config.validate()?;
    let mut config = config.clone();
    if config.task == Task::Multiclass {
        config.classes = Some(splits.classes);
    }
    B::seed(device, config.seed);
    let mlp = config.mlp(splits.classes);
    let net = TabularNet {
        mlp: mlp.init::<B>(device)?,
        task: config.task,
    };
    let net = match &config.init_from {
        Some(weights) => read_weights(net, &mlp.sequential("mlp.dense", false)?, weights)?,
        None => net,
    };

    let start = Instant::now();
    let trained = match config.optimizer {
        OptimizerConfig::Sgd {
            momentum,
            nesterov,
            l2,
            ..
        } => {
            let sgd = OptimizerConfig::sgd(momentum, nesterov, l2).init::<B>();
            train_loop(&config, splits, run, device, net, sgd)
        }
        OptimizerConfig::Adam { l2, .. } => {
            let adam = OptimizerConfig::adam(l2).init();
            train_loop(&config, splits, run, device, net, adam)
        }
    };
    let train_seconds = start.elapsed().as_secs_f64();
    let LoopResult { best, watch } = trained?;

    let model = TabularModel {
        config,
        standardizer: splits.standardizer.clone(),
        net: best.model,
    };
    model.save(&run.dir)?;
    let loss_label = match model.config.task {
        Task::Regression => "MSE",
        Task::Binary => "binary cross-entropy",
        Task::Multiclass => "cross-entropy",
    };
    let mut panels = vec![("Loss", loss_label)];
    if model.config.task.is_classification() {
        panels.push(("Accuracy", "%"));
    }
    plot_learning_curves(&run.dir, &panels)?;

    let test = (splits.test.inputs.rows() > 0)
        .then(|| model.evaluate(&splits.test.inputs, &splits.test.targets, device));
    let report = TabularReport {
        rows: [&splits.train, &splits.valid, &splits.test].map(|s| s.inputs.rows()),
        epochs: best.epochs,
        best_epoch: best.epoch,
        train_seconds,
        epoch_seconds: watch.epoch_seconds(),
        test,
    };
    Ok((model, report))
}

/// burn-train's loop with optimizer `O`, the constant learning rate of the config, and the
/// rows resident on the device (standardized; the splits stay raw for evaluation).
fn train_loop<B, O>(
    config: &TabularConfig,
    splits: &TabularSplits,
    run: &Run,
    device: &B::Device,
    net: TabularNet<B>,
    optimizer: O,
) -> Result<LoopResult<TabularNet<B::InnerBackend>>, TrainError>
where
    B: AutodiffKernelBackend,
    O: Optimizer<TabularNet<B>, B> + 'static,
{
    let train_rows = splits.train.inputs.rows();
    let batch = config.batch(train_rows);
    let learning_rate = config.optimizer.learning_rate();
    let valid_batch = VALID_BATCH.max(batch);
    let train_loop = TrainLoop {
        run,
        settings: config,
        split_sizes: [&splits.train, &splits.valid, &splits.test].map(|rows| rows.inputs.rows()),
        model: net,
        optimizer,
        scheduler: learning_rate,
        devices: std::slice::from_ref(device),
        epochs: config.epochs,
        patience: config.patience,
        batch_size: batch,
        learning_rate,
        valid_batch_size: valid_batch,
        examples: "rows",
    };
    train_loop.run(|resume_after| {
        let standardized = |rows: &Rows| {
            let mut inputs = rows.inputs.clone();
            if let Some(s) = &splits.standardizer {
                s.apply(&mut inputs);
            }
            inputs
        };
        let train_loader = EpochShuffled::build(
            DataLoaderBuilder::new(DeviceRows::<B>::new(
                &standardized(&splits.train),
                &splits.train.targets,
                device,
            ))
            .batch_size(batch)
            .set_device(device.clone()),
            InMemDataset::new((0..train_rows).collect()),
            config.seed,
            resume_after.map_or(1, |epoch| epoch + 1),
        );
        let valid_rows = splits.valid.inputs.rows();
        let valid_loader = DataLoaderBuilder::new(DeviceRows::<B::InnerBackend>::new(
            &standardized(&splits.valid),
            &splits.valid.targets,
            device,
        ))
        .batch_size(valid_batch)
        .set_device(device.clone())
        .build(InMemDataset::new((0..valid_rows).collect()));
        let mut training = SupervisedTraining::new(run.dir.root(), train_loader, valid_loader)
            .metric_train_numeric(LossMetric::new())
            .metric_valid_numeric(LossMetric::new());
        if config.task.is_classification() {
            training = training
                .metric_train_numeric(AccuracyMetric::new())
                .metric_valid_numeric(AccuracyMetric::new());
        }
        Ok(training)
    })
}

/// A tabular job: load and split the CSV, train, save, evaluate on the test split.
#[derive(Debug, Clone)]
pub struct TabularJob {
    pub config: TabularConfig,
    pub data: TableSource,
}

impl TabularJob {
    /// Trains on `backend` in `run`, then evaluates on the test split. Not generic, so that
    /// the training code is compiled once, in this crate, for all callers.
    pub fn launch(self, run: Run, backend: BackendKind) -> Result<TabularReport, RunError> {
        launch(self, run, backend)
    }
}

impl RunJob for TabularJob {
    type Report = TabularReport;

    fn inputs(&self) -> Vec<&Path> {
        Vec::from_iter(self.data.input())
    }

    fn train<B: AutodiffKernelBackend>(
        self,
        run: &Run,
        device: B::Device,
        kind: BackendKind,
    ) -> Result<TabularReport, TrainError> {
        self.config.validate()?;
        let splits = TabularSplits::load(&self.data, &self.config)?;
        let batch = self.config.batch(splits.train.inputs.rows());
        memory_check::check_training(self.config.mlp(splits.classes).size(), batch, kind)?;
        let (_, report) = train::<B>(&self.config, &splits, run, &device)?;
        Ok(report)
    }
}
