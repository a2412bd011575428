//! The renderer used off a terminal (CI, pipes, log files): one plain line per epoch
//! instead of Burn's per-iteration debug output.

use std::collections::HashMap;
use std::io::Write;
use std::time::Instant;

use burn::train::metric::{MetricDefinition, MetricId, NumericEntry};
use burn::train::renderer::{
    EvaluationName, EvaluationProgress, MetricState, MetricsRenderer, MetricsRendererEvaluation,
    MetricsRendererTraining, ProgressType, TrainingProgress,
};

/// Batch-size-weighted running means of the numeric metrics of one split over one epoch.
#[derive(Debug, Default, Clone)]
pub struct EpochMeans {
    sums: HashMap<String, (f64, usize)>,
}

impl EpochMeans {
    /// Adds one batch's value of `metric`, weighted by the batch's item count.
    pub fn add(&mut self, metric: &str, value: f64, count: usize) {
        let entry = self.sums.entry(metric.to_string()).or_default();
        entry.0 += value * count as f64;
        entry.1 += count;
    }

    /// Adds every batch `other` holds.
    fn absorb(&mut self, other: EpochMeans) {
        for (metric, (sum, count)) in other.sums {
            let entry = self.sums.entry(metric).or_default();
            entry.0 += sum;
            entry.1 += count;
        }
    }

    /// The mean of `metric` over the epoch so far, if it was reported.
    pub fn mean(&self, metric: &str) -> Option<f64> {
        self.sums
            .get(metric)
            .filter(|(_, count)| *count > 0)
            .map(|(sum, count)| sum / *count as f64)
    }
}

/// Formats the line printed at the end of an epoch, e.g.
/// `epoch 2/10  train loss 0.1234 acc 96.12%  valid loss 0.0950 acc 97.03%  4.2s`
/// (no `acc` columns when neither split reports an accuracy, as in regression).
pub fn epoch_line(
    epoch: usize,
    epochs: usize,
    train: &EpochMeans,
    valid: &EpochMeans,
    seconds: f64,
) -> String {
    let with_accuracy = train.mean("Accuracy").is_some() || valid.mean("Accuracy").is_some();
    let split = |name: &str, means: &EpochMeans| {
        let loss = means.mean("Loss").map_or("-".into(), |v| format!("{v:.4}"));
        if !with_accuracy {
            return format!("{name} loss {loss}");
        }
        let acc = means
            .mean("Accuracy")
            .map_or("-".into(), |v| format!("{v:.2}%"));
        format!("{name} loss {loss} acc {acc}")
    };
    format!(
        "epoch {epoch}/{epochs}  {}  {}  {seconds:.1}s",
        split("train", train),
        split("valid", valid)
    )
}

/// Prints [`epoch_line`]s to stdout as epochs finish.
pub struct EpochLineRenderer {
    names: HashMap<MetricId, String>,
    train: EpochMeans,
    valid: EpochMeans,
    /// The training metrics of the step being reported, until its epoch is known.
    step: EpochMeans,
    /// (epoch, epochs) of the epoch whose line is not printed yet.
    current: Option<(usize, usize)>,
    /// The last epoch whose line is printed. Under DDP another replica's last steps of an
    /// epoch can arrive after the first device validated it; they are left out rather than
    /// printed as a line of their own.
    printed: usize,
    epoch_start: Instant,
}

impl Default for EpochLineRenderer {
    fn default() -> Self {
        Self {
            names: HashMap::new(),
            train: EpochMeans::default(),
            valid: EpochMeans::default(),
            step: EpochMeans::default(),
            current: None,
            printed: 0,
            epoch_start: Instant::now(),
        }
    }
}

impl EpochLineRenderer {
    fn record(&self, means: &mut EpochMeans, state: MetricState) {
        if let MetricState::Numeric(entry, numeric) = state
            && let Some(name) = self.names.get(&entry.metric_id)
        {
            let (value, count) = match numeric {
                NumericEntry::Value(v) => (v, 1),
                NumericEntry::Aggregated {
                    aggregated_value,
                    count,
                } => (aggregated_value, count),
            };
            means.add(name, value, count);
        }
    }

    /// Prints the pending epoch's line, if any, and starts the clock for the next one.
    fn finish_epoch(&mut self) {
        if let Some((epoch, epochs)) = self.current.take() {
            self.printed = epoch;
            let seconds = self.epoch_start.elapsed().as_secs_f64();
            println!(
                "{}",
                epoch_line(epoch, epochs, &self.train, &self.valid, seconds)
            );
            std::io::stdout().flush().ok();
            self.train = EpochMeans::default();
            self.valid = EpochMeans::default();
            self.epoch_start = Instant::now();
        }
    }
}

impl MetricsRendererTraining for EpochLineRenderer {
    fn update_train(&mut self, state: MetricState) {
        let mut means = std::mem::take(&mut self.step);
        self.record(&mut means, state);
        self.step = means;
    }

    fn update_valid(&mut self, state: MetricState) {
        let mut means = std::mem::take(&mut self.valid);
        self.record(&mut means, state);
        self.valid = means;
    }

    fn render_train(&mut self, item: TrainingProgress, _: Vec<ProgressType>) {
        let epoch = (
            item.global_progress.items_processed,
            item.global_progress.items_total,
        );
        let step = std::mem::take(&mut self.step);
        if epoch.0 <= self.printed {
            return;
        }
        if self.current.is_some_and(|current| current != epoch) {
            // The previous epoch had no validation items: close it now.
            self.finish_epoch();
        }
        self.current = Some(epoch);
        self.train.absorb(step);
    }

    fn render_valid(&mut self, item: TrainingProgress, _: Vec<ProgressType>) {
        if item
            .progress
            .is_some_and(|p| p.items_processed >= p.items_total)
        {
            self.finish_epoch();
        }
    }

    fn on_train_end(
        &mut self,
        _summary: Option<burn::train::LearnerSummary>,
    ) -> Result<(), Box<dyn core::error::Error>> {
        self.finish_epoch();
        Ok(())
    }
}

impl MetricsRendererEvaluation for EpochLineRenderer {
    fn update_test(&mut self, _name: EvaluationName, _state: MetricState) {}

    fn render_test(&mut self, _item: EvaluationProgress, _: Vec<ProgressType>) {}
}

impl MetricsRenderer for EpochLineRenderer {
    fn manual_close(&mut self) {}

    fn register_metric(&mut self, definition: MetricDefinition) {
        self.names.insert(definition.metric_id, definition.name);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use burn::data::dataloader::Progress;
    use burn::train::metric::{MetricAttributes, MetricEntry, SerializedEntry};

    use super::*;

    /// One training step's loss `value` (batch of 1) in epoch `epoch` of 3.
    fn train_step(renderer: &mut EpochLineRenderer, loss: &MetricId, epoch: usize, value: f64) {
        let entry = MetricEntry::new(
            loss.clone(),
            SerializedEntry::new(String::new(), String::new()),
        );
        renderer.update_train(MetricState::Numeric(entry, NumericEntry::Value(value)));
        renderer.render_train(
            TrainingProgress {
                progress: None,
                global_progress: Progress::new(epoch, 3),
                iteration: None,
            },
            Vec::new(),
        );
    }

    #[test]
    fn steps_of_an_epoch_already_printed_are_left_out() {
        let mut renderer = EpochLineRenderer::default();
        let loss = MetricId::new(Arc::new("Loss".to_string()));
        renderer.register_metric(MetricDefinition {
            metric_id: loss.clone(),
            name: "Loss".into(),
            description: None,
            attributes: MetricAttributes::None,
        });
        train_step(&mut renderer, &loss, 1, 1.0);
        renderer.finish_epoch();
        assert_eq!(renderer.printed, 1);
        // Another replica's last step of epoch 1 arrives after epoch 1's line.
        train_step(&mut renderer, &loss, 1, 100.0);
        assert_eq!(renderer.current, None);
        train_step(&mut renderer, &loss, 2, 3.0);
        assert_eq!(renderer.current, Some((2, 3)));
        assert_eq!(renderer.train.mean("Loss"), Some(3.0));
    }

    #[test]
    fn means_are_weighted_by_batch_size() {
        let mut means = EpochMeans::default();
        means.add("Loss", 1.0, 3);
        means.add("Loss", 3.0, 1);
        assert_eq!(means.mean("Loss"), Some(1.5));
        assert_eq!(means.mean("Accuracy"), None);
    }

    #[test]
    fn line_format() {
        let mut train = EpochMeans::default();
        train.add("Loss", 0.123456, 10);
        train.add("Accuracy", 96.125, 10);
        let mut valid = EpochMeans::default();
        valid.add("Loss", 0.095, 5);
        valid.add("Accuracy", 97.0, 5);
        assert_eq!(
            epoch_line(2, 10, &train, &valid, 4.25),
            "epoch 2/10  train loss 0.1235 acc 96.12%  valid loss 0.0950 acc 97.00%  4.2s"
        );
        assert_eq!(
            epoch_line(1, 1, &train, &EpochMeans::default(), 0.0),
            "epoch 1/1  train loss 0.1235 acc 96.12%  valid loss - acc -  0.0s"
        );
        let mut regression = EpochMeans::default();
        regression.add("Loss", 0.5, 2);
        assert_eq!(
            epoch_line(3, 5, &regression, &regression, 1.0),
            "epoch 3/5  train loss 0.5000  valid loss 0.5000  1.0s"
        );
    }
}
