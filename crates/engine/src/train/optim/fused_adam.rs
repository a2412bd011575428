//! Adam as one kernel for all of a model's parameters: the optimizer of every image run
//! and of tabular runs with `optimizer.kind = "adam"`.
//!
//! Burn's `Adam` (through its `OptimizerAdaptor`) runs thirteen kernels per parameter and
//! step — LeNet's eight parameters cost 104 launches, more than its whole forward and
//! backward pass. This optimizer computes the same update (no AMSGrad, no gradient
//! clipping: what cubenet's runs use) through `KernelBackend::adam_update`, whose default
//! bodies are Burn's ops on backends without the kernel. Its record is the adaptor's, so a
//! checkpoint written by either optimizer resumes with the other.

use std::collections::HashMap;

use burn::module::{AutodiffModule, ParamId};
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::record::{AdaptorRecord, AdaptorRecordV1};
use burn::optim::{
    Adam, AdamState, AdaptiveMomentumState, GradientsParams, LearningRate, MultiGradientsParams,
    Optimizer,
};
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{TensorMetadata, TensorPrimitive};
use cubenet_kernels::{AdamMoments, AdamStep, AutodiffKernelBackend, KernelBackend};

use crate::train::fit::data_parallel::AverageOverReplicas;
use crate::train::optim::fused_update::{Grads, Inner, Operand, States, Updated, update_module};

/// Configuration of [`FusedAdam`]; the defaults are Burn's `AdamConfig`'s.
#[derive(Config, Debug)]
pub struct FusedAdamConfig {
    #[config(default = 0.9)]
    pub beta_1: f32,
    #[config(default = 0.999)]
    pub beta_2: f32,
    #[config(default = 1e-5)]
    pub epsilon: f32,
    /// Weight decay (L2 penalty) λ, added to each gradient as λ·p (0: none).
    #[config(default = 0.0)]
    pub weight_decay: f32,
}

impl FusedAdamConfig {
    /// The optimizer, for a module trained on backend `B`.
    pub fn init<B: AutodiffKernelBackend>(&self) -> FusedAdam<B> {
        FusedAdam {
            config: self.clone(),
            moments: HashMap::new(),
            times: HashMap::new(),
            replicas: None,
        }
    }
}

/// The optimizer: see the module docs.
#[derive(Clone)]
pub struct FusedAdam<B: AutodiffBackend> {
    config: FusedAdamConfig,
    /// Each parameter's first and second moments.
    moments: States<B>,
    /// Each parameter's step count.
    times: HashMap<ParamId, usize>,
    /// In a data-parallel run, how the gradients are averaged over the replicas.
    replicas: Option<AverageOverReplicas<B>>,
}

impl<B, M> Optimizer<M, B> for FusedAdam<B>
where
    B: AutodiffKernelBackend,
    M: AutodiffModule<B>,
{
    /// Burn's Adam record: each parameter's step count and moments.
    type Record = <OptimizerAdaptor<Adam, M, B> as Optimizer<M, B>>::Record;

    fn step(&mut self, lr: LearningRate, module: M, mut grads: GradientsParams) -> M {
        self.update(lr, module, Grads::Single(&mut grads))
    }

    fn step_multi(&mut self, lr: LearningRate, module: M, mut grads: MultiGradientsParams) -> M {
        self.update(lr, module, Grads::Multi(&mut grads))
    }

    fn to_record(&self) -> Self::Record {
        let mut record: Self::Record = Default::default();
        for (id, moments) in &self.moments {
            let [first, second] = [&moments[0], &moments[1]].map(Clone::clone);
            let time = self.times[id]; // set with the moments, in `update` and `load_record`
            record.insert(*id, adaptor_record::<B>(time, first, second));
        }
        record
    }

    fn load_record(mut self, record: Self::Record) -> Self {
        for (id, record) in record {
            let (time, first, second) = adaptor_parts::<B>(record);
            self.times.insert(id, time);
            self.moments.insert(id, vec![first, second]);
        }
        self
    }
}

impl<B: AutodiffKernelBackend> FusedAdam<B> {
    /// The optimizer of one replica of a data-parallel run: each step first averages the
    /// gradients over the replicas through `average`, so that every replica takes the same
    /// step.
    pub fn averaging_over_replicas(self, average: AverageOverReplicas<B>) -> Self {
        Self {
            replicas: Some(average),
            ..self
        }
    }

    /// One step of every parameter of `module` that has a gradient in `grads`: one update
    /// per device and step count (normally one for the whole model).
    fn update<M: AutodiffModule<B>>(&mut self, lr: LearningRate, module: M, grads: Grads) -> M {
        let Self {
            config,
            moments,
            times,
            replicas,
        } = self;
        update_module(module, grads, moments, 2, *replicas, |mut group| {
            let mut updated = Vec::new();
            while let Some(first) = group.first() {
                let time = times.get(&first.id).copied().unwrap_or(0) + 1;
                let (now, later): (Vec<_>, Vec<_>) = group
                    .into_iter()
                    .partition(|o| times.get(&o.id).copied().unwrap_or(0) + 1 == time);
                let step = AdamStep {
                    lr,
                    beta_1: config.beta_1,
                    beta_2: config.beta_2,
                    epsilon: config.epsilon,
                    weight_decay: config.weight_decay,
                    time,
                };
                for operand in &now {
                    times.insert(operand.id, time);
                }
                updated.extend(adam_group::<B>(now, step));
                group = later;
            }
            updated
        })
    }
}

/// Adam's update of parameters at the same step count, on one device.
fn adam_group<B: AutodiffKernelBackend>(group: Vec<Operand<B>>, step: AdamStep) -> Vec<Updated<B>> {
    let ids: Vec<ParamId> = group.iter().map(|o| o.id).collect();
    let (mut params, mut grads) = (Vec::new(), Vec::new());
    let mut moments = AdamMoments {
        first: Vec::new(),
        second: Vec::new(),
    };
    for operand in group {
        params.push(operand.param);
        grads.push(operand.grad);
        // `update_module` hands each parameter the two moments it keeps.
        let mut state = operand.state.into_iter();
        moments.first.extend(state.next());
        moments.second.extend(state.next());
    }
    let (updated, moments) = Inner::<B>::adam_update(params, grads, moments, step);
    ids.into_iter()
        .zip(updated)
        .zip(moments.first.into_iter().zip(moments.second))
        .map(|((id, param), (first, second))| Updated {
            id,
            param,
            state: vec![first, second],
        })
        .collect()
}

/// A parameter's Adam state as Burn's record of it, whose type carries the parameter's rank.
fn adaptor_record<B: AutodiffBackend>(
    time: usize,
    first: FloatTensor<Inner<B>>,
    second: FloatTensor<Inner<B>>,
) -> AdaptorRecord<Adam, B> {
    fn of_rank<B: AutodiffBackend, const D: usize>(
        time: usize,
        first: FloatTensor<Inner<B>>,
        second: FloatTensor<Inner<B>>,
    ) -> AdaptorRecord<Adam, B> {
        let tensor = |t| Tensor::<Inner<B>, D>::from_primitive(TensorPrimitive::Float(t));
        let moments = AdaptiveMomentumState::new(time, tensor(first), tensor(second));
        AdaptorRecord::from_state::<D>(AdamState::new(moments))
    }
    match first.shape().num_dims() {
        0 => of_rank::<B, 0>(time, first, second),
        1 => of_rank::<B, 1>(time, first, second),
        2 => of_rank::<B, 2>(time, first, second),
        3 => of_rank::<B, 3>(time, first, second),
        4 => of_rank::<B, 4>(time, first, second),
        5 => of_rank::<B, 5>(time, first, second),
        6 => of_rank::<B, 6>(time, first, second),
        7 => of_rank::<B, 7>(time, first, second),
        8 => of_rank::<B, 8>(time, first, second),
        rank => unreachable!("a parameter of rank {rank}: Burn's records hold ranks 0 to 8"),
    }
}

/// The step count and moments in Burn's record of a parameter's Adam state.
fn adaptor_parts<B: AutodiffBackend>(
    record: AdaptorRecord<Adam, B>,
) -> (usize, FloatTensor<Inner<B>>, FloatTensor<Inner<B>>) {
    fn parts<B: Backend, const D: usize>(
        state: AdamState<B, D>,
    ) -> (usize, FloatTensor<B>, FloatTensor<B>) {
        let moments = state.momentum;
        (
            moments.time,
            moments.moment_1.into_primitive().tensor(),
            moments.moment_2.into_primitive().tensor(),
        )
    }
    let AdaptorRecord::V1(record) = record;
    match record {
        AdaptorRecordV1::Rank0(state) => parts(state),
        AdaptorRecordV1::Rank1(state) => parts(state),
        AdaptorRecordV1::Rank2(state) => parts(state),
        AdaptorRecordV1::Rank3(state) => parts(state),
        AdaptorRecordV1::Rank4(state) => parts(state),
        AdaptorRecordV1::Rank5(state) => parts(state),
        AdaptorRecordV1::Rank6(state) => parts(state),
        AdaptorRecordV1::Rank7(state) => parts(state),
        AdaptorRecordV1::Rank8(state) => parts(state),
    }
}
