//! What one forward-shaped GEMM launch is ([`GemmLaunch`]) and the tensor-core tile it
//! takes by default ([`tensor_tile`]), in a file below [`forward`](mod@super::forward) and
//! [`super::channels_last`] because both launches take them.

use burn_cubecl::CubeRuntime;
use burn_cubecl::tensor::CubeTensor;

use crate::kernels::conv::tensor_tile::TensorTile;
use crate::kernels::geometry::Window;

/// One launch of the implicit GEMM: a map convolved over `window` with `weight` (read
/// transposed and flipped for an input gradient, if `transposed`), plus `bias`, into
/// `output` (a 4-D map), over a grid of `quads` = [quads_h, quads_w] per image; with
/// `argmax`, `output` is the pooled map and the quads are its pool windows.
pub(super) struct GemmLaunch<'a, R: CubeRuntime> {
    pub weight: CubeTensor<R>,
    pub bias: Option<CubeTensor<R>>,
    pub output: &'a CubeTensor<R>,
    pub argmax: Option<&'a CubeTensor<R>>,
    pub quads: [usize; 2],
    pub window: Window,
    pub transposed: bool,
}

/// The tensor-core tile for a GEMM of `cols` columns.
pub(super) fn tensor_tile(cols: usize) -> TensorTile {
    if cols <= TensorTile::NARROW.columns() as usize {
        TensorTile::NARROW
    } else {
        TensorTile::WIDE
    }
}
