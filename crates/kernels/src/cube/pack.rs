//! A step's gradients in one buffer for one collective, and back out of it. [`pack`] copies
//! them in with one launch (a few on runtimes with few buffer bindings), each starting at
//! the runtime's memory alignment, so that [`unpack`] hands each back as a view of the
//! buffer. Burn's `cat` copies each tensor with a launch of its own, and its slices, at
//! offsets the runtime cannot bind, copy again: 15 launches a LeNet step where this makes 1.

use burn::tensor::{Shape, TensorMetadata};
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeRuntime, FloatElement};

use super::alloc::empty_like;
use super::launch::launch;
use super::update::UpdateGroup;
use crate::kernels::pack::pack as pack_kernel;

/// `tensors` (at least one) in one new flat buffer, each at its [`Places`] start.
pub(crate) fn pack<R: CubeRuntime, F: FloatElement>(tensors: Vec<CubeTensor<R>>) -> CubeTensor<R> {
    let first = tensors.first().expect("a group to pack has a tensor");
    let places = Places::new(first, tensors.iter().map(|t| t.shape()).collect());
    let packed = empty_like(first, [places.len], first.dtype);
    let views = places.views(&packed);
    // Each tensor binds itself and its place.
    for group in UpdateGroup::split([tensors, views], 2) {
        launch!(pack_kernel::<F, R>(
            &packed,
            group.count.clone(),
            group.dim,
            group.inputs(0),
            group.inputs(1),
        ));
    }
    packed
}

/// The tensors of `shapes` that [`pack`] put into `packed` (or into what a collective made
/// of it: a buffer of the same length), as views of it.
pub(crate) fn unpack<R: CubeRuntime>(
    packed: CubeTensor<R>,
    shapes: Vec<Shape>,
) -> Vec<CubeTensor<R>> {
    let places = Places::new(&packed, shapes);
    assert_eq!(
        places.len,
        packed.shape().num_elements(),
        "a packed buffer holds the shapes it was packed from"
    );
    places.views(&packed)
}

/// Where each tensor of a packed buffer lies: one after the other in order, each starting
/// at the first multiple of the runtime's memory alignment (what a binding's offset must
/// be) after the one before; the gaps hold no values.
struct Places {
    starts: Vec<usize>,
    shapes: Vec<Shape>,
    /// The buffer's length, in elements.
    len: usize,
}

impl Places {
    /// The places of tensors of `shapes`, of `like`'s element type on `like`'s runtime.
    fn new<R: CubeRuntime>(like: &CubeTensor<R>, shapes: Vec<Shape>) -> Self {
        let alignment = like.client.properties().memory.alignment as usize;
        let step = (alignment / like.dtype.size()).max(1);
        let mut len = 0usize;
        let starts = shapes
            .iter()
            .map(|shape| {
                let start = len.next_multiple_of(step);
                len = start + shape.num_elements();
                start
            })
            .collect();
        Self {
            starts,
            shapes,
            len,
        }
    }

    /// Each place of `packed` as a contiguous tensor of its shape sharing `packed`'s memory.
    fn views<R: CubeRuntime>(&self, packed: &CubeTensor<R>) -> Vec<CubeTensor<R>> {
        let bytes = packed.dtype.size() as u64;
        let len = self.len as u64;
        self.starts
            .iter()
            .zip(&self.shapes)
            .map(|(&start, shape)| {
                let (start, end) = (start as u64, (start + shape.num_elements()) as u64);
                let handle = packed
                    .handle
                    .clone()
                    .offset_start(start * bytes)
                    .offset_end((len - end) * bytes);
                CubeTensor::new_contiguous(
                    packed.client.clone(),
                    packed.device.clone(),
                    shape.clone(),
                    handle,
                    packed.dtype,
                )
            })
            .collect()
    }
}
