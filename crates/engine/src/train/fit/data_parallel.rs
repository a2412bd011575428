//! How a run on several devices shares its work.
//!
//! Every build can train on several devices with burn-train's multi-device strategy: one
//! thread takes a batch from each device's slice of the data and sums the gradients on the
//! first device. A build that can do better for one backend registers a [`DataParallel`]
//! for it, and image runs on that backend use it instead.
//!
//! cubenet's data-parallel build (`ddp/`, CUDA only) registers burn-train's DDP strategy:
//! a thread, a data stream and a model replica per GPU, the gradients averaged by NCCL (by
//! cubenet's optimizers, in one all-reduce per step: see [`DataParallel::average`]). It
//! is a build of its own because Burn 0.21's `distributed` feature, which DDP needs, makes
//! the CPU backend (`Autodiff<NdArray>`) stop being an autodiff backend, so it cannot be in
//! the same build as the CPU backend, the tests, or `--all-features`. The registration is
//! keyed by the backend's type, which is why it is a type map rather than a generic argument
//! threaded through every run: the library is generic over backends, and only the
//! data-parallel build can name the strategy for its one.

use std::any::{Any, TypeId};
use std::sync::{OnceLock, RwLock};

use burn::tensor::backend::AutodiffBackend;
use burn::tensor::ops::FloatTensor;
use burn::train::ExecutionStrategy;

/// A strategy for several devices, or why this machine cannot run it (one line).
pub type StrategyFor<B> = Result<ExecutionStrategy<B>, String>;

/// Averages one replica's buffer over all replicas; see [`DataParallel::average`].
pub type AverageOverReplicas<B> = fn(
    FloatTensor<<B as AutodiffBackend>::InnerBackend>,
) -> FloatTensor<<B as AutodiffBackend>::InnerBackend>;

/// A data-parallel strategy for backend `B` that replaces burn-train's multi-device one.
pub struct DataParallel<B: AutodiffBackend> {
    /// What the run prints about it: how the replicas share their gradients.
    pub description: &'static str,
    /// The strategy for `devices` (more than one), or why this machine cannot run it (one
    /// line, e.g. the collective library is missing).
    pub strategy: fn(Vec<B::Device>) -> StrategyFor<B>,
    /// Averages a buffer over the replicas: each replica's optimizer calls it once per step
    /// with all of its gradients packed into one flat buffer, in the same order on every
    /// replica, and steps with the result ([`crate::train::FusedAdam::averaging_over_replicas`]).
    /// One collective per step rather than one per parameter is what lets short steps add
    /// up over several devices.
    pub average: AverageOverReplicas<B>,
}

/// The registered strategies, by the type of the backend each is for.
type Registry = RwLock<Vec<(TypeId, &'static (dyn Any + Send + Sync))>>;

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

/// Makes runs of several devices on backend `B` use `strategy` (for the rest of the process).
pub fn register<B: AutodiffBackend>(strategy: DataParallel<B>) {
    let strategy: &'static DataParallel<B> = Box::leak(Box::new(strategy));
    let mut registry = registry().write().unwrap_or_else(|e| e.into_inner());
    registry.retain(|(backend, _)| *backend != TypeId::of::<B>());
    registry.push((TypeId::of::<B>(), strategy));
}

/// The strategy registered for backend `B`, if any.
pub fn registered<B: AutodiffBackend>() -> Option<&'static DataParallel<B>> {
    let registry = registry().read().unwrap_or_else(|e| e.into_inner());
    registry
        .iter()
        .find(|(backend, _)| *backend == TypeId::of::<B>())
        .and_then(|(_, strategy)| strategy.downcast_ref::<DataParallel<B>>())
}

#[cfg(test)]
mod tests {
    use burn::backend::{Autodiff, NdArray};

    use super::*;

    /// A backend no other test trains on: the registry is the test process's.
    type Cpu = Autodiff<NdArray<f64>>;

    #[test]
    fn a_strategy_is_found_for_its_backend_only() {
        assert!(registered::<Cpu>().is_none());
        register::<Cpu>(DataParallel {
            description: "first",
            strategy: |_| Err("not here".into()),
            average: |buffer| buffer,
        });
        register::<Cpu>(DataParallel {
            description: "replaces the first",
            strategy: |_| Ok(ExecutionStrategy::SingleDevice(Default::default())),
            average: |buffer| buffer,
        });
        let found = registered::<Cpu>().expect("registered");
        assert_eq!(found.description, "replaces the first");
        assert!((found.strategy)(vec![Default::default()]).is_ok());
        assert!(registered::<Autodiff<NdArray>>().is_none());
    }
}
