//! A trained tabular model with everything it needs to read new rows — the resolved config
//! and the standardization fitted on the training split — saved and loaded as one.

use std::path::Path;

use burn::prelude::*;
use cubenet_kernels::KernelBackend;

use super::{TabularConfig, TestMetrics};
use crate::atomic_file::{write_atomically, write_atomically_with};
use crate::data::{DataError, Standardizer, Table, check_replaceable_csv};
use crate::model::{TabularNet, Task};
use crate::train::{RunDir, TrainError, load_model, load_settings, save_config, save_model};

/// Rows per forward pass when predicting, to bound device memory on large files.
const PREDICT_CHUNK: usize = 65_536;

/// A network with its config and preprocessing.
#[derive(Debug)]
pub struct TabularModel<B: Backend> {
    /// The run's config, with `classes` resolved.
    pub config: TabularConfig,
    pub standardizer: Option<Standardizer>,
    pub net: TabularNet<B>,
}

impl<B: KernelBackend> TabularModel<B> {
    /// Writes `config.json`, `preprocessing.json` and `model.mpk` into `dir`.
    /// (`preprocessing.json` is `null` when the run did not standardize.)
    pub fn save(&self, dir: &RunDir) -> Result<(), TrainError> {
        save_config(dir, &self.config)?;
        let json = serde_json::to_string_pretty(&self.standardizer).expect("serializes");
        write_atomically(&dir.preprocessing(), json.as_bytes())?;
        save_model(dir, self.net.clone())?;
        Ok(())
    }

    /// Reads what [`TabularModel::save`] wrote in `dir`.
    pub fn load(dir: &RunDir, device: &B::Device) -> Result<Self, TrainError> {
        let config: TabularConfig = load_settings(&dir.config())?;
        let standardizer: Option<Standardizer> = load_settings(&dir.preprocessing())?;
        if standardizer
            .as_ref()
            .is_some_and(|s| s.mean.len() != config.features.len())
        {
            return Err(TrainError::Load {
                path: dir.preprocessing(),
                reason: format!("it does not hold {} features", config.features.len()),
            });
        }
        let net = TabularNet {
            mlp: config.mlp(config.classes.unwrap_or(0)).init(device)?,
            task: config.task,
        };
        let net = load_model(dir, net, device)?;
        Ok(Self {
            config,
            standardizer,
            net,
        })
    }

    /// Names of the columns [`TabularModel::predict`] returns: `<target>_predicted` per
    /// target for regression; `<target>_predicted` (the class) and `<target>_probability`
    /// (of that class) for classification.
    pub fn prediction_columns(&self) -> Vec<String> {
        let suffixes: &[&str] = if self.config.task.is_classification() {
            &["predicted", "probability"]
        } else {
            &["predicted"]
        };
        self.config
            .targets
            .iter()
            .flat_map(|t| suffixes.iter().map(move |s| format!("{t}_{s}")))
            .collect()
    }

    /// Predictions for `features` (raw, in the config's feature order).
    pub fn predict(&self, features: &Table, device: &B::Device) -> Table {
        let mut inputs = features.clone();
        if let Some(standardizer) = &self.standardizer {
            standardizer.apply(&mut inputs);
        }
        let width = inputs.width();
        let mut values = Vec::new();
        for chunk in inputs.values.chunks(PREDICT_CHUNK * width) {
            let rows = chunk.len() / width;
            let x =
                Tensor::<B, 2>::from_data(TensorData::new(chunk.to_vec(), [rows, width]), device);
            let out = self
                .net
                .predict(x)
                .into_data()
                .into_vec::<f32>()
                .expect("f32 outputs");
            match self.config.task {
                Task::Regression => values.extend(out),
                Task::Binary => {
                    for p in out {
                        values.extend([f32::from(p > 0.5), p]);
                    }
                }
                Task::Multiclass => {
                    let classes = out.len() / rows;
                    for probabilities in out.chunks_exact(classes) {
                        let (class, p) = probabilities
                            .iter()
                            .enumerate()
                            .max_by(|a, b| a.1.total_cmp(b.1))
                            .expect("at least one class");
                        values.extend([class as f32, *p]);
                    }
                }
            }
        }
        Table {
            columns: self.prediction_columns(),
            values,
        }
    }

    /// The task's metrics of the predictions for `features` against `targets`.
    pub fn evaluate(&self, features: &Table, targets: &Table, device: &B::Device) -> TestMetrics {
        let predicted = self.predict(features, device);
        if self.config.task.is_classification() {
            let classes = |t: &Table| -> Vec<usize> {
                t.values
                    .chunks_exact(t.width())
                    .map(|row| row[0] as usize)
                    .collect()
            };
            TestMetrics::classification(&classes(&predicted), &classes(targets))
        } else {
            TestMetrics::Regression(super::RegressionMetrics::new(
                &predicted.values,
                &targets.values,
                targets.width(),
            ))
        }
    }

    /// Reads the feature columns of the CSV at `input`, predicts, and writes `output`: every
    /// input column as it was, then the prediction columns. Returns the number of rows.
    pub fn predict_csv(
        &self,
        input: &Path,
        output: &Path,
        device: &B::Device,
    ) -> Result<usize, TrainError> {
        let features = Table::read_csv(input, &self.config.features)?;
        let predicted = self.predict(&features, device);
        let columns: Vec<&str> = predicted.columns.iter().map(String::as_str).collect();
        check_replaceable_csv(output, &columns)?;
        // Second pass over the input: copy each record as it is, then its predictions.
        let mut reader = csv::Reader::from_path(input).map_err(|e| DataError::Csv {
            path: input.to_path_buf(),
            reason: e.to_string(),
        })?;
        write_atomically_with(output, |partial| {
            let mut writer = csv::Writer::from_path(partial)?;
            let mut header = reader.headers()?.clone();
            // An input that is itself a predictions file keeps its own columns only: its
            // old predictions give way to the new ones instead of standing beside them.
            let carried = match header.iter().collect::<Vec<_>>().ends_with(&columns) {
                true => header.len() - columns.len(),
                false => header.len(),
            };
            header.truncate(carried);
            header.extend(predicted.columns.iter());
            writer.write_record(&header)?;
            for (i, record) in reader.records().enumerate() {
                let mut record = record?;
                record.truncate(carried);
                record.extend(predicted.row(i).iter().map(|v| v.to_string()));
                writer.write_record(&record)?;
            }
            writer.flush()
        })?;
        Ok(predicted.rows())
    }
}
