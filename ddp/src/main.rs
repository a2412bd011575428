//! cubenet's data-parallel build for NVIDIA GPUs: the same `cubenet` command, where
//! `train --devices 0,1,…` runs burn-train's DDP strategy. Each GPU gets its own thread, its
//! own share of every epoch's batches and its own replica of the model; after each step
//! NCCL averages the replicas' gradients, so every replica takes the same Adam step.
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

use burn::backend::Autodiff;
use burn::backend::cuda::CudaDevice;
use burn::module::ParamId;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::backend::distributed::{DistributedConfig, DistributedParamId, ReduceOperation};
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
        carry_marks,
    });
    let status = cubenet_command::main();
    queue_flushers::stop();
    status
}

/// After an optimizer step, a parameter whose gradients DDP averaged stays marked so (as
/// burn-optim's own optimizers do it).
fn carry_marks(
    before: &FloatTensor<Ddp>,
    after: FloatTensor<Ddp>,
    id: ParamId,
) -> FloatTensor<Ddp> {
    match Ddp::is_distributed(before) {
        true => Ddp::set_distributed_params(after, DistributedParamId::from(id.val())),
        false => after,
    }
}

/// burn-train's DDP on `devices`, the gradients averaged (so a step equals one over the
/// devices' batches together), once NCCL is found: cudarc loads it at the first all-reduce
/// and would panic there without it.
fn nccl_ddp(devices: Vec<CudaDevice>) -> Result<ExecutionStrategy<Ddp>, String> {
    cubenet::nccl::locate().map_err(|e| e.to_string())?;
    queue_flushers::start(&devices);
    let config = DistributedConfig {
        all_reduce_op: ReduceOperation::Mean,
    };
    Ok(ExecutionStrategy::ddp(devices, config))
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
    static RUNNING: Mutex<Vec<JoinHandle<()>>> = Mutex::new(Vec::new());

    pub fn start(devices: &[CudaDevice]) {
        let mut running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
        for device in devices {
            let client = CudaRuntime::client(device);
            running.push(std::thread::spawn(move || {
                while !STOP.load(Ordering::Relaxed) {
                    std::thread::sleep(PERIOD);
                    let _ = client.flush();
                }
            }));
        }
    }

    /// Ends the flushing before the process exits (a flush racing the runtime's teardown
    /// panics).
    pub fn stop() {
        STOP.store(true, Ordering::Relaxed);
        let running = std::mem::take(&mut *RUNNING.lock().unwrap_or_else(|e| e.into_inner()));
        for flusher in running {
            let _ = flusher.join();
        }
    }
}
