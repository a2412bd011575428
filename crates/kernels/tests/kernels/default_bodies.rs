//! The default (Burn-ops) bodies, run by backends without kernels (here NdArray with its
//! CPU kernels switched off):
//! same contract as the kernels, checked against Burn's autodiff through conv2d → relu →
//! max_pool2d on a few cases. The dense, loss and update files check their own.

use cubenet_kernels::testing::with_default_bodies;
use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::cases::{ConvCase, random_pool};
use crate::conv::{ConvData, run_conv_like};
use crate::fused::burn_conv_relu_pool;
use crate::harness::{Reference, compare_results};

#[test]
fn conv_relu_pool_default_body_matches_burn_autodiff() {
    let device = Default::default();
    for index in 0..30 {
        let case = ConvCase::random(4, index);
        let conv_size = case.output_size();
        let pool = random_pool(&mut StdRng::seed_from_u64(case.seed), conv_size);
        let [out_h, out_w] = pool.output_size(conv_size);
        let out_shape = [case.batch, case.c_out, out_h, out_w];
        let data = ConvData::random(&case, out_shape.iter().product());
        let ours = with_default_bodies(|| {
            run_conv_like::<Reference>(&case, &data, out_shape, &device, |x, w, b| {
                cubenet_kernels::conv_relu_pool(x, w, b, case.options, pool)
            })
        });
        let reference = run_conv_like::<Reference>(&case, &data, out_shape, &device, |x, w, b| {
            burn_conv_relu_pool(&case, pool, x, w, b).1
        });
        compare_results(&format!("{case:?}"), &ours, &reference);
    }
}
