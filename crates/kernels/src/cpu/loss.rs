//! The mean softmax cross-entropy on the CPU in one pass per row: the row's maximum, its
//! log-sum-exp and the target's log-probability for the loss; softmax minus one-hot, scaled,
//! for the gradient.

use burn::backend::ndarray::NdArrayTensor;
use rayon::prelude::*;

use super::tensor::{dims, indices, output, tensor, values};

/// Rows below which the threads cost more than the work.
const ROWS_PER_TASK: usize = 256;

/// `max` and `ln Σ exp(v − max)` of a row, the two halves of its log-sum-exp.
fn log_sum_exp(row: &[f32]) -> (f32, f32) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = row.iter().map(|v| (v - max).exp()).sum();
    (max, sum.ln())
}

/// The class index of row `row`, checked against the number of classes.
fn target(targets: &[i64], row: usize, classes: usize) -> usize {
    let class = targets[row];
    assert!(
        (0..classes as i64).contains(&class),
        "target {class} of row {row} is not a class index below {classes}"
    );
    class as usize
}

/// The mean over rows of `logsumexp(logits[r]) − logits[r][targets[r]]`, as a `[1]` tensor.
pub(super) fn forward(logits: &NdArrayTensor, targets: &NdArrayTensor) -> NdArrayTensor {
    let [rows, classes] = matrix(logits);
    let (logits, targets) = (values(logits), indices(targets));
    let row_len = classes.max(1);
    // Each task's sum, added in task order: the same total whichever thread ran which.
    let task_sums: Vec<f64> = logits
        .par_chunks(ROWS_PER_TASK * row_len)
        .enumerate()
        .map(|(task, rows)| {
            let first = task * ROWS_PER_TASK;
            rows.chunks(row_len)
                .enumerate()
                .map(|(r, row)| {
                    let (max, log_sum) = log_sum_exp(row);
                    f64::from(max + log_sum - row[target(&targets, first + r, classes)])
                })
                .sum()
        })
        .collect();
    let total: f64 = task_sums.iter().sum();
    tensor(vec![(total / rows as f64) as f32], &[1])
}

/// `(softmax(logits) − one_hot(targets)) · grad / rows`, the gradient of [`forward`] given
/// the loss's own gradient `grad` (one element).
pub(super) fn backward(
    logits: &NdArrayTensor,
    targets: &NdArrayTensor,
    grad: &NdArrayTensor,
) -> NdArrayTensor {
    let [rows, classes] = matrix(logits);
    let (logits, targets) = (values(logits), indices(targets));
    let scale = values(grad)[0] / rows as f32;
    let mut logits_grad = output(rows * classes);
    if classes > 0 {
        logits_grad
            .par_chunks_mut(classes)
            .with_min_len(ROWS_PER_TASK)
            .zip(logits.par_chunks(classes))
            .enumerate()
            .for_each(|(r, (out, row))| {
                let (max, log_sum) = log_sum_exp(row);
                for (o, v) in out.iter_mut().zip(row) {
                    *o = (v - max - log_sum).exp() * scale;
                }
                out[target(&targets, r, classes)] -= scale;
            });
    }
    tensor(logits_grad, &[rows, classes])
}

/// The two dims of the logits.
fn matrix(logits: &NdArrayTensor) -> [usize; 2] {
    match dims(logits)[..] {
        [rows, classes] => [rows, classes],
        ref other => panic!("logits are [rows, classes], got dims {other:?}"),
    }
}
