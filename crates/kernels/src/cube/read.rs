//! Reads queued now and awaited later. burn-cubecl's own read queues the copy when its
//! future is first polled, and that poll blocks until the copy is done. Here the device
//! thread queues the copy (and the event that marks its end) before [`read_early`] returns,
//! as CubeCL's client does for its reads; the future only waits for that event.

use burn::prelude::DeviceOps;
use burn::tensor::TensorData;
use burn::tensor::backend::ExecutionError;
use burn_cubecl::CubeRuntime;
use burn_cubecl::kernel::into_contiguous_aligned;
use burn_cubecl::tensor::CubeTensor;
use cubecl::device_handle::DeviceHandle;
use cubecl::server::{ComputeServer, CopyDescriptor};
use cubecl::stream_id::StreamId;

use crate::PendingRead;

/// The values of `tensors` (on one device), copied to the host behind the work launched so
/// far.
pub(crate) fn read_early<R: CubeRuntime>(tensors: Vec<CubeTensor<R>>) -> PendingRead {
    let Some(device) = tensors.first().map(|first| first.device.clone()) else {
        return Box::pin(async { Ok(Vec::new()) });
    };
    // The copy reads rows as the runtime lays them out (padded rows, no other strides).
    let tensors: Vec<_> = tensors.into_iter().map(into_contiguous_aligned).collect();
    let layouts: Vec<_> = tensors
        .iter()
        .map(|t| (t.meta.shape().clone(), t.dtype))
        .collect();
    let copies = tensors
        .into_iter()
        .map(|t| {
            CopyDescriptor::new(
                t.handle.binding(),
                t.meta.shape().clone(),
                t.meta.strides().clone(),
                t.dtype.size(),
            )
        })
        .collect();
    // The caller's stream, as a client without a stream of its own reads on.
    let stream = StreamId::current();
    let copying = DeviceHandle::<R::Server>::new(device.to_id())
        .submit_blocking(move |server| server.read(copies, stream));
    Box::pin(async move {
        let failed = |reason: String| ExecutionError::WithContext { reason };
        let copied = copying.map_err(|_| failed("the device thread is gone".into()))?;
        let bytes = copied.await.map_err(|error| failed(format!("{error:?}")))?;
        Ok(bytes
            .into_iter()
            .zip(layouts)
            .map(|(bytes, (shape, dtype))| TensorData::from_bytes(bytes, shape, dtype))
            .collect())
    })
}
