//! SGD parameter updates in one pass over each parameter (Burn's `Sgd` runs a kernel per
//! arithmetic op: g·lr, then p − that; with momentum, three more):
//!
//!   plain:     p' = p − lr · g
//!   momentum:  v' = μ · v + g,   p' = p − lr · v'

use cubecl::prelude::*;

#[cube(launch_unchecked)]
pub fn sgd_update<F: Float>(param: &Tensor<F>, grad: &Tensor<F>, updated: &mut Tensor<F>, lr: f32) {
    let pos = ABSOLUTE_POS;
    if pos >= updated.len() {
        terminate!();
    }
    updated[pos] = param[pos] - F::cast_from(lr) * grad[pos];
}

#[cube(launch_unchecked)]
pub fn sgd_momentum_update<F: Float>(
    param: &Tensor<F>,
    grad: &Tensor<F>,
    velocity: &Tensor<F>,
    updated: &mut Tensor<F>,
    updated_velocity: &mut Tensor<F>,
    lr: f32,
    momentum: f32,
) {
    let pos = ABSOLUTE_POS;
    if pos >= updated.len() {
        terminate!();
    }
    let v = F::cast_from(momentum) * velocity[pos] + grad[pos];
    updated_velocity[pos] = v;
    updated[pos] = param[pos] - F::cast_from(lr) * v;
}
