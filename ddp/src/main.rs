//! cubenet's data-parallel build for NVIDIA GPUs: the same `cubenet` command, where
//! `train --devices 0,1,…` runs burn-train's DDP strategy. Each GPU gets its own thread, its
//! own share of every epoch's batches and its own replica of the model; in each step NCCL
//! averages the replicas' gradients, so every replica takes the same Adam step.
//!
//! The command is the library's (`cubenet::cli`); this file only registers the DDP
//! strategy for CUDA before running it. Why this is a package of its
//! own: see `Cargo.toml` and `cubenet::train::data_parallel`.
//!
//! ```text
//! cargo build --release --manifest-path ddp/Cargo.toml
//! ddp/target/release/cubenet train --config configs/lenet.toml --devices 0,1
//! ```

use std::process::ExitCode;
use std::sync::{Arc, Barrier, PoisonError, RwLock};

use burn::backend::Autodiff;
use burn::backend::cuda::CudaDevice;
use burn::prelude::DeviceOps;
use burn::tensor::backend::DeviceId;
use burn::tensor::backend::distributed::{DistributedBackend, DistributedConfig, ReduceOperation};
use burn::tensor::ops::FloatTensor;
use burn::train::ExecutionStrategy;
use cubecl::Runtime;
use cubecl::cuda::CudaRuntime;
use cubecl::device_handle::DeviceHandle;
use cubenet::train::data_parallel::{self, DataParallel};
use cubenet_kernels::CubeCuda;

/// The backend this build trains on.
type Ddp = Autodiff<CubeCuda>;

fn main() -> ExitCode {
    data_parallel::register::<Ddp>(DataParallel {
        description: "each device trains a replica of the model on its own batches, and NCCL \
                      averages the replicas' gradients after every step",
        strategy: nccl_ddp,
        average: nccl_average,
    });
    cubenet::cli::main()
}

/// The current data-parallel run's GPUs and the replicas' meeting point, set when its
/// strategy is made (a process may train several runs one after the other: `cubenet bench`
/// does, one per network and batch size).
static REPLICAS: RwLock<Option<Arc<Replicas>>> = RwLock::new(None);

struct Replicas {
    devices: Vec<DeviceId>,
    /// Where each step's replicas meet before their all-reduce; see [`nccl_average`].
    step: Barrier,
}

/// burn-train's DDP on `devices`, once NCCL is found: cudarc loads it at the first all-reduce
/// and would panic there without it.
///
/// DDP marks every parameter before the first step, for Burn's gradient sync server to
/// all-reduce each one's gradient on its own, from one thread for all GPUs. cubenet's
/// training step drops the marks (`cubenet::model::with_fresh_leaves` says why: that thread hung
/// 4-GPU runs), so the optimizer's one all-reduce per step ([`nccl_average`], from each
/// replica's own thread) is the only one.
fn nccl_ddp(devices: Vec<CudaDevice>) -> Result<ExecutionStrategy<Ddp>, String> {
    cubenet::device::nccl::locate().map_err(|e| e.to_string())?;
    let replicas = Replicas {
        devices: devices.iter().map(|device| device.to_id()).collect(),
        step: Barrier::new(devices.len()),
    };
    *REPLICAS.write().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(replicas));
    let config = DistributedConfig {
        all_reduce_op: ReduceOperation::Mean,
    };
    Ok(ExecutionStrategy::ddp(devices, config))
}

/// Averages a replica's buffer over the run's GPUs with one NCCL all-reduce, called by each
/// replica's own thread once per step. The all-reduce waits for the replica's step on its
/// GPU, and the replica's next kernels wait for the all-reduce, on the GPU.
///
/// The replicas first meet on the host: a replica a step ahead would leave an all-reduce on
/// its GPU that no other GPU has joined yet, and burn-train's one event processor, reading
/// that replica's metrics while the others wait for it to take their events, would wait
/// forever.
/// Before it waits there, a replica hands its GPU's device thread the tasks still in its
/// CubeCL queue, which starts on them only when 32 have gathered or the queue is flushed: the
/// GPU finishes the step's backward pass while the host waits. Only the queue: the client's
/// `flush` would also block the replica until its GPU had finished the previous step (it
/// frees the uploads that step read), where a replica ahead of its GPU need not wait.
fn nccl_average(buffer: FloatTensor<CubeCuda>) -> FloatTensor<CubeCuda> {
    let replicas = REPLICAS
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
        .expect("gradients are averaged only in a data-parallel run");
    DeviceHandle::<<CudaRuntime as Runtime>::Server>::new(buffer.device.to_id()).flush_queue();
    replicas.step.wait();
    CubeCuda::all_reduce(buffer, ReduceOperation::Mean, replicas.devices.clone()).resolve()
}
