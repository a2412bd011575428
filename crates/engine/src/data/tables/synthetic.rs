//! The built-in tabular datasets, generated: XOR, quadrant parity, linear and logistic
//! regression data, and a stock-market-sized nonlinear regression table.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::data::Table;

/// The four XOR points: columns `x1`, `x2`, `y`.
pub fn xor() -> Table {
    Table {
        columns: names(&["x1", "x2", "y"]),
        values: vec![0., 0., 0., 0., 1., 1., 1., 0., 1., 1., 1., 0.],
    }
}

/// `rows` points uniform in [−1, 1]², labelled 1 in the first and third quadrants (x·y > 0)
/// and 0 in the others: columns `x`, `y`, `label`.
pub fn quadrants(rows: usize, seed: u64) -> Table {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut values = Vec::with_capacity(rows * 3);
    for _ in 0..rows {
        let x: f32 = rng.random_range(-1.0..1.0);
        let y: f32 = rng.random_range(-1.0..1.0);
        values.extend([x, y, f32::from(x * y > 0.0)]);
    }
    Table {
        columns: names(&["x", "y", "label"]),
        values,
    }
}

/// The linear model [`LINEAR_WEIGHTS`]·x + [`LINEAR_BIAS`] plus Gaussian noise of standard
/// deviation 0.1, on standard normal `x1`, `x2`, `x3`: columns `x1`, `x2`, `x3`, `y`.
pub fn linear(rows: usize, seed: u64) -> Table {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut values = Vec::with_capacity(rows * 4);
    for _ in 0..rows {
        let x = [normal(&mut rng), normal(&mut rng), normal(&mut rng)];
        let y = dot(&LINEAR_WEIGHTS, &x) + LINEAR_BIAS + 0.1 * normal(&mut rng);
        values.extend(x);
        values.push(y);
    }
    Table {
        columns: names(&["x1", "x2", "x3", "y"]),
        values,
    }
}

/// Weights of [`linear`]'s and [`logistic`]'s generating model.
pub const LINEAR_WEIGHTS: [f32; 3] = [2.0, -3.0, 0.5];
/// Bias of [`linear`]'s and [`logistic`]'s generating model.
pub const LINEAR_BIAS: f32 = 1.0;

/// Labels drawn as Bernoulli(σ(w·x + b)) with [`linear`]'s weights, on standard normal
/// `x1`, `x2`, `x3`: columns `x1`, `x2`, `x3`, `label`. No model can beat the accuracy of
/// predicting 1 exactly when w·x + b > 0 (about 89% here).
pub fn logistic(rows: usize, seed: u64) -> Table {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut values = Vec::with_capacity(rows * 4);
    for _ in 0..rows {
        let x = [normal(&mut rng), normal(&mut rng), normal(&mut rng)];
        let p = 1.0 / (1.0 + (-(dot(&LINEAR_WEIGHTS, &x) + LINEAR_BIAS)).exp());
        values.extend(x);
        values.push(f32::from(rng.random::<f32>() < p));
    }
    Table {
        columns: names(&["x1", "x2", "x3", "label"]),
        values,
    }
}

/// A stand-in for a stock-market table: eight standard normal features `x1`…`x8`
/// and the target
///
/// `y = sin(2·x1) + 0.5·x2·x3 − 0.3·x4² + tanh(x5 − x6) + 0.2·x7 + ε`, ε ~ N(0, 0.1²),
///
/// (`x8` is noise the net must learn to ignore). The noise floor is an MSE of 0.01.
pub fn market(rows: usize, seed: u64) -> Table {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut values = Vec::with_capacity(rows * 9);
    for _ in 0..rows {
        let x: [f32; 8] = std::array::from_fn(|_| normal(&mut rng));
        let y = (2.0 * x[0]).sin() + 0.5 * x[1] * x[2] - 0.3 * x[3] * x[3]
            + (x[4] - x[5]).tanh()
            + 0.2 * x[6]
            + 0.1 * normal(&mut rng);
        values.extend(x);
        values.push(y);
    }
    Table {
        columns: names(&["x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "y"]),
        values,
    }
}

/// A standard normal draw (Box–Muller).
fn normal(rng: &mut StdRng) -> f32 {
    let u: f64 = 1.0 - rng.random::<f64>();
    let v: f64 = rng.random();
    ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
}

fn dot(w: &[f32; 3], x: &[f32; 3]) -> f32 {
    w.iter().zip(x).map(|(a, b)| a * b).sum()
}

fn names(columns: &[&str]) -> Vec<String> {
    columns.iter().map(|c| c.to_string()).collect()
}
