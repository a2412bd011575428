//! Window geometry baked into kernels at compile time (one compiled kernel per geometry,
//! so the window loops unroll).

use cubecl::prelude::*;

/// A sliding window over an NCHW map: size, stride and zero padding per axis.
#[derive(CubeType, Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct Window {
    pub size_h: u32,
    pub size_w: u32,
    pub stride_h: u32,
    pub stride_w: u32,
    pub pad_h: u32,
    pub pad_w: u32,
}

impl Window {
    /// Builds a window from `[h, w]` pairs.
    pub fn new(size: [usize; 2], stride: [usize; 2], padding: [usize; 2]) -> Self {
        Self {
            size_h: size[0] as u32,
            size_w: size[1] as u32,
            stride_h: stride[0] as u32,
            stride_w: stride[1] as u32,
            pad_h: padding[0] as u32,
            pad_w: padding[1] as u32,
        }
    }

    /// Whether this is the 2×2 stride-2 unpadded pool, whose windows tile the map in 2×2
    /// blocks (the networks' pool, which several kernels handle in blocks).
    pub fn is_2x2_tiling(self) -> bool {
        self == Window::new([2, 2], [2, 2], [0, 0])
    }
}

/// An input map's height, width and row stride, read once from its tensor before a
/// kernel's loops.
#[derive(CubeType)]
pub struct InputMap {
    pub rows: u32,
    pub cols: u32,
    pub row_stride: usize,
}

#[cube]
impl InputMap {
    /// The map of `x`, an NCHW tensor whose rows have unit stride.
    pub fn of<F: Float>(x: &Tensor<F>) -> InputMap {
        InputMap {
            rows: x.shape(2) as u32,
            cols: x.shape(3) as u32,
            row_stride: x.stride(2),
        }
    }
}

/// Splits the linear index `pos` of a contiguous NCHW `tensor` into (n, c, row, col).
#[cube]
pub fn nchw_position<E: CubePrimitive>(pos: usize, tensor: &Tensor<E>) -> (usize, usize, u32, u32) {
    let width = tensor.shape(3);
    let height = tensor.shape(2);
    let channels = tensor.shape(1);
    let col = (pos % width) as u32;
    let row = ((pos / width) % height) as u32;
    let c = (pos / (width * height)) % channels;
    let n = pos / (width * height * channels);
    (n, c, row, col)
}

/// The range of window rows `[first, end)` whose window covers input row `i` (with
/// `extent` windows in all): `row·stride − pad ≤ i ≤ row·stride − pad + size − 1`.
#[cube]
pub fn covering_windows(i: u32, size: u32, stride: u32, pad: u32, extent: u32) -> (u32, u32) {
    let shifted = i + pad;
    let mut first = 0u32;
    if shifted + 1 > size {
        first = (shifted + 1 - size).div_ceil(stride);
    }
    let mut end = shifted / stride + 1;
    if end > extent {
        end = extent;
    }
    (first, end)
}

/// Marks a fused conv·ReLU·pool output whose maximum was not positive: ReLU zeroed it, so
/// no gradient flows back through it. Window offsets are below this value (windows hold at
/// most 255 positions), so it fits the `u8` argmax.
pub const NO_ARGMAX: u32 = 255;

/// The conv-output position that gradient element `(row, col)` of map `grad` flows to.
///
/// Without `argmax`, `grad` is the conv output's own gradient and the position is
/// `(row, col)`. With it, `grad` is a pooled gradient and the position is the argmax of
/// window `(row, col)`; `valid` is false where the argmax is [`NO_ARGMAX`].
#[cube]
#[allow(clippy::let_and_return)] // `#[comptime]` needs the match bound by a `let`
pub fn routed_position<A: Int>(
    argmax: &ComptimeOption<Tensor<A>>,
    index: usize,
    row: u32,
    col: u32,
    #[comptime] pool: Window,
) -> (bool, u32, u32) {
    #[comptime]
    let routed = match &argmax {
        ComptimeOption::Some(argmax) => {
            let offset = u32::cast_from(argmax[index]);
            let kh = offset / pool.size_w;
            let kw = offset % pool.size_w;
            // In-window offsets point inside the conv output by construction.
            let oh = row * pool.stride_h + kh - pool.pad_h;
            let ow = col * pool.stride_w + kw - pool.pad_w;
            (offset != NO_ARGMAX, oh, ow)
        }
        ComptimeOption::None => (true, row, col),
    };
    routed
}

/// Σ of the pooled gradient over the windows covering position `(row, col)` of plane
/// `plane` (= n·C + c) whose argmax is that position: the max-pool backward, as a gather.
#[cube]
pub fn gather_from_windows<F: Float, A: Int>(
    grad: &Tensor<F>,
    argmax: &Tensor<A>,
    plane: usize,
    row: u32,
    col: u32,
    #[comptime] pool: Window,
) -> F {
    let grad_h = grad.shape(2) as u32;
    let grad_w = grad.shape(3) as u32;
    let plane_base = plane * (grad_h * grad_w) as usize;
    let (ph_first, ph_end) = covering_windows(row, pool.size_h, pool.stride_h, pool.pad_h, grad_h);
    let (pw_first, pw_end) = covering_windows(col, pool.size_w, pool.stride_w, pool.pad_w, grad_w);
    let mut sum = F::new(0.0);
    for ph in ph_first..ph_end {
        let kh = row + pool.pad_h - ph * pool.stride_h;
        for pw in pw_first..pw_end {
            let kw = col + pool.pad_w - pw * pool.stride_w;
            let o = plane_base + (ph * grad_w + pw) as usize;
            if u32::cast_from(argmax[o]) == kh * pool.size_w + kw {
                sum += grad[o];
            }
        }
    }
    sum
}
