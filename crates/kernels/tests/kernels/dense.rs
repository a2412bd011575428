//! The dense layer, forward and all three gradients, with and without its ReLU, against
//! Burn's matmul (and `relu`) with Burn's autodiff; on the GPU runtimes and, for the
//! default bodies, on NdArray.

use burn::prelude::*;
use burn::tensor::activation::relu;
use cubenet_kernels::AutodiffKernelBackend;
use cubenet_kernels::testing::with_default_bodies;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::cases::{CASES, values};
use crate::harness::{
    KernelCheck, LayerResult, Reference, compare_results, floats, on_each_backend, tensor,
};

/// Cap on multiply-adds per random case, so 200 cases stay quick on a software GPU.
const MAX_MACS: usize = 2_000_000;

/// A dense-layer problem: `batch` rows of `inputs` features to `outputs` features.
#[derive(Debug, Clone)]
struct DenseCase {
    seed: u64,
    batch: usize,
    inputs: usize,
    outputs: usize,
    bias: bool,
    x_grad: bool,
    relu: bool,
}

impl DenseCase {
    /// Batch 1–64 (1 forced regularly), inputs 1–6000, outputs 1–70 with 10 (classes) and
    /// sizes around the kernel's 16-column and 4-row blocks forced in; inputs above 4096
    /// take the forward's two-kernel path. Every other case has the ReLU.
    fn random(index: u64) -> Self {
        let seed = 7_000_003 + index;
        let mut rng = StdRng::seed_from_u64(seed);
        let mut case = Self {
            seed,
            batch: match index % 5 {
                0 => 1,
                1 => [3, 4, 5, 48][rng.random_range(0..4)],
                _ => rng.random_range(1..=64),
            },
            inputs: if index.is_multiple_of(3) {
                rng.random_range(1..=40)
            } else {
                rng.random_range(1..=6000)
            },
            outputs: match index % 4 {
                0 => 10,
                1 => [1, 15, 16, 17, 33][rng.random_range(0..5)],
                _ => rng.random_range(1..=70),
            },
            bias: index % 4 != 3,
            x_grad: index % 3 != 2,
            relu: index % 2 == 1,
        };
        while case.batch * case.inputs * case.outputs > MAX_MACS {
            case.inputs = case.inputs.div_ceil(2);
        }
        case
    }

    /// The head of the single-conv CNN at d filters (169·d inputs, 10 classes).
    fn single_conv_head(filters: usize, batch: usize) -> Self {
        Self {
            seed: (filters * batch) as u64,
            batch,
            inputs: 169 * filters,
            outputs: 10,
            bias: true,
            x_grad: true,
            relu: false,
        }
    }

    /// The hidden layer of the speedrun's LeNet (32·4·4 inputs, 128 outputs, ReLU).
    fn lenet_hidden(batch: usize) -> Self {
        Self {
            seed: batch as u64 + 1,
            batch,
            inputs: 512,
            outputs: 128,
            bias: true,
            x_grad: true,
            relu: true,
        }
    }

    /// The dense op under test: cubenet's, with or without the ReLU.
    fn ours<B: AutodiffKernelBackend>(
        &self,
        x: Tensor<B, 2>,
        weight: Tensor<B, 2>,
        bias: Option<Tensor<B, 1>>,
    ) -> Tensor<B, 2> {
        if self.relu {
            cubenet_kernels::dense_relu(x, weight, bias)
        } else {
            cubenet_kernels::dense(x, weight, bias)
        }
    }

    fn run<B: AutodiffKernelBackend>(
        &self,
        device: &B::Device,
        op: impl FnOnce(Tensor<B, 2>, Tensor<B, 2>, Option<Tensor<B, 1>>) -> Tensor<B, 2>,
    ) -> LayerResult {
        let mut rng = StdRng::seed_from_u64(self.seed ^ 0x11ea);
        let mut x = tensor::<B, 2>(
            &values(&mut rng, self.batch * self.inputs),
            [self.batch, self.inputs],
            device,
        );
        if self.x_grad {
            x = x.require_grad();
        }
        let weight = tensor::<B, 2>(
            &values(&mut rng, self.outputs * self.inputs),
            [self.outputs, self.inputs],
            device,
        )
        .require_grad();
        let bias_values = values(&mut rng, self.outputs);
        let bias = self
            .bias
            .then(|| tensor::<B, 1>(&bias_values, [self.outputs], device).require_grad());
        let upstream = tensor::<B, 2>(
            &values(&mut rng, self.batch * self.outputs),
            [self.batch, self.outputs],
            device,
        );
        let output = op(x.clone(), weight.clone(), bias.clone());
        assert_eq!(output.dims(), [self.batch, self.outputs], "{self:?}");
        let grads = (output.clone() * upstream).sum().backward();
        LayerResult {
            output: floats(output),
            x_grad: self
                .x_grad
                .then(|| floats(x.grad(&grads).expect("x gradient"))),
            weight_grad: floats(weight.grad(&grads).expect("weight gradient")),
            bias_grad: bias.map(|b| floats(b.grad(&grads).expect("bias gradient"))),
        }
    }

    /// Burn's own matmul, broadcast add and ReLU, differentiated by Burn, on NdArray.
    fn reference(&self) -> LayerResult {
        self.run::<Reference>(&Default::default(), |x, w, b| {
            let mut y = x.matmul(w.transpose());
            if let Some(b) = b {
                y = y + b.unsqueeze();
            }
            if self.relu { relu(y) } else { y }
        })
    }
}

struct DenseCheck;

impl KernelCheck for DenseCheck {
    fn run<B: AutodiffKernelBackend>(&self, device: &B::Device) -> (usize, f64) {
        // The random cases, then the single-conv CNN's head at d = 32 on the batches an MNIST
        // epoch of 64-image batches runs on (64, then 48), an uneven one and the
        // benchmark's 512 and 1000 (on a GPU that reports its SM count, weight-gradient
        // cubes of 8 × 32 and 4 × 64 units), and at d = 256 (a grid that fills a GPU);
        // the LeNet's hidden layer at the speedrun's batch, at 1 and at 1024.
        let cases = (0..CASES)
            .map(DenseCase::random)
            .chain([64, 48, 50, 512, 1000].map(|batch| DenseCase::single_conv_head(32, batch)))
            .chain([3].map(|batch| DenseCase::single_conv_head(256, batch)))
            .chain([128, 1, 1024].map(DenseCase::lenet_hidden));
        let mut worst = 0f64;
        let mut count = 0;
        for case in cases {
            let ours = case.run::<B>(device, |x, w, b| case.ours(x, w, b));
            worst = worst.max(compare_results(
                &format!("{case:?}"),
                &ours,
                &case.reference(),
            ));
            count += 1;
        }
        (count, worst)
    }
}

#[test]
fn dense_matches_burn() {
    on_each_backend("dense forward + x/weight/bias grads", DenseCheck);
}

#[test]
fn dense_default_body_matches_burn_autodiff() {
    for index in 0..30 {
        let case = DenseCase::random(index);
        let ours = with_default_bodies(|| {
            case.run::<Reference>(&Default::default(), |x, w, b| case.ours(x, w, b))
        });
        compare_results(&format!("{case:?}"), &ours, &case.reference());
    }
}
