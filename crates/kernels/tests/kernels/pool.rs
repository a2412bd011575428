//! Max-pool with argmax, forward and backward, against Burn's max_pool2d_with_indices.

use burn::tensor::module;
use cubenet_kernels::{AutodiffKernelBackend, PoolOptions2d};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::cases::{CASES, random_pool, values};
use crate::harness::{
    KernelCheck, Reference, capped, compare, floats, ints, on_each_backend, tensor,
};

/// Converts Burn's flat plane indices (`ih·W + iw`) to in-window offsets (`kh·KW + kw`).
pub fn expected_offsets(
    indices: &[i64],
    out: [usize; 4],
    input_w: usize,
    pool: PoolOptions2d,
) -> Vec<i64> {
    let [_, _, out_h, out_w] = out;
    indices
        .iter()
        .enumerate()
        .map(|(i, &index)| {
            let (ph, pw) = ((i / out_w) % out_h, i % out_w);
            let kh = index / input_w as i64 - (ph * pool.stride[0]) as i64 + pool.padding[0] as i64;
            let kw = index % input_w as i64 - (pw * pool.stride[1]) as i64 + pool.padding[1] as i64;
            kh * pool.kernel[1] as i64 + kw
        })
        .collect()
}

struct PoolCheck;

impl KernelCheck for PoolCheck {
    fn run<B: AutodiffKernelBackend>(&self, device: &B::Device) -> (usize, f64) {
        let mut worst = 0f64;
        let cases = capped(CASES);
        for index in 0..cases {
            let seed = 2_000 + index;
            let mut rng = StdRng::seed_from_u64(seed);
            let batch = if index.is_multiple_of(10) {
                1
            } else {
                rng.random_range(1..=64)
            };
            let channels = if index.is_multiple_of(7) {
                33
            } else {
                rng.random_range(1..=70)
            };
            let size = [rng.random_range(5..=40), rng.random_range(5..=40)];
            let pool = random_pool(&mut rng, size);
            let case = format!(
                "seed {seed}: x [{batch}, {channels}, {}, {}], {pool:?}",
                size[0], size[1]
            );
            let x_shape = [batch, channels, size[0], size[1]];
            let x_values = values(&mut rng, x_shape.iter().product());
            let [out_h, out_w] = pool.output_size(size);
            let out_shape = [batch, channels, out_h, out_w];
            let upstream = values(&mut rng, out_shape.iter().product());

            let x = tensor::<B, 4>(&x_values, x_shape, device).require_grad();
            let (output, argmax) = cubenet_kernels::max_pool2d_with_argmax(x.clone(), pool);
            assert_eq!(output.dims(), out_shape, "{case}");
            let grads = (output.clone() * tensor::<B, 4>(&upstream, out_shape, device))
                .sum()
                .backward();
            let x_grad = floats(x.grad(&grads).expect("x gradient"));

            let device_ref = Default::default();
            let x_ref = tensor::<Reference, 4>(&x_values, x_shape, &device_ref).require_grad();
            let (out_ref, indices) = module::max_pool2d_with_indices(
                x_ref.clone(),
                pool.kernel,
                pool.stride,
                pool.padding,
                [1, 1],
                false,
            );
            let grads_ref = (out_ref.clone()
                * tensor::<Reference, 4>(&upstream, out_shape, &device_ref))
            .sum()
            .backward();

            worst = worst.max(compare(
                &format!("output, {case}"),
                &floats(output),
                &floats(out_ref),
            ));
            let expected = expected_offsets(&ints(indices), out_shape, size[1], pool);
            let ours = ints(argmax);
            if let Some(i) = (0..ours.len()).find(|&i| ours[i] != expected[i]) {
                panic!(
                    "argmax, {case}: element {i} is {}, expected {}",
                    ours[i], expected[i]
                );
            }
            let x_grad_ref = floats(x_ref.grad(&grads_ref).expect("x gradient"));
            worst = worst.max(compare(&format!("x grad, {case}"), &x_grad, &x_grad_ref));
        }
        (cases as usize, worst)
    }
}

#[test]
fn max_pool_with_argmax_matches_burn() {
    on_each_backend("max_pool2d_with_argmax forward + backward", PoolCheck);
}
