//! Dense layer and its gradients, with x `[M, K]`, weight `[N, K]` (one row per output, as
//! PyTorch's and candle's `Linear` store it) and bias `[N]`:
//!
//!   y  = x · Wᵀ + b       dx = dy · W         dW = dyᵀ · x        db = Σ_m dy[m, ·]
//!
//! Shaped for the classifier heads of small CNNs — K large (169·d inputs), N small (10
//! classes), M a batch — where a general matmul tiles poorly and each kernel is bound by
//! streaming x or dx (173 MB at d = 256, batch 1000) through memory. So x and dx move in
//! vectors of `V` consecutive inputs (4 where K allows it): one load carries four times the
//! bytes, which keeps enough traffic in flight. Stored by output rows, the weight a unit
//! needs for its vector of inputs is one vector load too, adjacent to its neighbours', in
//! the forward and the input gradient alike, and the weight gradient stores vectors.
//!
//! The forward gives each cube a block of `rows` × `cols` outputs and a split of the K
//! inputs, whose products its units share out; they meet once in shared memory, where one
//! unit per output adds them up (one barrier, not a tree of them, whose barriers would stall
//! the warps at every level:
//! `docs/perf-log/2026-11-22-v06-dense-kernels-as-memory-streams.md`). Every weight load
//! serves `rows` rows, and splitting K keeps the GPU full when the batch is small next to K. A second kernel adds
//! the splits and the bias; with one split (K ≤ 4096 at V = 4: a LeNet's layers) the first
//! kernel finishes the outputs itself, one launch instead of two.
//!
//! With `relu`, the layer is ReLU(x · Wᵀ + b) and the backward kernels read dy through the
//! saved output y, passing it only where y > 0: the activation costs no launch either way. The weight gradient gives each cube `rows` vectors of inputs
//! (plus the bias, as input K) and a block of `cols` outputs; its `lanes` units per
//! vector split the batch between them and add their partial sums in shared memory.

use cubecl::prelude::*;

use super::optional::value_or_zero;

/// A dense layer's sizes, passed as scalars (see [`super::geometry::Nchw`]): the batch, the
/// vectors of `V` inputs in a row of x, and the outputs.
#[derive(CubeType, CubeLaunch, Clone, Copy)]
pub struct DenseSizes {
    pub batch: usize,
    pub row_vectors: usize,
    pub outputs: usize,
}

/// Forward, stage 1: `partials[s, m, n]` = the products of inputs k in split s
/// (`vectors_per_split` vectors of inputs from s · vectors_per_split). A unit's weights are
/// one vector load per output, and adjacent units read adjacent vectors. With
/// `single_split`, `partials` is the output `[M, N]` and gets the bias and ReLU here.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn dense_forward_partial<F: Float, V: Size>(
    x: &Array<Vector<F, V>>,
    weight: &Array<Vector<F, V>>,
    bias: &ComptimeOption<Array<F>>,
    partials: &mut Array<F>,
    sizes: DenseSizes,
    vectors_per_split: u32,
    #[comptime] rows: u32,
    #[comptime] cols: u32,
    #[comptime] cube_size: u32,
    #[comptime] single_split: bool,
    #[comptime] relu: bool,
) {
    let (batch, row_vectors, outputs) = (sizes.batch, sizes.row_vectors, sizes.outputs);
    let width = x.vector_size();
    let first_row = CUBE_POS_X as usize * rows as usize;
    let first_col = CUBE_POS_Y as usize * cols as usize;
    let split = CUBE_POS_Z as usize;
    let mut end = (split + 1) * vectors_per_split as usize;
    if end > row_vectors {
        end = row_vectors;
    }

    let mut sums = Array::<F>::new((rows * cols) as usize);
    #[unroll]
    for i in 0..rows * cols {
        sums[i as usize] = F::new(0.0);
    }
    let mut xs = Array::<Vector<F, V>>::new(rows as usize);
    let mut v = split * vectors_per_split as usize + UNIT_POS as usize;
    while v < end {
        #[unroll]
        for r in 0..rows {
            let m = first_row + r as usize;
            xs[r as usize] = Vector::new(F::new(0.0));
            if m < batch {
                xs[r as usize] = x[m * row_vectors + v];
            }
        }
        #[unroll]
        for c in 0..cols {
            let n = first_col + c as usize;
            let mut w = Vector::<F, V>::new(F::new(0.0));
            if n < outputs {
                w = weight[n * row_vectors + v];
            }
            #[unroll]
            for r in 0..rows {
                let xr = xs[r as usize];
                #[unroll]
                for j in 0..width {
                    sums[(r * cols + c) as usize] += xr[j] * w[j];
                }
            }
        }
        v += cube_size as usize;
    }

    // Every unit's `rows` × `cols` sums side by side in shared memory (rows padded by one
    // so that the reads below hit distinct banks); then unit i adds up output i's row.
    let stride = cube_size + 1;
    let mut shared = SharedMemory::<F>::new((rows * cols * stride) as usize);
    #[unroll]
    for i in 0..rows * cols {
        shared[(i * stride + UNIT_POS) as usize] = sums[i as usize];
    }
    sync_cube();
    if UNIT_POS < rows * cols {
        let mut total = F::new(0.0);
        for u in 0..cube_size {
            total += shared[(UNIT_POS * stride + u) as usize];
        }
        let m = first_row + (UNIT_POS / cols) as usize;
        let n = first_col + (UNIT_POS % cols) as usize;
        if m < batch && n < outputs {
            if single_split {
                total = finished_output(total, bias, n, relu);
            }
            partials[(split * batch + m) * outputs + n] = total;
        }
    }
}

/// Forward, stage 2: y[m, n] = Σ_s partials[s, m, n] + b[n] (then ReLU), one unit per
/// output.
#[cube(launch_unchecked)]
pub fn dense_forward_sum<F: Float>(
    partials: &Array<F>,
    bias: &ComptimeOption<Array<F>>,
    output: &mut Array<F>,
    splits: usize,
    outputs: usize,
    #[comptime] relu: bool,
) {
    let pos = ABSOLUTE_POS;
    if pos >= output.len() {
        terminate!();
    }
    let per_split = output.len();
    let mut sum = F::new(0.0);
    for s in 0..splits {
        sum += partials[s * per_split + pos];
    }
    output[pos] = finished_output(sum, bias, pos % outputs, relu);
}

/// Output n's value from its sum of products: plus the bias, then ReLU.
#[cube]
fn finished_output<F: Float>(
    sum: F,
    bias: &ComptimeOption<Array<F>>,
    n: usize,
    #[comptime] relu: bool,
) -> F {
    let mut value = sum + value_or_zero(bias, n);
    if relu {
        value = F::max(value, F::new(0.0));
    }
    value
}

/// dy[index] as the layer's sums see it: through the ReLU when the layer's output `relu_output`
/// is given (zero where it is not positive).
#[cube]
#[allow(clippy::let_and_return)] // `#[comptime]` needs the match bound by a `let`
fn sums_grad<F: Float>(grad: &Array<F>, relu_output: &ComptimeOption<Array<F>>, index: usize) -> F {
    let g = grad[index];
    #[comptime]
    let passed = match relu_output {
        ComptimeOption::Some(y) => select(y[index] > F::new(0.0), g, F::new(0.0)),
        ComptimeOption::None => g,
    };
    passed
}

/// Outputs whose weight rows a unit of the dense input gradient loads together.
const OUTPUTS_IN_FLIGHT: u32 = 4;

/// dx[m, k] = Σ_n dy[m, n] · W[n, k]. A unit owns
/// one vector of inputs for a block of `rows` batch rows: each weight vector it reads
/// serves all of them (dy's values are the same for every unit of a row block, so they
/// broadcast), and adjacent units read and write adjacent vectors.
#[cube(launch_unchecked)]
pub fn dense_input_grad<F: Float, V: Size>(
    grad: &Array<F>,
    relu_output: &ComptimeOption<Array<F>>,
    weight: &Array<Vector<F, V>>,
    x_grad: &mut Array<Vector<F, V>>,
    sizes: DenseSizes,
    #[comptime] rows: u32,
) {
    let (batch, row_vectors, outputs) = (sizes.batch, sizes.row_vectors, sizes.outputs);
    let v = ABSOLUTE_POS_X as usize;
    if v >= row_vectors {
        terminate!();
    }
    let first_row = CUBE_POS_Y as usize * rows as usize;
    let mut sums = Array::<Vector<F, V>>::new(rows as usize);
    #[unroll]
    for r in 0..rows {
        sums[r as usize] = Vector::new(F::new(0.0));
    }
    // Outputs in groups of OUTPUTS_IN_FLIGHT, so that their weight loads are in flight
    // together: with few units per SM the loop is bound by load latency, not arithmetic.
    for group in 0..outputs.div_ceil(OUTPUTS_IN_FLIGHT as usize) {
        #[unroll]
        for u in 0..OUTPUTS_IN_FLIGHT {
            let n = group * OUTPUTS_IN_FLIGHT as usize + u as usize;
            if n < outputs {
                let w = weight[n * row_vectors + v];
                #[unroll]
                for r in 0..rows {
                    let m = first_row + r as usize;
                    if m < batch {
                        let g = sums_grad(grad, relu_output, m * outputs + n);
                        sums[r as usize] += Vector::new(g) * w;
                    }
                }
            }
        }
    }
    #[unroll]
    for r in 0..rows {
        let m = first_row + r as usize;
        if m < batch {
            x_grad[m * row_vectors + v] = sums[r as usize];
        }
    }
}

/// dW[n, k] = Σ_m dy[m, n] · x[m, k] for the inputs of vector v < K / V; with `with_bias`,
/// vector v = K / V computes db[n] = Σ_m dy[m, n] (as if x had a column of ones) in its
/// first element. Columns come in blocks of `cols`. Each lane takes every `lanes`-th image,
/// two at a time so that two loads of x are in flight.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn dense_weight_grad<F: Float, V: Size>(
    x: &Array<Vector<F, V>>,
    grad: &Array<F>,
    relu_output: &ComptimeOption<Array<F>>,
    weight_grad: &mut Array<Vector<F, V>>,
    bias_grad: &mut Array<F>,
    sizes: DenseSizes,
    #[comptime] cols: u32,
    #[comptime] rows: u32,
    #[comptime] lanes: u32,
    #[comptime] with_bias: bool,
) {
    let (batch, row_vectors, outputs) = (sizes.batch, sizes.row_vectors, sizes.outputs);
    let v = CUBE_POS_X as usize * rows as usize + UNIT_POS_X as usize;
    let lane = UNIT_POS_Y;
    let is_bias = v == row_vectors;
    let active = v < row_vectors || (is_bias && with_bias);
    let first_col = CUBE_POS_Y as usize * cols as usize;

    // Inactive units keep zeros but stay for the barriers below.
    let mut sums = Array::<Vector<F, V>>::new(cols as usize);
    #[unroll]
    for c in 0..cols {
        sums[c as usize] = Vector::new(F::new(0.0));
    }
    if active {
        let mut m = lane as usize;
        while m < batch {
            #[unroll]
            for u in 0..2u32 {
                let image = m + (u * lanes) as usize;
                if image < batch {
                    let mut xv = Vector::<F, V>::new(F::new(1.0));
                    if !is_bias {
                        xv = x[image * row_vectors + v];
                    }
                    #[unroll]
                    for c in 0..cols {
                        let n = first_col + c as usize;
                        if n < outputs {
                            let g = sums_grad(grad, relu_output, image * outputs + n);
                            sums[c as usize] += xv * Vector::new(g);
                        }
                    }
                }
            }
            m += (2 * lanes) as usize;
        }
    }

    // The lanes of a vector add up their sums, one column at a time: a tree over the
    // lanes in shared memory.
    let mut shared = SharedMemory::<Vector<F, V>>::new((rows * lanes) as usize);
    let own = (lane * rows + UNIT_POS_X) as usize;
    #[unroll]
    for c in 0..cols {
        shared[own] = sums[c as usize];
        sync_cube();
        let mut half = CUBE_DIM_Y / 2; // = lanes, as a runtime value the loop can change
        while half > 0 {
            if lane < half {
                let other = shared[((lane + half) * rows + UNIT_POS_X) as usize];
                shared[own] += other;
            }
            sync_cube();
            half /= 2;
        }
        let n = first_col + c as usize;
        if lane == 0 && active && n < outputs {
            let total = shared[own];
            if is_bias {
                bias_grad[n] = total[0];
            } else {
                weight_grad[n * row_vectors + v] = total;
            }
        }
    }
}
