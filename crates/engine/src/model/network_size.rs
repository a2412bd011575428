//! How much memory a network needs, from its layer table alone: a run weighs it against
//! what the device has before a single weight is made, so that an oversized network is a
//! one-line refusal instead of an allocation that aborts the process.

use super::CnnSummary;

/// A network's size, known before any weight exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetworkSize {
    /// Its parameters.
    pub params: u64,
    /// The values one image (or row) passes through it: the input and every layer's output.
    pub activations: u64,
}

/// Every parameter and activation is an `f32`.
const VALUE_BYTES: u64 = 4;
/// Copies of each weight at a training step's peak: the weight, its gradient, the
/// optimizer's two moments (Adam's), and the new weight and moments an update makes before
/// the old ones are dropped.
const TRAINING_WEIGHT_COPIES: u64 = 7;
/// Copies of each activation in a training step: the forward value, what the backward pass
/// keeps of it, and its gradient.
const TRAINING_ACTIVATION_COPIES: u64 = 3;

impl NetworkSize {
    /// The size of an MLP with these layer widths, input first.
    pub fn of_widths(widths: &[usize]) -> Self {
        let params = widths
            .windows(2)
            .map(|pair| (as_u64(pair[0]) + 1).saturating_mul(as_u64(pair[1])))
            .fold(0, u64::saturating_add);
        let activations = widths
            .iter()
            .map(|&w| as_u64(w))
            .fold(0, u64::saturating_add);
        Self {
            params,
            activations,
        }
    }

    /// Bytes a training step at `batch` holds at its peak (an estimate that errs high).
    pub fn training_bytes(&self, batch: usize) -> u64 {
        let weights = self.params.saturating_mul(TRAINING_WEIGHT_COPIES);
        let activations = self
            .activations
            .saturating_mul(as_u64(batch))
            .saturating_mul(TRAINING_ACTIVATION_COPIES);
        weights
            .saturating_add(activations)
            .saturating_mul(VALUE_BYTES)
    }

    /// Bytes to classify a batch of `batch`: the weights once, a layer's input and output.
    pub fn inference_bytes(&self, batch: usize) -> u64 {
        let activations = self
            .activations
            .saturating_mul(as_u64(batch))
            .saturating_mul(2);
        self.params
            .saturating_add(activations)
            .saturating_mul(VALUE_BYTES)
    }
}

impl CnnSummary {
    /// Its parameters and the values an image passes through it.
    pub fn size(&self) -> NetworkSize {
        let activations = self
            .shapes()
            .iter()
            .map(|shape| as_u64(shape.values()))
            .fold(0, u64::saturating_add);
        NetworkSize {
            params: as_u64(self.params()),
            activations,
        }
    }
}

fn as_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_mlp_counts_weights_biases_and_every_layers_values() {
        let size = NetworkSize::of_widths(&[784, 100, 10]);
        assert_eq!(size.params, 785 * 100 + 101 * 10);
        assert_eq!(size.activations, 894);
        assert_eq!(size.training_bytes(2), (size.params * 7 + 894 * 2 * 3) * 4);
        assert_eq!(size.inference_bytes(1), (size.params + 894 * 2) * 4);
        let huge = NetworkSize::of_widths(&[usize::MAX, usize::MAX]);
        assert_eq!(huge.training_bytes(usize::MAX), u64::MAX);
    }
}
