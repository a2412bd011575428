//! A classification step's outputs on their way to burn-train's metrics.
//!
//! burn-train reads a step's outputs on its metrics thread, after the training thread has
//! queued the next step's kernels; a read queued only then also waits for those. In a
//! data-parallel run the replicas hand their outputs to the one metrics thread one at a
//! time, so while it waited for one GPU's next backward pass, the other replica could not
//! hand over its own and start its next step
//! (docs/perf-log/2026-11-28-replicas-out-of-step.md). Here the copy is queued right after
//! the forward pass ([`KernelBackend::read_early`]), and the metrics thread waits for that
//! pass only.

use burn::backend::NdArray;
use burn::prelude::*;
use burn::train::ClassificationOutput;
use burn::train::metric::ItemLazy;
use cubecl::future::block_on;
use cubenet_kernels::{KernelBackend, PendingRead};

/// A step's logits, loss and targets, copied to the host when burn-train reads them.
pub struct StepOutputs {
    values: PendingRead,
}

impl StepOutputs {
    /// Queues the copy of `outputs` to the host behind the work launched so far.
    pub fn read_early<B: KernelBackend>(outputs: ClassificationOutput<B>) -> Self {
        let floats = [
            outputs.output.into_primitive(),
            outputs.loss.into_primitive(),
        ]
        .into_iter()
        .map(|primitive| primitive.tensor())
        .collect();
        Self {
            values: B::read_early(floats, vec![outputs.targets.into_primitive()]),
        }
    }
}

impl ItemLazy for StepOutputs {
    type ItemSync = ClassificationOutput<NdArray>;

    fn sync(self) -> ClassificationOutput<NdArray> {
        let values = block_on(self.values).expect("a step's outputs can be read");
        let [output, loss, targets] = <[TensorData; 3]>::try_from(values)
            .unwrap_or_else(|values| panic!("three tensors read, not {}", values.len()));
        let device = Default::default();
        ClassificationOutput {
            output: Tensor::from_data(output, &device),
            loss: Tensor::from_data(loss, &device),
            targets: Tensor::from_data(targets, &device),
        }
    }
}
