//! A run's metric logs as the studio draws them: burn-train's per-epoch logs read back
//! (through [`super::confined`]), each epoch's mean per split, and training's value at each
//! iteration, thinned for a browser.

use std::collections::BTreeMap;

use burn::train::metric::NumericEntry;
use serde::Serialize;

use super::confined;
use cubenet_engine::train::{RunDir, WATCH_METRIC};

/// The splits whose metric logs a run writes, as its folders are named.
pub const SPLITS: [&str; 2] = ["train", "valid"];
/// The most points of one metric's per-iteration curve sent to a browser.
const MAX_ITERATION_POINTS: usize = 2000;

/// One metric's curves: epoch means per split, and training's value at each iteration.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Curves {
    /// `split → [(epoch, mean)]`.
    pub epochs: BTreeMap<String, Vec<(usize, f64)>>,
    /// `[(epoch position, value)]`: iteration i of n in epoch e is at e − 1 + (i + 1) / n,
    /// averaged down to at most [`MAX_ITERATION_POINTS`] points.
    pub iterations: Vec<(f64, f64)>,
}

/// `metric → split → [(epoch, entries)]`, from the run's metric logs.
pub type MetricLogs = BTreeMap<String, BTreeMap<String, Vec<(usize, Vec<NumericEntry>)>>>;

/// Every metric log of `dir`, read.
pub fn metric_logs(dir: &RunDir) -> MetricLogs {
    let mut logs = MetricLogs::new();
    for split in SPLITS {
        let split_dir = dir.root().join(split);
        for folder in confined::entries(&split_dir) {
            let Some(epoch) = RunDir::logged_epoch(&folder) else {
                continue;
            };
            let epoch_dir = split_dir.join(&folder);
            for file in confined::entries(&epoch_dir) {
                let Some(metric) = file.strip_suffix(".log") else {
                    continue;
                };
                let metric = metric.replace('_', " ");
                if metric == WATCH_METRIC {
                    continue;
                }
                let Ok(text) = confined::read_text(&epoch_dir.join(&file)) else {
                    continue;
                };
                let entries = text
                    .lines()
                    .filter_map(|line| NumericEntry::deserialize(line).ok())
                    .collect();
                logs.entry(metric)
                    .or_default()
                    .entry(split.to_string())
                    .or_default()
                    .push((epoch, entries));
            }
        }
    }
    for splits in logs.values_mut() {
        for epochs in splits.values_mut() {
            epochs.sort_by_key(|(epoch, _)| *epoch);
        }
    }
    logs
}

/// The mean of an epoch's entries, each weighted by the items it counts.
pub fn epoch_mean(entries: &[NumericEntry]) -> Option<f64> {
    let (sum, count) = entries.iter().fold((0.0, 0usize), |(sum, count), entry| {
        let (value, n) = value_and_count(entry);
        (sum + value * n as f64, count + n)
    });
    (count > 0).then(|| sum / count as f64)
}

pub fn value_and_count(entry: &NumericEntry) -> (f64, usize) {
    match entry {
        NumericEntry::Value(value) => (*value, 1),
        NumericEntry::Aggregated {
            aggregated_value,
            count,
        } => (*aggregated_value, *count),
    }
}

pub fn curves(splits: &BTreeMap<String, Vec<(usize, Vec<NumericEntry>)>>) -> Curves {
    let epochs = splits
        .iter()
        .map(|(split, epochs)| {
            let means = epochs
                .iter()
                .filter_map(|(epoch, entries)| Some((*epoch, epoch_mean(entries)?)))
                .collect();
            (split.clone(), means)
        })
        .collect();
    let mut iterations = Vec::new();
    for (epoch, entries) in splits.get("train").into_iter().flatten() {
        let n = entries.len() as f64;
        iterations.extend(entries.iter().enumerate().map(|(i, entry)| {
            let position = (*epoch as f64 - 1.0) + (i as f64 + 1.0) / n;
            (position, value_and_count(entry).0)
        }));
    }
    Curves {
        epochs,
        iterations: averaged_down(iterations, MAX_ITERATION_POINTS),
    }
}

/// `points` averaged in consecutive groups so that at most `most` remain.
fn averaged_down(points: Vec<(f64, f64)>, most: usize) -> Vec<(f64, f64)> {
    let group = points.len().div_ceil(most.max(1)).max(1);
    points
        .chunks(group)
        .map(|chunk| {
            let x = chunk.last().map_or(0.0, |p| p.0);
            let y = chunk.iter().map(|p| p.1).sum::<f64>() / chunk.len() as f64;
            (x, y)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_means_weigh_each_entry_by_its_items() {
        let entries = [
            NumericEntry::Aggregated {
                aggregated_value: 1.0,
                count: 3,
            },
            NumericEntry::Value(5.0),
        ];
        assert_eq!(epoch_mean(&entries), Some(2.0));
        assert_eq!(epoch_mean(&[]), None);
    }

    #[test]
    fn long_curves_are_averaged_down_to_the_most_points() {
        let points: Vec<(f64, f64)> = (0..10).map(|i| (i as f64, i as f64)).collect();
        assert_eq!(
            averaged_down(points.clone(), 4),
            [(2.0, 1.0), (5.0, 4.0), (8.0, 7.0), (9.0, 9.0)]
        );
        assert_eq!(averaged_down(points.clone(), 10), points);
    }
}
