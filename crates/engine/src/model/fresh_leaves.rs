//! Parameters as fresh leaves of the autodiff graph: their values, without what earlier
//! graph operations attached to them.
//!
//! The one attachment that matters is burn-train's DDP mark. Before a data-parallel run's
//! first step (and again after `--resume`), DDP marks every parameter, and Burn 0.21 then
//! all-reduces each marked parameter's gradient during the backward pass, from one sync
//! thread for all GPUs. That thread submits to every GPU's task queue in turn; when the first
//! all-reduce makes one GPU's queue runner wait inside NCCL's setup for the others, and that
//! queue fills up, the thread blocks before it reaches the next GPU, and the run hangs.
//! cubenet's optimizers average all of a replica's
//! gradients in one all-reduce from the replica's own thread (`train::data_parallel`), so a
//! training step drops the marks by differentiating with respect to fresh leaves.

use burn::module::{ModuleMapper, ModuleVisitor, Param};
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;

/// `value` as a new leaf of the graph, tracked for gradients if `tracked`.
pub fn fresh_leaf<B: AutodiffBackend, const D: usize>(
    value: Tensor<B::InnerBackend, D>,
    tracked: bool,
) -> Tensor<B, D> {
    let leaf = Tensor::from_inner(value);
    if tracked { leaf.require_grad() } else { leaf }
}

/// `module` with every parameter a fresh leaf of its value, tracked as before. Parameters
/// not yet initialized (Burn initializes them lazily) are initialized in `module` first: a
/// clone of one would draw values of its own.
pub fn with_fresh_leaves<B: AutodiffBackend, M: Module<B>>(module: &M) -> M {
    module.visit(&mut Initialize);
    module.clone().map(&mut FreshLeaves)
}

/// Initializes each parameter in place.
struct Initialize;

impl<B: Backend> ModuleVisitor<B> for Initialize {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        param.val();
    }
}

struct FreshLeaves;

impl<B: AutodiffBackend> ModuleMapper<B> for FreshLeaves {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let (id, tensor, mapper) = param.consume();
        let tracked = tensor.is_require_grad();
        Param::from_mapped_value(id, fresh_leaf(tensor.inner(), tracked), mapper)
    }
}
