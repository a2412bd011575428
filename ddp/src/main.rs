//! cubenet's data-parallel build for NVIDIA GPUs: the same `cubenet` command, where
//! `train --devices 0,1,…` runs burn-train's DDP strategy. Each GPU gets its own thread, its
//! own share of every epoch's batches and its own replica of the model; in each step NCCL
//! averages the replicas' gradients, so every replica takes the same Adam step.
//!
//! The command's sources are the root package's (`src/bin/cubenet`); this file only
//! registers the DDP strategy for CUDA before running them. Why this is a package of its
//! own: see `Cargo.toml` and `cubenet::train::data_parallel`.
//!
//! ```text
//! cargo build --release --manifest-path ddp/Cargo.toml
//! ddp/target/release/cubenet train --config configs/lenet.toml --devices 0,1
//! ```

#[path = "../../src/bin/cubenet/main.rs"]
mod cubenet_command;

use std::process::ExitCode;
use std::sync::{Arc, Barrier, PoisonError, RwLock};

use burn::backend::Autodiff;
use burn::backend::cuda::CudaDevice;
use burn::prelude::DeviceOps;
use burn::tensor::backend::DeviceId;
use burn::tensor::backend::distributed::{DistributedBackend, DistributedConfig, ReduceOperation};
use burn::tensor::ops::FloatTensor;
use burn::train::ExecutionStrategy;
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
    let status = cubenet_command::main();
    queue_flushers::stop();
    status
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
/// DDP marks every parameter before the first step, and Burn's gradient sync server then
/// all-reduces each marked parameter's gradient on its own, from one thread for all GPUs.
/// cubenet's optimizer does not carry the marks over: from the second step on, its one
/// all-reduce per step ([`nccl_average`]) is the only one (in the first, it averages
/// gradients already averaged: the same values, up to rounding on more than two GPUs).
fn nccl_ddp(devices: Vec<CudaDevice>) -> Result<ExecutionStrategy<Ddp>, String> {
    cubenet::nccl::locate().map_err(|e| e.to_string())?;
    let replicas = Replicas {
        devices: devices.iter().map(|device| device.to_id()).collect(),
        step: Barrier::new(devices.len()),
    };
    *REPLICAS.write().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(replicas));
    queue_flushers::start(&devices);
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
/// forever (measured: the first 2-GPU run without the meeting hung within one epoch).
fn nccl_average(buffer: FloatTensor<CubeCuda>) -> FloatTensor<CubeCuda> {
    let replicas = REPLICAS
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
        .expect("gradients are averaged only in a data-parallel run");
    replicas.step.wait();
    CubeCuda::all_reduce(buffer, ReduceOperation::Mean, replicas.devices.clone()).resolve()
}

/// Burn 0.21's gradient sync server (one thread for all devices) enqueues each device's
/// all-reduce on that device's CubeCL task queue without flushing it. With NCCL 2.28 the
/// first all-reduce on one GPU blocks its queue's runner inside NCCL until the other GPU's
/// all-reduce starts, which then sits unflushed forever: the first step never ends
/// (measured on 2 x H200, both with cubenet's kernels and with Burn's). A thread per device
/// flushes its queue every 0.2 ms while the run trains, so each enqueued all-reduce starts.
mod queue_flushers {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::thread::JoinHandle;
    use std::time::Duration;

    use burn::backend::cuda::CudaDevice;
    use cubecl::Runtime;
    use cubecl::cuda::CudaRuntime;

    const PERIOD: Duration = Duration::from_micros(200);

    static STOP: AtomicBool = AtomicBool::new(false);
    /// Each flushed device and its flusher.
    static RUNNING: Mutex<Vec<(CudaDevice, JoinHandle<()>)>> = Mutex::new(Vec::new());

    /// Flushes the queues of `devices` from now on; those of an earlier run already are.
    pub fn start(devices: &[CudaDevice]) {
        let mut running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
        for device in devices {
            if running.iter().any(|(flushed, _)| flushed == device) {
                continue;
            }
            let client = CudaRuntime::client(device);
            let flusher = std::thread::spawn(move || {
                while !STOP.load(Ordering::Relaxed) {
                    std::thread::sleep(PERIOD);
                    let _ = client.flush();
                }
            });
            running.push((device.clone(), flusher));
        }
    }

    /// Ends the flushing before the process exits (a flush racing the runtime's teardown
    /// panics).
    pub fn stop() {
        STOP.store(true, Ordering::Relaxed);
        let running = std::mem::take(&mut *RUNNING.lock().unwrap_or_else(|e| e.into_inner()));
        for (_, flusher) in running {
            let _ = flusher.join();
        }
    }
}
