//! The SGD updates, plain and with momentum, against float64 on the host, on parameters of
//! rank 1, 2 and 4 and sizes around the launch's cube size.

use cubenet_kernels::{AutodiffKernelBackend, KernelBackend};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::cases::values;
use crate::harness::{GpuCheck, Reference, compare, floats, on_each_gpu, tensor};

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

/// (param, grad, velocity, lr, momentum) of case `index`.
fn case(index: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>, f64, f64) {
    let mut rng = StdRng::seed_from_u64(31 + index as u64);
    let len = SHAPES[index].iter().product();
    (
        values(&mut rng, len),
        values(&mut rng, len),
        values(&mut rng, len),
        rng.random_range(0.001..1.0),
        rng.random_range(0.0..0.99),
    )
}

/// Updated param and velocity by the kernels of `B`, for parameters of rank `D`.
fn run<B: KernelBackend, const D: usize>(index: usize, device: &B::Device) -> [Vec<f32>; 3] {
    let (param, grad, velocity, lr, momentum) = case(index);
    let shape = rank_shape::<D>(SHAPES[index]);
    let own_param = tensor::<B, D>(&param, shape, device);
    let [param, grad, velocity] =
        [param, grad, velocity].map(|v| tensor::<B, D>(&v, shape, device));
    // A parameter held elsewhere gets a new buffer; one held only here is updated in place.
    let plain = cubenet_kernels::sgd_update(param.clone(), grad.clone(), lr);
    let in_place = cubenet_kernels::sgd_update(own_param, grad.clone(), lr);
    assert_eq!(
        floats(in_place),
        floats(plain.clone()),
        "in place = new buffer"
    );
    let (with_momentum, new_velocity) =
        cubenet_kernels::sgd_momentum_update(param, grad, velocity, lr, momentum);
    for t in [&plain, &with_momentum, &new_velocity] {
        assert_eq!(t.dims(), shape, "shape kept");
    }
    [floats(plain), floats(with_momentum), floats(new_velocity)]
}

/// `full` with its leading axes merged into one, leaving `D` axes.
fn rank_shape<const D: usize>(full: [usize; 4]) -> [usize; D] {
    std::array::from_fn(|i| match i {
        0 => full[..=4 - D].iter().product(),
        _ => full[4 - D + i],
    })
}

fn expected(index: usize) -> [Vec<f32>; 3] {
    let (param, grad, velocity, lr, momentum) = case(index);
    let v: Vec<f64> = velocity
        .iter()
        .zip(&grad)
        .map(|(&v, &g)| momentum * f64::from(v) + f64::from(g))
        .collect();
    let step = |d: &[f64]| -> Vec<f32> {
        param
            .iter()
            .zip(d)
            .map(|(&p, &d)| (f64::from(p) - lr * d) as f32)
            .collect()
    };
    let g: Vec<f64> = grad.iter().map(|&g| f64::from(g)).collect();
    [step(&g), step(&v), v.iter().map(|&v| v as f32).collect()]
}

fn check<B: KernelBackend>(device: &B::Device) -> f64 {
    let mut worst = 0f64;
    for (index, shape) in SHAPES.iter().enumerate() {
        let want = expected(index);
        for got in [
            run::<B, 1>(index, device),
            run::<B, 2>(index, device),
            run::<B, 4>(index, device),
        ] {
            for (what, (a, b)) in ["plain", "momentum", "velocity"]
                .iter()
                .zip(got.iter().zip(&want))
            {
                worst = worst.max(compare(&format!("{what} update of shape {shape:?}"), a, b));
            }
        }
    }
    worst
}

struct UpdateCheck;

impl GpuCheck for UpdateCheck {
    fn run<B: AutodiffKernelBackend>(&self, device: &B::Device) -> (usize, f64) {
        // The optimizer updates the inner (non-autodiff) tensors: that is where the kernels are.
        (SHAPES.len() * 3, check::<B::InnerBackend>(device))
    }
}

#[test]
fn sgd_updates_match_float64() {
    on_each_gpu("sgd_update, sgd_momentum_update", UpdateCheck);
}

#[test]
fn sgd_update_default_bodies_match_float64() {
    check::<Reference>(&Default::default());
}
