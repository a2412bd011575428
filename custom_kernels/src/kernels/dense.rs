//! Dense layer and its gradients, with x `[M, K]`, weight `[K, N]` (as Burn's `Linear`
//! stores it) and bias `[N]`:
//!
//!   y  = x · W + b        dx = dy · Wᵀ        dW = xᵀ · dy        db = Σ_m dy[m, ·]
//!
//! Shaped for the classifier heads of small CNNs — K large (169·d inputs), N small (10
//! classes), M a batch — where a general matmul tiles poorly. The forward gives each cube
//! a block of `rows` × `cols` outputs and a split of the K inputs, whose products its units
//! share out and then reduce in shared memory, so x is read once per column block and every
//! weight load serves `rows` rows; splitting K keeps the GPU full when the batch is small
//! next to K (1000 × 43,264 at d = 256), and a second kernel adds the splits and the bias. The weight gradient gives each cube `rows` weight rows (k, plus the bias
//! as row K) and a block of `cols` columns; its `lanes` units per row split the batch
//! between them and add their partial sums in shared memory, so a 1000-image batch is
//! reduced by thousands of cubes' worth of units instead of one unit per row (adjacent
//! units still read adjacent x elements).

use cubecl::prelude::*;

use super::cube_sum::sum_rows_over_units;

/// Forward, stage 1: `partials[s, m, n]` = the products of inputs k in split s
/// (`k_per_split` inputs from s · k_per_split).
#[cube(launch_unchecked)]
pub fn dense_forward_partial<F: Float>(
    x: &Tensor<F>,
    weight: &Tensor<F>,
    partials: &mut Tensor<F>,
    k_per_split: u32,
    #[comptime] rows: u32,
    #[comptime] cols: u32,
    #[comptime] cube_size: u32,
) {
    let batch = x.shape(0);
    let inputs = x.shape(1);
    let outputs = weight.shape(1);
    let first_row = CUBE_POS_X as usize * rows as usize;
    let first_col = CUBE_POS_Y as usize * cols as usize;
    let split = CUBE_POS_Z as usize;
    let mut k_end = (split + 1) * k_per_split as usize;
    if k_end > inputs {
        k_end = inputs;
    }

    let mut sums = Array::<F>::new((rows * cols) as usize);
    #[unroll]
    for i in 0..rows * cols {
        sums[i as usize] = F::new(0.0);
    }
    let mut w = Array::<F>::new(cols as usize);
    let mut k = split * k_per_split as usize + UNIT_POS as usize;
    while k < k_end {
        #[unroll]
        for c in 0..cols {
            let n = first_col + c as usize;
            w[c as usize] = F::new(0.0);
            if n < outputs {
                w[c as usize] = weight[k * outputs + n];
            }
        }
        #[unroll]
        for r in 0..rows {
            let m = first_row + r as usize;
            if m < batch {
                let xv = x[m * inputs + k];
                #[unroll]
                for c in 0..cols {
                    sums[(r * cols + c) as usize] += xv * w[c as usize];
                }
            }
        }
        k += cube_size as usize;
    }

    // One shared row per column; a tree over the units, one output row at a time.
    let mut shared = SharedMemory::<F>::new((cols * cube_size) as usize);
    #[unroll]
    for r in 0..rows {
        #[unroll]
        for c in 0..cols {
            shared[(c * cube_size + UNIT_POS) as usize] = sums[(r * cols + c) as usize];
        }
        sum_rows_over_units(&mut shared, cols, cube_size);
        let m = first_row + r as usize;
        let n = first_col + UNIT_POS as usize;
        if UNIT_POS < cols && m < batch && n < outputs {
            partials[(split * batch + m) * outputs + n] = shared[(UNIT_POS * cube_size) as usize];
        }
        sync_cube();
    }
}

/// Forward, stage 2: y[m, n] = Σ_s partials[s, m, n] + b[n], one unit per output.
#[cube(launch_unchecked)]
pub fn dense_forward_sum<F: Float>(
    partials: &Tensor<F>,
    bias: &ComptimeOption<Tensor<F>>,
    output: &mut Tensor<F>,
) {
    let pos = ABSOLUTE_POS;
    if pos >= output.len() {
        terminate!();
    }
    let per_split = output.len();
    let mut sum = F::new(0.0);
    for s in 0..partials.shape(0) {
        sum += partials[s * per_split + pos];
    }
    let b: ComptimeOption<F> = bias.map(|bias| bias[pos % output.shape(1)]);
    output[pos] = sum + b.unwrap_or_default();
}

/// dx[m, k] = Σ_n dy[m, n] · W[k, n]. A unit owns input k for a block of `rows` batch rows:
/// it reads W's row k once for all of them (dy's values are the same for every unit of a
/// row block, so they broadcast), and adjacent units write adjacent k.
#[cube(launch_unchecked)]
pub fn dense_input_grad<F: Float>(
    grad: &Tensor<F>,
    weight: &Tensor<F>,
    x_grad: &mut Tensor<F>,
    #[comptime] rows: u32,
) {
    let batch = x_grad.shape(0);
    let inputs = weight.shape(0);
    let outputs = weight.shape(1);
    let k = ABSOLUTE_POS_X as usize;
    if k >= inputs {
        terminate!();
    }
    let first_row = CUBE_POS_Y as usize * rows as usize;
    let mut sums = Array::<F>::new(rows as usize);
    #[unroll]
    for r in 0..rows {
        sums[r as usize] = F::new(0.0);
    }
    for n in 0..outputs {
        let w = weight[k * outputs + n];
        #[unroll]
        for r in 0..rows {
            let m = first_row + r as usize;
            if m < batch {
                sums[r as usize] += grad[m * outputs + n] * w;
            }
        }
    }
    #[unroll]
    for r in 0..rows {
        let m = first_row + r as usize;
        if m < batch {
            x_grad[m * inputs + k] = sums[r as usize];
        }
    }
}

/// dW[k, n] = Σ_m x[m, k] · dy[m, n] for unit k < K; with `with_bias`, unit k = K computes
/// db[n] = Σ_m dy[m, n] (as if x had a column of ones). Columns come in blocks of `cols`.
#[cube(launch_unchecked)]
pub fn dense_weight_grad<F: Float>(
    x: &Tensor<F>,
    grad: &Tensor<F>,
    weight_grad: &mut Tensor<F>,
    bias_grad: &mut Tensor<F>,
    #[comptime] cols: u32,
    #[comptime] rows: u32,
    #[comptime] lanes: u32,
    #[comptime] with_bias: bool,
) {
    let batch = x.shape(0);
    let inputs = x.shape(1);
    let outputs = grad.shape(1);
    let k = CUBE_POS_X as usize * rows as usize + UNIT_POS_X as usize;
    let lane = UNIT_POS_Y;
    let is_bias = k == inputs;
    let active = k < inputs || (is_bias && with_bias);
    let first_col = CUBE_POS_Y as usize * cols as usize;

    // Each lane sums every `lanes`-th image; inactive units keep zeros but stay for the
    // barriers below.
    let mut sums = Array::<F>::new(cols as usize);
    #[unroll]
    for c in 0..cols {
        sums[c as usize] = F::new(0.0);
    }
    if active {
        let mut m = lane as usize;
        while m < batch {
            let mut xv = F::new(1.0);
            if !is_bias {
                xv = x[m * inputs + k];
            }
            #[unroll]
            for c in 0..cols {
                let n = first_col + c as usize;
                if n < outputs {
                    sums[c as usize] += xv * grad[m * outputs + n];
                }
            }
            m += lanes as usize;
        }
    }

    let mut shared = SharedMemory::<F>::new((rows * lanes * cols) as usize);
    let own = ((lane * rows + UNIT_POS_X) * cols) as usize;
    #[unroll]
    for c in 0..cols {
        shared[own + c as usize] = sums[c as usize];
    }
    sync_cube();
    let mut half = CUBE_DIM_Y / 2; // = lanes, as a runtime value the loop can change
    while half > 0 {
        if lane < half {
            let other = (((lane + half) * rows + UNIT_POS_X) * cols) as usize;
            #[unroll]
            for c in 0..cols {
                let value = shared[other + c as usize];
                shared[own + c as usize] += value;
            }
        }
        sync_cube();
        half /= 2;
    }
    if lane == 0 && active {
        #[unroll]
        for c in 0..cols {
            let n = first_col + c as usize;
            if n < outputs {
                if is_bias {
                    bias_grad[n] = shared[own + c as usize];
                } else {
                    weight_grad[k * outputs + n] = shared[own + c as usize];
                }
            }
        }
    }
}
