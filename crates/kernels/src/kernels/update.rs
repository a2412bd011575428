//! SGD and Adam parameter updates of a whole group of parameters (a model's) in one launch;
//! Burn's `Sgd` runs a kernel per arithmetic op and parameter (g·lr, then p − that; with
//! momentum, three more), its `Adam` thirteen:
//!
//!   plain:     p' = p − lr · g
//!   momentum:  v' = μ · v + g,   p' = p − lr · v'   (Nesterov: p' = p − lr · (g + μ · v'))
//!   Adam:      m' = β1 · m + (1 − β1) · g,   v' = β2 · v + (1 − β2) · g²,
//!              p' = p − lr · (m' · c) / (√v' + ε·b)   (b, c: the bias corrections of step t)
//!
//! with weight decay λ folded into the gradient as Burn's `WeightDecay` does, g = ∂L/∂p + λ·p
//! (λ = 0 leaves it exact: no decay costs nothing but the multiply-add).
//!
//! Unit `pos` updates element `pos` of every parameter that long; the loop over the group
//! is unrolled (the group's size is part of the kernel), and all tensors are contiguous.

use cubecl::prelude::*;

#[cube(launch_unchecked)]
pub fn sgd_update<F: Float>(
    params: &Sequence<Array<F>>,
    grads: &Sequence<Array<F>>,
    updated: &mut Sequence<Array<F>>,
    lr: f32,
    weight_decay: f32,
) {
    let pos = ABSOLUTE_POS;
    #[unroll]
    for i in 0..params.len() {
        let param = params.index(i);
        if pos < param.len() {
            let grad = grads.index(i)[pos] + F::cast_from(weight_decay) * param[pos];
            updated.index_mut(i)[pos] = param[pos] - F::cast_from(lr) * grad;
        }
    }
}

#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn sgd_momentum_update<F: Float>(
    params: &Sequence<Array<F>>,
    grads: &Sequence<Array<F>>,
    velocities: &Sequence<Array<F>>,
    updated: &mut Sequence<Array<F>>,
    updated_velocities: &mut Sequence<Array<F>>,
    lr: f32,
    momentum: f32,
    weight_decay: f32,
    #[comptime] nesterov: bool,
) {
    let pos = ABSOLUTE_POS;
    #[unroll]
    for i in 0..params.len() {
        let param = params.index(i);
        if pos < param.len() {
            let grad = grads.index(i)[pos] + F::cast_from(weight_decay) * param[pos];
            let velocity = velocities.index(i);
            let v = F::cast_from(momentum) * velocity[pos] + grad;
            updated_velocities.index_mut(i)[pos] = v;
            if nesterov {
                updated.index_mut(i)[pos] =
                    param[pos] - F::cast_from(lr) * (grad + F::cast_from(momentum) * v);
            } else {
                updated.index_mut(i)[pos] = param[pos] - F::cast_from(lr) * v;
            }
        }
    }
}

/// Adam's update; the scalars are [`crate::AdamStep`]'s: `factor` is c, `epsilon` is ε·b.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn adam_update<F: Float>(
    params: &Sequence<Array<F>>,
    grads: &Sequence<Array<F>>,
    first_moments: &Sequence<Array<F>>,
    second_moments: &Sequence<Array<F>>,
    updated: &mut Sequence<Array<F>>,
    updated_first: &mut Sequence<Array<F>>,
    updated_second: &mut Sequence<Array<F>>,
    lr: f32,
    beta_1: f32,
    beta_2: f32,
    factor: f32,
    epsilon: f32,
    weight_decay: f32,
) {
    let pos = ABSOLUTE_POS;
    #[unroll]
    for i in 0..params.len() {
        let param = params.index(i);
        if pos < param.len() {
            let p = param[pos];
            let grad = grads.index(i)[pos] + F::cast_from(weight_decay) * p;
            let m = F::cast_from(beta_1) * first_moments.index(i)[pos]
                + F::cast_from(1.0 - beta_1) * grad;
            let v = F::cast_from(beta_2) * second_moments.index(i)[pos]
                + F::cast_from(1.0 - beta_2) * (grad * grad);
            updated_first.index_mut(i)[pos] = m;
            updated_second.index_mut(i)[pos] = v;
            let direction = m * F::cast_from(factor) / (F::sqrt(v) + F::cast_from(epsilon));
            updated.index_mut(i)[pos] = p - F::cast_from(lr) * direction;
        }
    }
}
