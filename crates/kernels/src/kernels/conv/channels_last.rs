//! The operands of [`super::gemm_channels_last`], written once per launch: a map padded and
//! stored channels-last in bf16, and the filters as runs of their depth in the same order.
//!
//! Why: the implicit GEMM's depth is (tap, channel) and its rows are conv positions. With
//! the map stored [image][row][column][channel], one position's channels at one tap are
//! adjacent, so a 16-byte load brings eight depths of a row; with the padding written as
//! zeros around it (and past the last quad a row or column needs), no load needs a bounds
//! check. Gathered from the NCHW map, each of those values is its own 4-byte load behind
//! four compares, and the gathers' index arithmetic, more than the products, sets how many
//! instructions the bf16 forward issues (`docs/perf-log/2026-11-29-bf16-channels-last.md`).
//! These copies move each value once; the GEMM reads each up to taps times.

use cubecl::prelude::*;

use crate::kernels::geometry::{Nchw, Window};

/// Bytes of one load: a run of the operands' depth.
pub const RUN_BYTES: usize = 16;
/// Values of one run in bf16 and in TF32 (fp32 values): the operands are stored in runs of
/// this many depths.
pub const BF16_RUN: u32 = 8;
pub const TF32_RUN: u32 = 4;

/// A channels-last map's sizes: images, padded rows and columns, and runs of
/// `vector_size` channels per position.
#[derive(CubeType, CubeLaunch, Clone, Copy)]
pub struct ChannelsLast {
    pub batch: usize,
    pub rows: u32,
    pub cols: u32,
    pub channel_runs: u32,
}

/// `out` = `src` (an NCHW map of sizes and strides `src_map`) as [image][row][column]
/// [channel] runs of `S`, shifted by (`pad_h`, `pad_w`) into the `padded` sizes: zeros where
/// no value of `src` lies. One unit per run, adjacent units at adjacent columns, so that
/// each channel's loads coalesce along a row of `src`.
#[cube(launch_unchecked)]
pub fn padded_channels_last<F: Float, S: Float, V: Size>(
    src: &Array<F>,
    out: &mut Array<Vector<S, V>>,
    src_map: Nchw,
    padded: ChannelsLast,
    pad_h: u32,
    pad_w: u32,
) {
    let (n, row, col, run) = run_position(ABSOLUTE_POS, &padded);
    if n < padded.batch {
        let mut values = Vector::<S, V>::new(S::new(0.0));
        if row >= pad_h && row < src_map.rows + pad_h && col >= pad_w && col < src_map.cols + pad_w
        {
            let width = out.vector_size();
            let at = n * src_map.image_stride
                + run * width * src_map.channel_stride
                + (row - pad_h) as usize * src_map.row_stride
                + (col - pad_w) as usize;
            #[unroll]
            for c in 0..width {
                values[c] = S::cast_from(src[at + c * src_map.channel_stride]);
            }
        }
        out[run_index(n, row, col, run, &padded)] = values;
    }
}

/// `out` as [`padded_channels_last`] writes it, of the conv output's gradient routed back
/// from a 2×2 stride-2 unpadded max-pool's: `grad` the pooled gradient (sizes and strides
/// `pooled`, which `argmax` shares), and at conv position (r, c) its value where the
/// window's `argmax` is that position, zeros elsewhere — the pool's backward and the copy in
/// one pass, without writing the routed gradient in fp32 first.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn routed_channels_last<F: Float, S: Float, V: Size, A: Int>(
    grad: &Array<F>,
    argmax: &Array<A>,
    out: &mut Array<Vector<S, V>>,
    pooled: Nchw,
    padded: ChannelsLast,
    pad_h: u32,
    pad_w: u32,
    #[define(A)] _argmax_type: StorageType,
) {
    let (n, row, col, run) = run_position(ABSOLUTE_POS, &padded);
    if n < padded.batch {
        let mut values = Vector::<S, V>::new(S::new(0.0));
        if row >= pad_h
            && row < 2 * pooled.rows + pad_h
            && col >= pad_w
            && col < 2 * pooled.cols + pad_w
        {
            let (r, c) = (row - pad_h, col - pad_w);
            let width = out.vector_size();
            let at = n * pooled.image_stride
                + run * width * pooled.channel_stride
                + (r / 2) as usize * pooled.row_stride
                + (c / 2) as usize;
            let offset = (r % 2) * 2 + c % 2;
            #[unroll]
            for j in 0..width {
                let window = at + j * pooled.channel_stride;
                if u32::cast_from(argmax[window]) == offset {
                    values[j] = S::cast_from(grad[window]);
                }
            }
        }
        out[run_index(n, row, col, run, &padded)] = values;
    }
}

/// Which run of a channels-last map of sizes `map` unit `unit` writes: (image, row,
/// column, run of channels), adjacent units at adjacent columns (see
/// [`padded_channels_last`]).
#[cube]
fn run_position(unit: usize, map: &ChannelsLast) -> (usize, u32, u32, usize) {
    let cols = map.cols as usize;
    let runs = map.channel_runs as usize;
    let image_row = unit / cols / runs;
    (
        image_row / map.rows as usize,
        (image_row % map.rows as usize) as u32,
        (unit % cols) as u32,
        (unit / cols) % runs,
    )
}

/// Where run `run` of position (`row`, `col`) of image `n` lies in a channels-last map of
/// sizes `map`, in runs.
#[cube]
fn run_index(n: usize, row: u32, col: u32, run: usize, map: &ChannelsLast) -> usize {
    ((n * map.rows as usize + row as usize) * map.cols as usize + col as usize)
        * map.channel_runs as usize
        + run
}

/// `out` = the filters as [column][depth] runs of `S`, the depth in the GEMM's order (tap ·
/// channels + channel) and zeros past it and past the last column, for `columns` ×
/// `depth_runs` runs in all. Forward: `weight` is [cols, channels, kh, kw]; transposed (the
/// input gradient): [channels, cols, kh, kw], the tap flipped.
#[cube(launch_unchecked)]
pub fn filters_channels_last<F: Float, S: Float, V: Size>(
    weight: &Array<F>,
    out: &mut Array<Vector<S, V>>,
    cols: usize,
    channels: usize,
    depth_runs: usize,
    columns: usize,
    #[comptime] conv: Window,
    #[comptime] transposed: bool,
) {
    let unit = ABSOLUTE_POS;
    let taps = comptime!((conv.size_h * conv.size_w) as usize);
    let col = unit / depth_runs;
    if col < columns {
        let width = out.vector_size();
        let first = (unit % depth_runs) * width;
        let mut values = Vector::<S, V>::new(S::new(0.0));
        #[unroll]
        for j in 0..width {
            let k = first + j;
            let tap = k / channels;
            let channel = k % channels;
            if col < cols && tap < taps {
                let value = if transposed {
                    weight[(channel * cols + col) * taps + taps - 1 - tap]
                } else {
                    weight[(col * channels + channel) * taps + tap]
                };
                values[j] = S::cast_from(value);
            }
        }
        out[unit] = values;
    }
}
