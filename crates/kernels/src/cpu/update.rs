//! The SGD and Adam updates on the CPU: one pass over each parameter that reads the
//! parameter, its gradient (and velocity or moments) and writes the new values, the weight
//! decay folded in.

use burn::backend::ndarray::NdArrayTensor;
use rayon::prelude::*;

use super::tensor::{dims, output, tensor, values};
use crate::{AdamMoments, AdamStep, MomentumStep};

/// Elements below which the threads cost more than the work.
const ELEMENTS_PER_TASK: usize = 1 << 14;

/// `param − lr · (grad + weight_decay · param)` for each parameter.
pub(super) fn sgd(
    params: &[NdArrayTensor],
    grads: &[NdArrayTensor],
    lr: f64,
    weight_decay: f64,
) -> Vec<NdArrayTensor> {
    let (lr, decay) = (lr as f32, weight_decay as f32);
    params
        .iter()
        .zip(grads)
        .map(|(param, grad)| {
            let (p, g) = (values(param), values(grad));
            let mut updated = output(p.len());
            updated
                .par_iter_mut()
                .with_min_len(ELEMENTS_PER_TASK)
                .zip(p.par_iter().zip(g.par_iter()))
                .for_each(|(out, (p, g))| *out = p - lr * (g + decay * p));
            tensor(updated, &dims(param))
        })
        .collect()
}

/// The momentum step of each parameter and its velocity (see
/// [`crate::KernelBackend::sgd_momentum_update`]); returns the parameters and the velocities.
pub(super) fn sgd_momentum(
    params: &[NdArrayTensor],
    grads: &[NdArrayTensor],
    velocities: &[NdArrayTensor],
    step: MomentumStep,
) -> (Vec<NdArrayTensor>, Vec<NdArrayTensor>) {
    let (lr, mu, decay) = (
        step.lr as f32,
        step.momentum as f32,
        step.weight_decay as f32,
    );
    let nesterov = step.nesterov;
    params
        .iter()
        .zip(grads)
        .zip(velocities)
        .map(|((param, grad), velocity)| {
            let (p, g, v) = (values(param), values(grad), values(velocity));
            let (mut updated, mut new_velocity) = (output(p.len()), output(p.len()));
            updated
                .par_iter_mut()
                .with_min_len(ELEMENTS_PER_TASK)
                .zip(new_velocity.par_iter_mut())
                .zip(p.par_iter().zip(g.par_iter()).zip(v.par_iter()))
                .for_each(|((out, out_v), ((p, g), v))| {
                    let g = g + decay * p;
                    *out_v = mu * v + g;
                    *out = match nesterov {
                        true => p - lr * (g + mu * *out_v),
                        false => p - lr * *out_v,
                    };
                });
            let shape = dims(param);
            (tensor(updated, &shape), tensor(new_velocity, &shape))
        })
        .unzip()
}

/// Adam's update of each parameter and its moments (see [`crate::KernelBackend::adam_update`]).
pub(super) fn adam(
    params: &[NdArrayTensor],
    grads: &[NdArrayTensor],
    moments: &AdamMoments<NdArrayTensor>,
    step: AdamStep,
) -> (Vec<NdArrayTensor>, AdamMoments<NdArrayTensor>) {
    let (lr, decay) = (step.lr as f32, step.weight_decay);
    let (beta_1, beta_2) = (step.beta_1, step.beta_2);
    let (factor, epsilon) = (step.moment_factor(), step.scaled_epsilon());
    let mut new = AdamMoments {
        first: Vec::new(),
        second: Vec::new(),
    };
    let mut all_updated = Vec::new();
    let operands = params
        .iter()
        .zip(grads)
        .zip(&moments.first)
        .zip(&moments.second);
    for (((param, grad), first), second) in operands {
        let (p, g) = (values(param), values(grad));
        let (m, v) = (values(first), values(second));
        let mut updated = output(p.len());
        let (mut new_m, mut new_v) = (output(p.len()), output(p.len()));
        updated
            .par_iter_mut()
            .with_min_len(ELEMENTS_PER_TASK)
            .zip(new_m.par_iter_mut().zip(new_v.par_iter_mut()))
            .zip(
                p.par_iter()
                    .zip(g.par_iter())
                    .zip(m.par_iter().zip(v.par_iter())),
            )
            .for_each(|((out, (out_m, out_v)), ((p, g), (m, v)))| {
                let g = g + decay * p;
                *out_m = beta_1 * m + (1.0 - beta_1) * g;
                *out_v = beta_2 * v + (1.0 - beta_2) * (g * g);
                *out = p - lr * (*out_m * factor / (out_v.sqrt() + epsilon));
            });
        let shape = dims(param);
        all_updated.push(tensor(updated, &shape));
        new.first.push(tensor(new_m, &shape));
        new.second.push(tensor(new_v, &shape));
    }
    (all_updated, new)
}
