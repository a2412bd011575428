//! Kernel outputs: new contiguous tensors, allocated together, poisoned in tests.

use burn::tensor::{DType, Shape};
use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;
use cubecl::server::MemoryLayoutDescriptor;

/// A new contiguous tensor of `shape` and `dtype` on `like`'s device, for a kernel to fill.
pub(crate) fn empty_like<R: CubeRuntime, const D: usize>(
    like: &CubeTensor<R>,
    shape: [usize; D],
    dtype: DType,
) -> CubeTensor<R> {
    let [tensor] = empty_group(like, [(shape.into(), dtype)]);
    tensor
}

/// New contiguous tensors on `like`'s device, for one kernel to fill, in one allocation:
/// CubeCL's device thread runs each allocation as a task of its own, so a kernel's several
/// outputs cost one task instead of one each.
pub(crate) fn empty_group<R: CubeRuntime, const K: usize>(
    like: &CubeTensor<R>,
    outputs: [(Shape, DType); K],
) -> [CubeTensor<R>; K] {
    empty_tensors(like, outputs.into())
        .try_into()
        .unwrap_or_else(|_| unreachable!("one tensor per output"))
}

/// [`empty_group`] for a number of outputs known at run time.
pub(crate) fn empty_tensors<R: CubeRuntime>(
    like: &CubeTensor<R>,
    outputs: Vec<(Shape, DType)>,
) -> Vec<CubeTensor<R>> {
    let client = &like.client;
    let layouts = outputs
        .iter()
        .map(|(shape, dtype)| MemoryLayoutDescriptor::contiguous(shape.clone(), dtype.size()));
    #[cfg(feature = "testing")]
    let memory = if crate::testing::poisoning() {
        let patterns: Vec<_> = outputs
            .iter()
            .map(|(shape, dtype)| crate::testing::poison(shape.num_elements(), *dtype))
            .collect();
        client.create_tensors_from_slices(layouts.zip(patterns.iter().map(Vec::as_slice)).collect())
    } else {
        client.empty_tensors(layouts.collect())
    };
    #[cfg(not(feature = "testing"))]
    let memory = client.empty_tensors(layouts.collect());
    outputs
        .into_iter()
        .zip(memory)
        .map(|((shape, dtype), layout)| {
            CubeTensor::new_contiguous(
                client.clone(),
                like.device.clone(),
                shape,
                layout.memory,
                dtype,
            )
        })
        .collect()
}
