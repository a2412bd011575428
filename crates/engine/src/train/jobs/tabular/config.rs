//! Settings of a tabular run, saved as `config.json` next to the model.

use std::path::PathBuf;

use burn::prelude::*;

use crate::data::SplitRatios;
use crate::model::{Activation, MlpConfig, Task};
use crate::train::{OptimizerConfig, TrainError};

/// Everything that decides what a tabular run computes.
#[derive(Config, Debug)]
pub struct TabularConfig {
    /// Input columns, by CSV header name.
    pub features: Vec<String>,
    /// Target columns: one or more for regression, exactly one for classification.
    pub targets: Vec<String>,
    pub task: Task,
    /// Classes of a multi-class task; found from the training data (largest label + 1)
    /// when absent, and saved resolved.
    pub classes: Option<usize>,
    /// Hidden layer widths, input side first; empty for a linear (or logistic) model.
    #[config(default = "Vec::new()")]
    pub hidden: Vec<usize>,
    /// Nonlinearity of every hidden layer, unless `layer_activations` names each.
    #[config(default = "Activation::Sigmoid")]
    pub activation: Activation,
    /// One nonlinearity per hidden layer; empty means `activation` everywhere.
    #[config(default = "Vec::new()")]
    pub layer_activations: Vec<Activation>,
    #[config(default = "OptimizerConfig::default()")]
    pub optimizer: OptimizerConfig,
    /// Passes over the training rows (early stopping may end sooner).
    #[config(default = 100)]
    pub epochs: usize,
    /// Rows per step; absent means full batch (one step per epoch).
    pub batch_size: Option<usize>,
    /// Stop after this many epochs without a lower validation loss; the best epoch's
    /// weights are kept.
    #[config(default = 10)]
    pub patience: usize,
    #[config(default = "SplitRatios::default()")]
    pub split: SplitRatios,
    /// Seeds the split, weight init and batch shuffling.
    #[config(default = 42)]
    pub seed: u64,
    /// Standardize features with the training split's mean and deviation.
    #[config(default = true)]
    pub standardize: bool,
    /// Start from these weights (safetensors or PyTorch `.pt`, PyTorch's names; see
    /// `cubenet export`) instead of random ones.
    pub init_from: Option<PathBuf>,
}

impl TabularConfig {
    /// The columns a table is read with: the features, then the targets.
    pub fn columns(&self) -> Vec<String> {
        self.features.iter().chain(&self.targets).cloned().collect()
    }

    /// Rows per step with `train_rows` training rows: the batch size, at most all of them.
    pub fn batch(&self, train_rows: usize) -> usize {
        self.batch_size.unwrap_or(train_rows).min(train_rows)
    }

    /// Refuses settings that cannot train, naming the setting.
    pub fn validate(&self) -> Result<(), TrainError> {
        let invalid = |msg: String| Err(TrainError::Config(msg));
        if self.features.is_empty() {
            return invalid("name at least one feature column".into());
        }
        if self.targets.is_empty() {
            return invalid("name at least one target column".into());
        }
        for (kind, columns) in [("feature", &self.features), ("target", &self.targets)] {
            let twice = columns
                .iter()
                .enumerate()
                .find(|&(index, column)| columns[..index].contains(column));
            if let Some((_, column)) = twice {
                return invalid(format!("the {kind} column `{column}` is named twice"));
            }
        }
        if let Some(both) = self.targets.iter().find(|t| self.features.contains(t)) {
            return invalid(format!("column `{both}` is both a feature and a target"));
        }
        if self.task.is_classification() && self.targets.len() != 1 {
            return invalid(format!(
                "a {:?} task takes exactly one target column, got {}",
                self.task,
                self.targets.len()
            ));
        }
        if self.task == Task::Multiclass && self.classes.is_some_and(|c| c < 2) {
            return invalid("a multi-class task needs at least 2 classes".into());
        }
        if self.epochs == 0 {
            return invalid("epochs must be at least 1".into());
        }
        if self.batch_size == Some(0) {
            return invalid("batch-size must be at least 1".into());
        }
        if self.patience == 0 {
            return invalid("patience must be at least 1".into());
        }
        self.optimizer.validate().map_err(TrainError::Config)?;
        // Classes are not known before the data is read; any count checks the layers.
        self.mlp(2).check()?;
        Ok(())
    }

    /// The network's configuration; `classes` matters for multi-class tasks only.
    pub fn mlp(&self, classes: usize) -> MlpConfig {
        let outputs = match self.task {
            Task::Regression => self.targets.len(),
            Task::Binary => 1,
            Task::Multiclass => classes,
        };
        MlpConfig::new(self.features.len(), self.hidden.clone(), outputs)
            .with_activation(self.activation)
            .with_layer_activations(self.layer_activations.clone())
    }
}
