//! The SGD updates on the CPU: one pass over each parameter that reads the parameter, its
//! gradient (and velocity) and writes the new values, the weight decay folded in.

use burn::backend::ndarray::NdArrayTensor;
use rayon::prelude::*;

use super::tensor::{dims, output, tensor, values};

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

/// With momentum μ: `v' = μ · velocity + grad + weight_decay · param`, then
/// `param − lr · v'`, for each parameter; returns the parameters and the velocities.
pub(super) fn sgd_momentum(
    params: &[NdArrayTensor],
    grads: &[NdArrayTensor],
    velocities: &[NdArrayTensor],
    lr: f64,
    momentum: f64,
    weight_decay: f64,
) -> (Vec<NdArrayTensor>, Vec<NdArrayTensor>) {
    let (lr, mu, decay) = (lr as f32, momentum as f32, weight_decay as f32);
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
                    *out_v = mu * v + (g + decay * p);
                    *out = p - lr * *out_v;
                });
            let shape = dims(param);
            (tensor(updated, &shape), tensor(new_velocity, &shape))
        })
        .unzip()
}
