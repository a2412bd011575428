//! Batch normalization with PyTorch's semantics, so that a network exported to PyTorch
//! evaluates as it trained: the running variance is the unbiased one (Burn 0.21's
//! `BatchNorm` keeps the biased), and the learned scale and shift are optional (`affine`).

use burn::module::{Param, RunningState};
use burn::prelude::*;

use super::NormSpec;

/// Normalizes axis 1 (the channels of maps, the features of flat activations) by the
/// batch's statistics in training and by the running ones outside it. The field names are
/// Burn's `BatchNorm`'s, so that records of either read alike.
#[derive(Module, Debug)]
pub struct BatchNorm<B: Backend> {
    gamma: Option<Param<Tensor<B, 1>>>,
    beta: Option<Param<Tensor<B, 1>>>,
    running_mean: RunningState<Tensor<B, 1>>,
    running_var: RunningState<Tensor<B, 1>>,
    momentum: f64,
    epsilon: f64,
}

impl<B: Backend> BatchNorm<B> {
    /// Normalization of `features` channels: scale 1, shift 0, running mean 0 and
    /// variance 1, as PyTorch starts.
    pub fn new(features: usize, spec: NormSpec, device: &B::Device) -> Self {
        let affine = |value: f32| {
            spec.affine
                .then(|| Param::from_tensor(Tensor::full([features], value, device)))
        };
        Self {
            gamma: affine(1.0),
            beta: affine(0.0),
            running_mean: RunningState::new(Tensor::zeros([features], device)),
            running_var: RunningState::new(Tensor::ones([features], device)),
            momentum: spec.momentum,
            epsilon: spec.eps,
        }
    }

    pub fn forward<const D: usize>(&self, x: Tensor<B, D>) -> Tensor<B, D> {
        let device = x.device();
        let dims = x.dims();
        let channels = dims[1];
        let mut per_channel = [1; D];
        per_channel[1] = channels;
        let (mean, var) = if B::ad_enabled(&device) {
            // [c, everything else]: each channel's values in one row.
            let rows = x.clone().swap_dims(0, 1).reshape([channels as i32, -1]);
            let count = rows.dims()[1];
            let mean = rows.clone().mean_dim(1);
            let var = (rows - mean.clone()).square().mean_dim(1);
            let unbiased = match count {
                1 => 1.0,
                n => n as f64 / (n - 1) as f64,
            };
            let update = |state: &RunningState<Tensor<B, 1>>, batch: Tensor<B, 2>, scale| {
                let running = state.value_sync().to_device(&device);
                let batch = batch.detach().reshape([channels]).mul_scalar(scale);
                state.update(
                    running
                        .mul_scalar(1.0 - self.momentum)
                        .add(batch.mul_scalar(self.momentum))
                        .detach(),
                );
            };
            update(&self.running_mean, mean.clone(), 1.0);
            update(&self.running_var, var.clone(), unbiased);
            (mean.reshape(per_channel), var.reshape(per_channel))
        } else {
            let running = |state: &RunningState<Tensor<B, 1>>| {
                state.value().to_device(&device).reshape(per_channel)
            };
            (running(&self.running_mean), running(&self.running_var))
        };
        let x = (x - mean) / var.add_scalar(self.epsilon).sqrt();
        let x = match &self.gamma {
            Some(gamma) => x * gamma.val().reshape(per_channel),
            None => x,
        };
        match &self.beta {
            Some(beta) => x + beta.val().reshape(per_channel),
            None => x,
        }
    }
}

#[cfg(test)]
mod tests {
    use burn::backend::{Autodiff, NdArray};
    use burn::module::AutodiffModule;
    use burn::tensor::{TensorData, Tolerance};

    use super::*;

    type B = Autodiff<NdArray>;

    /// PyTorch 1.13's `nn.BatchNorm2d(2, momentum=0.3)` after two training steps on these
    /// inputs (its running statistics), then its output in `eval()` on the first.
    #[test]
    fn running_statistics_and_evaluation_follow_pytorch() {
        let device = Default::default();
        let norm = BatchNorm::<B>::new(2, NormSpec::new().with_momentum(0.3), &device);
        let first = Tensor::<B, 4>::from_data(
            TensorData::new(
                vec![1.0f32, 2.0, 3.0, 4.0, -1.0, 0.5, 2.0, 8.0],
                [2, 2, 1, 2],
            ),
            &device,
        );
        let second = first.clone().mul_scalar(2.0).add_scalar(1.0);
        norm.forward(first.clone());
        norm.forward(second);
        let mean = norm.running_mean.value_sync().into_data();
        let var = norm.running_var.value_sync().into_data();
        mean.assert_approx_eq::<f32>(
            &TensorData::from([0.80625f32, 3.7425]),
            Tolerance::absolute(1e-5),
        );
        var.assert_approx_eq::<f32>(
            &TensorData::from([2.693125f32, 10.2425]),
            Tolerance::absolute(1e-4),
        );
        let valid = norm.valid();
        let x = Tensor::<NdArray, 4>::from_data(first.into_data(), &device);
        let y = valid.forward(x).into_data();
        let expected = vec![
            0.118_062_7f32,
            0.727_418_5,
            -0.232_002_94,
            0.080_458_76,
            -1.100_648_9,
            -0.186_615_2,
            -0.544_464_6,
            1.330_305_6,
        ];
        y.assert_approx_eq::<f32>(
            &TensorData::new(expected, [2, 2, 1, 2]),
            Tolerance::absolute(1e-5),
        );
    }
}
