//! A group of tensors copied into one buffer in one launch: a data-parallel step's
//! gradients, packed for one all-reduce. Each destination is a view of the buffer at its
//! tensor's place there (`cube::pack` chooses the places); unit `pos` copies element `pos`
//! of every tensor that long. All tensors are contiguous.

use cubecl::prelude::*;

#[cube(launch_unchecked)]
pub fn pack<F: Float>(tensors: &Sequence<Array<F>>, places: &mut Sequence<Array<F>>) {
    let pos = ABSOLUTE_POS;
    #[unroll]
    for i in 0..tensors.len() {
        let tensor = tensors.index(i);
        if pos < tensor.len() {
            places.index_mut(i)[pos] = tensor[pos];
        }
    }
}
