//! The pinned host memory that checkpoints read through, allocated while a run starts.
//!
//! A checkpoint reads every parameter and its optimizer state back to the host. On CUDA,
//! CubeCL reads through pools of pinned host memory, each page allocated at the first read
//! that needs it on the GPU's queue runner, which launches nothing meanwhile; so the first
//! checkpoint would stall the GPU in the middle of training
//! (docs/perf-log/2026-11-28-replicas-out-of-step.md measured it). Reading tensors of the
//! parameters' sizes once on every training device, from a thread of its own as the run
//! starts, leaves those pages in the pools before the first epoch's kernels are compiled,
//! while the GPU has nothing else to do. Elsewhere it costs one read of the model's size.

use std::thread::JoinHandle;

use burn::module::{Module, ModuleVisitor, Param};
use burn::prelude::*;
use burn::tensor::Transaction;

/// The warm-up reads under way, one a device; dropping it waits for them.
pub(crate) struct PinnedWarmup {
    threads: Vec<JoinHandle<()>>,
}

/// Starts reading tensors of `model`'s parameter sizes once on each of `devices`.
pub(crate) fn warm_pinned_reads<B: Backend, M: Module<B>>(
    model: &M,
    devices: &[B::Device],
) -> PinnedWarmup {
    let mut sizes = ParameterSizes(Vec::new());
    model.visit(&mut sizes);
    let threads = devices
        .iter()
        .filter_map(|device| {
            let (sizes, device) = (sizes.0.clone(), device.clone());
            std::thread::Builder::new()
                .name("pinned-read-warmup".into())
                .spawn(move || read_once::<B>(&sizes, &device))
                .ok()
        })
        .collect();
    PinnedWarmup { threads }
}

/// Reads a tensor of each of `sizes` on `device`, all in one transaction.
fn read_once<B: Backend>(sizes: &[usize], device: &B::Device) {
    let transaction = sizes.iter().fold(Transaction::default(), |reads, &size| {
        reads.register(Tensor::<B, 1>::zeros([size], device))
    });
    // Only the pages the read leaves behind matter. Had it failed, the checkpoint's read
    // fails too, and the run reports that one.
    let _ = transaction.try_execute();
}

impl Drop for PinnedWarmup {
    fn drop(&mut self) {
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// The number of values of each float parameter, in visiting order.
struct ParameterSizes(Vec<usize>);

impl<B: Backend> ModuleVisitor<B> for ParameterSizes {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        self.0.push(param.lazy_shape().num_elements());
    }
}

#[cfg(test)]
mod tests {
    use burn::backend::NdArray;
    use burn::nn::{Linear, LinearConfig};

    use super::*;

    #[test]
    fn visits_every_parameter_and_reads_on_every_device() {
        let device = Default::default();
        let linear: Linear<NdArray> = LinearConfig::new(3, 5).init(&device);
        let mut sizes = ParameterSizes(Vec::new());
        linear.visit(&mut sizes);
        assert_eq!(sizes.0, [15, 5]);
        let warmup = warm_pinned_reads::<NdArray, _>(&linear, &[device, device]);
        assert_eq!(warmup.threads.len(), 2);
        drop(warmup);
    }
}
