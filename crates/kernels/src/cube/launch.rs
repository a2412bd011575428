//! Launching a kernel: unchecked, then handed to CubeCL's device thread at once.
//!
//! Kernels are launched unchecked: CubeCL's checked launch clamps every tensor index and
//! selects a zero for out-of-range reads, instructions that the issue-bound kernels pay
//! for on every access. Each kernel instead guards its own indices
//! against the shapes it is launched with, and the tests run every kernel over many random
//! shapes with poisoned outputs.
//!
//! Kernels take their operands as `Array`s and the sizes and strides they need as scalars
//! ([`crate::kernels::geometry::Nchw`]), never as `Tensor`s: a `Tensor` argument's shape
//! and strides are metadata that CubeCL's CUDA server uploads through pinned staging
//! before each launch on GPUs with grid constants (the H100 and H200 among them), on the
//! device thread that host-bound steps wait for.

use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;
use cubecl::device::Device;
use cubecl::device_handle::DeviceHandle;

/// `launch!(kernel::<F, R>(&on, count, dim, args…))` launches the `#[cube(launch_unchecked)]`
/// kernel on the client of the tensor `on` (one of its outputs), then
/// [`start_queued_tasks`] on that tensor's device.
macro_rules! launch {
    ($kernel:ident::<$($generic:ty),+>($on:expr, $count:expr, $dim:expr, $($arg:expr),+ $(,)?)) => {{
        let on: &burn_cubecl::tensor::CubeTensor<_> = $on;
        // SAFETY: every kernel guards its own indices against the shapes it is launched
        // with (see the documentation of `cube::launch`).
        unsafe {
            $kernel::launch_unchecked::<$($generic),+>(&on.client, $count, $dim, $($arg),+)
        }
        $crate::cube::launch::start_queued_tasks(on);
    }};
}
pub(crate) use launch;

/// Hands the tasks queued so far on `on`'s device to CubeCL's device thread now. CubeCL 0.10
/// queues every launch and allocation for one device thread that starts on them only when
/// 32 have accumulated or at a synchronization; a training step makes fewer, so without
/// this its kernels would wait for the host to finish building the whole step.
pub(crate) fn start_queued_tasks<R: CubeRuntime>(on: &CubeTensor<R>) {
    DeviceHandle::<R::Server>::new(on.device.to_id()).flush_queue();
}
