//! The geometry kernels work in: windows baked in at compile time (one compiled kernel per
//! geometry, so the window loops unroll), and an operand's sizes and strides passed at run
//! time.

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

/// A 4-D (NCHW) operand's sizes and strides, passed to a kernel as scalars beside the
/// operand itself, an `Array`: scalars travel in the launch's own parameters, where a
/// `Tensor`'s shape and strides would be uploaded before the launch (see `cube::launch`).
#[derive(CubeType, CubeLaunch, Clone, Copy)]
pub struct Nchw {
    pub batch: usize,
    pub channels: usize,
    pub rows: u32,
    pub cols: u32,
    pub image_stride: usize,
    pub channel_stride: usize,
    /// Rows are of unit stride inside (the kernels read a row's columns as neighbours).
    pub row_stride: usize,
}

/// Splits the linear index `pos` of a contiguous NCHW operand of sizes `map` into
/// (n, c, row, col).
#[cube]
pub fn nchw_position(pos: usize, map: &Nchw) -> (usize, usize, u32, u32) {
    let width = map.cols as usize;
    let height = map.rows as usize;
    let col = (pos % width) as u32;
    let row = ((pos / width) % height) as u32;
    let c = (pos / (width * height)) % map.channels;
    let n = pos / (width * height * map.channels);
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
    argmax: &ComptimeOption<Array<A>>,
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

/// Σ of the pooled gradient (`grad_h` × `grad_w` a plane) over the windows covering
/// position `(row, col)` of plane `plane` (= n·C + c) whose argmax is that position: the
/// max-pool backward, as a gather.
#[cube]
#[allow(clippy::too_many_arguments)]
pub fn gather_from_windows<F: Float, A: Int>(
    grad: &Array<F>,
    argmax: &Array<A>,
    grad_h: u32,
    grad_w: u32,
    plane: usize,
    row: u32,
    col: u32,
    #[comptime] pool: Window,
) -> F {
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
