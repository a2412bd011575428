//! Softmax cross-entropy over class logits `[rows, classes]`, mean over the batch, and its
//! gradient:
//!
//!   loss = (1/N) Σ_n [ log Σ_c exp(l[n, c]) − l[n, t_n] ]
//!   dl[n, c] = g · (softmax(l[n])[c] − [c = t_n]) / N        (g: the loss's own gradient)
//!
//! The log-sum-exp subtracts each row's maximum first. A target outside [0, C) makes the
//! loss NaN (it has no logit to read), so a bad label cannot train silently.
//! The forward is one cube: its units take every `cube_size`-th row and add their losses
//! in shared memory, so the mean comes out in one launch with no host round trip. The
//! backward is one unit per row.

use cubecl::prelude::*;

use super::cube_sum::sum_rows_over_units;

/// (max over the row, Σ exp(l − max)) of logit row `row`.
#[cube]
fn row_exp_sum<F: Float>(logits: &Array<F>, row: usize, classes: usize) -> (F, F) {
    let base = row * classes;
    let mut max = F::min_value();
    for c in 0..classes {
        max = F::max(max, logits[base + c]);
    }
    let mut sum = F::new(0.0);
    for c in 0..classes {
        sum += F::exp(logits[base + c] - max);
    }
    (max, sum)
}

#[cube(launch_unchecked)]
#[allow(clippy::eq_op)] // the NaN below is made from a run-time value on purpose
pub fn cross_entropy_forward<F: Float, I: Int>(
    logits: &Array<F>,
    targets: &Array<I>,
    loss: &mut Array<F>,
    rows: usize,
    classes: usize,
    #[comptime] cube_size: u32,
) {
    let mut partial = F::new(0.0);
    let mut row = UNIT_POS as usize;
    while row < rows {
        let (max, sum) = row_exp_sum(logits, row, classes);
        let target = targets[row];
        // NaN for a target with no logit, made at run time: a NaN literal does not compile
        // for CUDA.
        let mut picked = (max - max) / (max - max);
        if target >= I::new(0) && usize::cast_from(target) < classes {
            picked = logits[row * classes + usize::cast_from(target)];
        }
        partial += F::ln(sum) + max - picked;
        row += cube_size as usize;
    }
    let mut shared = SharedMemory::<F>::new(cube_size as usize);
    shared[UNIT_POS as usize] = partial;
    sum_rows_over_units(&mut shared, 1u32, cube_size);
    if UNIT_POS == 0 {
        loss[0] = shared[0] / F::cast_from(rows);
    }
}

#[cube(launch_unchecked)]
pub fn cross_entropy_backward<F: Float, I: Int>(
    logits: &Array<F>,
    targets: &Array<I>,
    grad: &Array<F>,
    logits_grad: &mut Array<F>,
    rows: usize,
    classes: usize,
) {
    let row = ABSOLUTE_POS;
    if row >= rows {
        terminate!();
    }
    let (max, sum) = row_exp_sum(logits, row, classes);
    let scale = grad[0] / (sum * F::cast_from(rows));
    let target = targets[row];
    let base = row * classes;
    for c in 0..classes {
        let mut g = F::exp(logits[base + c] - max) * scale;
        if I::cast_from(c) == target {
            g -= grad[0] / F::cast_from(rows);
        }
        logits_grad[base + c] = g;
    }
}
