//! The group SGD updates (plain, with momentum, with Nesterov's momentum) and Adam updates against float64 on the
//! host: each parameter shape alone, and all of them (ranks 1, 2 and 4 mixed, sizes around
//! the launch's cube size) as one group, in both orders; with weight decay in about half of
//! the groups and without (λ = 0) in the rest; Adam at its first step (zero moments) and at
//! later ones. And the packing of a group's gradients into one buffer for one all-reduce,
//! and back out, for the same groups.

use burn::prelude::*;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{TensorMetadata, TensorPrimitive};
use cubenet_kernels::testing::with_default_bodies;
use cubenet_kernels::{AdamMoments, AdamStep, AutodiffKernelBackend, KernelBackend, MomentumStep};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::cases::values;
use crate::harness::{
    KernelCheck, Reference, compare, compare_within, floats, on_each_backend, tensor,
};

/// Parameter shapes, flattened to 4-D: a bias, a dense weight, conv filters, odd sizes.
const SHAPES: [[usize; 4]; 7] = [
    [1, 1, 1, 1],
    [1, 1, 1, 10],
    [1, 1, 5408, 10],
    [32, 1, 3, 3],
    [65, 7, 5, 5],
    [1, 1, 1, 257],
    [3, 1, 1, 1023],
];

/// (param, grad, velocity) values of parameter `index`.
fn operand_values(index: usize) -> [Vec<f32>; 3] {
    let mut rng = StdRng::seed_from_u64(31 + index as u64);
    let len = SHAPES[index].iter().product();
    std::array::from_fn(|_| values(&mut rng, len))
}

/// A group's (lr, momentum, weight decay).
fn rates(group: &[usize]) -> (f64, f64, f64) {
    let mut rng = StdRng::seed_from_u64(group.iter().fold(7, |h, &i| h * 31 + i as u64));
    let decay = match (group.len() + group[0]) % 2 {
        0 => 0.0,
        _ => rng.random_range(0.0001..0.5),
    };
    (
        rng.random_range(0.001..1.0),
        rng.random_range(0.0..0.99),
        decay,
    )
}

/// Parameter `index`'s operands on `B`, of rank 1, 2 or 4 (by index).
fn operands<B: Backend>(index: usize, device: &B::Device) -> [FloatTensor<B>; 3] {
    fn of_rank<B: Backend, const D: usize>(
        index: usize,
        device: &B::Device,
    ) -> [FloatTensor<B>; 3] {
        let full = SHAPES[index];
        let shape: [usize; D] = std::array::from_fn(|i| match i {
            0 => full[..=4 - D].iter().product(),
            _ => full[4 - D + i],
        });
        operand_values(index).map(|v| tensor::<B, D>(&v, shape, device).into_primitive().tensor())
    }
    match index % 3 {
        0 => of_rank::<B, 1>(index, device),
        1 => of_rank::<B, 2>(index, device),
        _ => of_rank::<B, 4>(index, device),
    }
}

/// A primitive's values, after checking that it kept parameter `index`'s size.
fn values_of<B: Backend>(tensor: FloatTensor<B>, index: usize) -> Vec<f32> {
    let elements: usize = SHAPES[index].iter().product();
    assert_eq!(tensor.shape().num_elements(), elements, "size kept");
    let flat = B::float_reshape(tensor, [elements].into());
    floats(Tensor::<B, 1>::from_primitive(TensorPrimitive::Float(flat)))
}

/// (plain, with momentum, new velocity, with Nesterov's momentum, its velocity) of each
/// parameter of `group`, by the kernels of `B`.
fn run<B: KernelBackend>(group: &[usize], device: &B::Device) -> Vec<[Vec<f32>; 5]> {
    let (lr, momentum, decay) = rates(group);
    let [mut params, mut grads, mut velocities] = [Vec::new(), Vec::new(), Vec::new()];
    for &index in group {
        let [param, grad, velocity] = operands::<B>(index, device);
        params.push(param);
        grads.push(grad);
        velocities.push(velocity);
    }
    let plain = B::sgd_update(params.clone(), grads.clone(), lr, decay);
    let step = |nesterov| MomentumStep {
        lr,
        momentum,
        weight_decay: decay,
        nesterov,
    };
    let (nesterov, nesterov_velocities) = B::sgd_momentum_update(
        params.clone(),
        grads.clone(),
        velocities.clone(),
        step(true),
    );
    let (with_momentum, new_velocities) =
        B::sgd_momentum_update(params, grads, velocities, step(false));
    for outputs in [&plain, &with_momentum, &new_velocities, &nesterov] {
        assert_eq!(outputs.len(), group.len());
    }
    assert_eq!(nesterov_velocities.len(), group.len());
    let mut outputs = [
        plain,
        with_momentum,
        new_velocities,
        nesterov,
        nesterov_velocities,
    ]
    .map(Vec::into_iter);
    group
        .iter()
        .map(|&index| {
            outputs
                .each_mut()
                .map(|output| values_of::<B>(output.next().expect("one each"), index))
        })
        .collect()
}

/// The same in float64 on the host.
fn expected(index: usize, (lr, momentum, decay): (f64, f64, f64)) -> [Vec<f32>; 5] {
    let [param, grad, velocity] = operand_values(index);
    let g: Vec<f64> = grad
        .iter()
        .zip(&param)
        .map(|(&g, &p)| f64::from(g) + decay * f64::from(p))
        .collect();
    let v: Vec<f64> = velocity
        .iter()
        .zip(&g)
        .map(|(&v, &g)| momentum * f64::from(v) + g)
        .collect();
    let step = |d: &[f64]| -> Vec<f32> {
        param
            .iter()
            .zip(d)
            .map(|(&p, &d)| (f64::from(p) - lr * d) as f32)
            .collect()
    };
    let nesterov: Vec<f64> = g.iter().zip(&v).map(|(&g, &v)| g + momentum * v).collect();
    let v32: Vec<f32> = v.iter().map(|&v| v as f32).collect();
    [step(&g), step(&v), v32.clone(), step(&nesterov), v32]
}

/// The groups: each shape alone, then all of them forwards and backwards.
fn groups() -> Vec<Vec<usize>> {
    let all: Vec<usize> = (0..SHAPES.len()).collect();
    let mut groups: Vec<Vec<usize>> = all.iter().map(|&i| vec![i]).collect();
    groups.push(all.iter().rev().copied().collect());
    groups.push(all);
    groups
}

fn check<B: KernelBackend>(device: &B::Device) -> (usize, f64) {
    let mut worst = 0f64;
    let groups = groups();
    for group in &groups {
        for (&index, got) in group.iter().zip(run::<B>(group, device)) {
            let want = expected(index, rates(group));
            let what = [
                "plain",
                "momentum",
                "velocity",
                "Nesterov",
                "Nesterov velocity",
            ];
            for (what, (a, b)) in what.iter().zip(got.iter().zip(&want)) {
                let label = format!(
                    "{what} update of shape {:?} in group {group:?}",
                    SHAPES[index]
                );
                worst = worst.max(compare(&label, a, b));
            }
        }
    }
    (groups.len(), worst)
}

struct UpdateCheck;

impl KernelCheck for UpdateCheck {
    fn run<B: AutodiffKernelBackend>(&self, device: &B::Device) -> (usize, f64) {
        // The optimizer updates the inner (non-autodiff) tensors: that is where the kernels are.
        check::<B::InnerBackend>(device)
    }
}

#[test]
fn sgd_updates_match_float64() {
    on_each_backend(
        "sgd_update, sgd_momentum_update (groups; Nesterov too)",
        UpdateCheck,
    );
}

#[test]
fn sgd_update_default_bodies_match_float64() {
    with_default_bodies(|| check::<Reference>(&Default::default()));
}

/// A group's Adam step: the defaults' β and ε, a learning rate, a step count (1: the
/// first step, from zero moments) and weight decay in about half of the groups.
fn adam_step(group: &[usize]) -> AdamStep {
    let (lr, _, decay) = rates(group);
    let mut rng = StdRng::seed_from_u64(group.iter().fold(11, |h, &i| h * 37 + i as u64));
    AdamStep {
        lr,
        beta_1: 0.9,
        beta_2: 0.999,
        epsilon: 1e-5,
        weight_decay: decay as f32,
        time: match (group[0] + group.len()) % 3 {
            0 => 1,
            _ => rng.random_range(2..2000),
        },
    }
}

/// Parameter `index`'s moments for a step at `time`: zeros before the first step, else a
/// first moment of any sign and a second one ≥ 0 (the operands' velocity, and its square).
fn moment_values(index: usize, time: usize) -> [Vec<f32>; 2] {
    let [_, _, velocity] = operand_values(index);
    match time {
        1 => [vec![0.0; velocity.len()], vec![0.0; velocity.len()]],
        _ => [velocity.clone(), velocity.iter().map(|v| v * v).collect()],
    }
}

/// (parameter, first moment, second moment) after Adam's step, by the kernels of `B`.
fn run_adam<B: KernelBackend>(group: &[usize], device: &B::Device) -> Vec<[Vec<f32>; 3]> {
    let step = adam_step(group);
    let (mut params, mut grads) = (Vec::new(), Vec::new());
    let mut moments = AdamMoments {
        first: Vec::new(),
        second: Vec::new(),
    };
    for &index in group {
        let [param, grad, like] = operands::<B>(index, device);
        let shape = like.shape();
        let [first, second] = moment_values(index, step.time).map(|values| {
            let flat = tensor::<B, 1>(&values, [values.len()], device);
            B::float_reshape(flat.into_primitive().tensor(), shape.clone())
        });
        params.push(param);
        grads.push(grad);
        moments.first.push(first);
        moments.second.push(second);
    }
    let (updated, moments) = B::adam_update(params, grads, moments, step);
    assert_eq!(updated.len(), group.len());
    assert_eq!(moments.first.len(), group.len());
    assert_eq!(moments.second.len(), group.len());
    let new_moments = moments.first.into_iter().zip(moments.second);
    group
        .iter()
        .zip(updated.into_iter().zip(new_moments))
        .map(|(&index, (p, (m, v)))| {
            [
                values_of::<B>(p, index),
                values_of::<B>(m, index),
                values_of::<B>(v, index),
            ]
        })
        .collect()
}

/// The same in float64 on the host, with the step's scalars (the bias corrections folded
/// into c and ε·b) as Burn computes them, in f32: at thousands of steps their f32 rounding
/// alone moves the update by ~1e-4, which is Burn's Adam, not an error of the kernels.
fn expected_adam(index: usize, step: AdamStep) -> [Vec<f32>; 3] {
    let [param, grad, _] = operand_values(index);
    let [first, second] = moment_values(index, step.time);
    let (b1, b2) = (f64::from(step.beta_1), f64::from(step.beta_2));
    let factor = f64::from(step.moment_factor());
    let epsilon = f64::from(step.scaled_epsilon());
    // The scalars themselves, against the bias corrections' definition in float64.
    let t = step.time as i32;
    let correction = (1.0 - b2.powi(t)).sqrt();
    let exact = [
        correction / (1.0 - b1.powi(t)),
        f64::from(step.epsilon) * correction,
    ];
    for (ours, exact) in [factor, epsilon].into_iter().zip(exact) {
        assert!(
            (ours - exact).abs() <= 1e-3 * exact,
            "step {t}: {ours} against {exact}"
        );
    }
    let mut out = [Vec::new(), Vec::new(), Vec::new()];
    for i in 0..param.len() {
        let p = f64::from(param[i]);
        let g = f64::from(grad[i]) + f64::from(step.weight_decay) * p;
        let m = b1 * f64::from(first[i]) + (1.0 - b1) * g;
        let v = b2 * f64::from(second[i]) + (1.0 - b2) * g * g;
        let p = p - step.lr * (m * factor) / (v.sqrt() + epsilon);
        out[0].push(p as f32);
        out[1].push(m as f32);
        out[2].push(v as f32);
    }
    out
}

fn check_adam<B: KernelBackend>(device: &B::Device) -> (usize, f64) {
    let mut worst = 0f64;
    let groups = groups();
    for group in &groups {
        let step = adam_step(group);
        for (&index, got) in group.iter().zip(run_adam::<B>(group, device)) {
            let want = expected_adam(index, step);
            for (what, (a, b)) in ["parameter", "first moment", "second moment"]
                .iter()
                .zip(got.iter().zip(&want))
            {
                let label = format!(
                    "Adam's {what} of shape {:?} in group {group:?} at step {}",
                    SHAPES[index], step.time
                );
                worst = worst.max(compare(&label, a, b));
            }
        }
    }
    (groups.len(), worst)
}

struct AdamCheck;

impl KernelCheck for AdamCheck {
    fn run<B: AutodiffKernelBackend>(&self, device: &B::Device) -> (usize, f64) {
        check_adam::<B::InnerBackend>(device)
    }
}

#[test]
fn adam_update_matches_float64() {
    on_each_backend("adam_update (groups)", AdamCheck);
}

#[test]
fn adam_update_default_bodies_match_float64() {
    with_default_bodies(|| check_adam::<Reference>(&Default::default()));
}

/// Each group's gradients packed, the buffer doubled (standing for the all-reduce: a buffer
/// handed back unread, or a gradient taken from the wrong place, shows) and unpacked: each
/// must come back exactly twice itself, in its shape. The CubeCL backends pack with their
/// kernel into poisoned buffers, so a copy that misses an element shows as NaN.
fn check_pack<B: KernelBackend>(device: &B::Device) -> (usize, f64) {
    let groups = groups();
    for group in &groups {
        let grads: Vec<_> = group
            .iter()
            .map(|&index| {
                let [_, grad, _] = operands::<B>(index, device);
                grad
            })
            .collect();
        let shapes: Vec<_> = grads.iter().map(|grad| grad.shape()).collect();
        let doubled = B::float_mul_scalar(B::pack(grads), 2.0.into());
        let unpacked = B::unpack(doubled, shapes.clone());
        assert_eq!(
            unpacked.len(),
            group.len(),
            "group {group:?}: one tensor each"
        );
        for ((&index, grad), shape) in group.iter().zip(unpacked).zip(shapes) {
            let label = format!(
                "packed gradient of shape {:?} in group {group:?}",
                SHAPES[index]
            );
            assert_eq!(grad.shape(), shape, "{label}: shape");
            let [_, values, _] = operand_values(index);
            let want: Vec<f32> = values.iter().map(|v| 2.0 * v).collect();
            compare_within(&label, &values_of::<B>(grad, index), &want, 0.0);
        }
    }
    (groups.len(), 0.0)
}

struct PackCheck;

impl KernelCheck for PackCheck {
    fn run<B: AutodiffKernelBackend>(&self, device: &B::Device) -> (usize, f64) {
        check_pack::<B::InnerBackend>(device)
    }
}

/// On NdArray this is the default bodies' packing (NdArray has no kernel of its own for it).
#[test]
fn packed_gradients_come_back_exactly() {
    on_each_backend("pack, unpack (groups)", PackCheck);
}
