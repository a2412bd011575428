//! Max-pool with argmax on the CPU, one plane (image × channel) at a time: the plain pool
//! and the pooling half of the fused conv·ReLU·pool share the window scan, and both
//! backward passes share the scatter of a pooled gradient to its argmax.

use std::hint::select_unpredictable;
use std::ops::Range;

use burn::backend::ndarray::NdArrayTensor;
use rayon::prelude::*;

use super::tensor::{dims, indices, output, tensor, values};
use crate::{NO_ARGMAX, PoolOptions2d};

/// A pooled plane's sizes (the `input` map and the `output` the windows make of it) and,
/// per output row and column, the part of its window inside the map, worked out once per
/// op rather than once per output.
#[derive(Debug, Clone)]
pub(super) struct PoolPlane {
    pub input: [usize; 2],
    pub output: [usize; 2],
    kernel_w: usize,
    /// The windows are the map's disjoint 2×2 tiles (stride 2, no padding), the common
    /// case, which gets straight-line code instead of the span loops.
    two_by_two_tiles: bool,
    rows: Vec<WindowSpan>,
    cols: Vec<WindowSpan>,
}

/// Along one axis, the window offsets of one output that fall inside the map, and the
/// input coordinate of the first of them.
#[derive(Debug, Clone)]
struct WindowSpan {
    offsets: Range<usize>,
    first_input: usize,
}

impl WindowSpan {
    /// The spans of the `outputs` windows of size `kernel` sliding by `stride` over an
    /// axis of `size` inputs padded by `pad` on each side.
    fn along(outputs: usize, kernel: usize, stride: usize, pad: usize, size: usize) -> Vec<Self> {
        (0..outputs)
            .map(|o| {
                let corner = o * stride; // in padded coordinates
                let start = pad.saturating_sub(corner);
                let end = (size + pad)
                    .saturating_sub(corner)
                    .clamp(start, kernel.max(start));
                Self {
                    offsets: start..end,
                    first_input: (corner + start).saturating_sub(pad),
                }
            })
            .collect()
    }

    /// The input coordinate of window offset `k` (inside the map).
    fn input(&self, k: usize) -> usize {
        self.first_input + k - self.offsets.start
    }
}

impl PoolPlane {
    pub fn new(input: [usize; 2], pool: PoolOptions2d) -> Self {
        let output = pool.output_size(input);
        let spans = |axis: usize| {
            WindowSpan::along(
                output[axis],
                pool.kernel[axis],
                pool.stride[axis],
                pool.padding[axis],
                input[axis],
            )
        };
        Self {
            input,
            output,
            kernel_w: pool.kernel[1],
            two_by_two_tiles: pool.kernel == [2, 2]
                && pool.stride == [2, 2]
                && pool.padding == [0, 0],
            rows: spans(0),
            cols: spans(1),
        }
    }

    pub fn input_len(&self) -> usize {
        self.input[0] * self.input[1]
    }

    pub fn output_len(&self) -> usize {
        self.output[0] * self.output[1]
    }

    /// Pools `plane + shift` into `pooled`, each output the largest value above `floor`
    /// in its window and `argmax` its first in-window offset ([`NO_ARGMAX`] where no value
    /// exceeds `floor`). With `floor` 0 this is max-pool(ReLU(plane + shift)).
    pub fn pool(
        &self,
        plane: &[f32],
        shift: f32,
        floor: f32,
        pooled: &mut [f32],
        argmax: &mut [i64],
    ) {
        if self.two_by_two_tiles {
            return self.pool_two_by_two(plane, shift, floor, pooled, argmax);
        }
        let w = self.input[1];
        let out_rows = pooled
            .chunks_exact_mut(self.output[1])
            .zip(argmax.chunks_exact_mut(self.output[1]));
        for (row, (pooled, argmax)) in self.rows.iter().zip(out_rows) {
            for (col, (pooled, argmax)) in self
                .cols
                .iter()
                .zip(pooled.iter_mut().zip(argmax.iter_mut()))
            {
                let (mut best, mut best_offset) = (floor, NO_ARGMAX as usize);
                for ki in row.offsets.clone() {
                    let first = row.input(ki) * w + col.first_input;
                    let values = &plane[first..][..col.offsets.len()];
                    for (kj, &v) in col.offsets.clone().zip(values) {
                        // Selects, not a branch: which value wins is data, and a
                        // mispredicted branch per comparison would cost more than the pool.
                        let better = v + shift > best;
                        best = select_unpredictable(better, v + shift, best);
                        best_offset =
                            select_unpredictable(better, ki * self.kernel_w + kj, best_offset);
                    }
                }
                (*pooled, *argmax) = (best, best_offset as i64);
            }
        }
    }

    /// [`Self::pool`] over 2×2 tiles: each output reads its tile's two pairs of values,
    /// offsets 0, 1 (top row) and 2, 3 (bottom row).
    fn pool_two_by_two(
        &self,
        plane: &[f32],
        shift: f32,
        floor: f32,
        pooled: &mut [f32],
        argmax: &mut [i64],
    ) {
        let [w, out_w] = [self.input[1], self.output[1]];
        let out_rows = pooled
            .chunks_exact_mut(out_w)
            .zip(argmax.chunks_exact_mut(out_w));
        for (tile_rows, (pooled, argmax)) in plane.chunks_exact(2 * w).zip(out_rows) {
            let (top, bottom) = tile_rows.split_at(w);
            let tiles = top.chunks_exact(2).zip(bottom.chunks_exact(2));
            for ((pooled, argmax), (top, bottom)) in pooled.iter_mut().zip(argmax).zip(tiles) {
                let (mut best, mut best_offset) = (floor, NO_ARGMAX as i64);
                for (offset, v) in [top[0], top[1], bottom[0], bottom[1]]
                    .into_iter()
                    .enumerate()
                {
                    let better = v + shift > best;
                    best = select_unpredictable(better, v + shift, best);
                    best_offset = select_unpredictable(better, offset as i64, best_offset);
                }
                (*pooled, *argmax) = (best, best_offset);
            }
        }
    }

    /// Adds each pooled gradient to the input position its argmax names (none for
    /// [`NO_ARGMAX`]), into `plane_grad`, which it first zeroes.
    pub fn scatter(&self, grad: &[f32], argmax: &[i64], plane_grad: &mut [f32]) {
        if self.two_by_two_tiles {
            return self.scatter_two_by_two(grad, argmax, plane_grad);
        }
        plane_grad.fill(0.0);
        let w = self.input[1];
        let out_rows = grad
            .chunks_exact(self.output[1])
            .zip(argmax.chunks_exact(self.output[1]));
        for (row, (grad, argmax)) in self.rows.iter().zip(out_rows) {
            for (col, (g, &offset)) in self.cols.iter().zip(grad.iter().zip(argmax)) {
                if offset == NO_ARGMAX as i64 {
                    continue;
                }
                let (ki, kj) = (
                    offset as usize / self.kernel_w,
                    offset as usize % self.kernel_w,
                );
                plane_grad[row.input(ki) * w + col.input(kj)] += g;
            }
        }
    }

    /// [`Self::scatter`] over 2×2 tiles: a pair of rows is zeroed in one pass, then each
    /// tile's gradient is stored at its argmax.
    fn scatter_two_by_two(&self, grad: &[f32], argmax: &[i64], plane_grad: &mut [f32]) {
        let [w, out_w] = [self.input[1], self.output[1]];
        let out_rows = grad.chunks_exact(out_w).zip(argmax.chunks_exact(out_w));
        let (tiled, below) = plane_grad.split_at_mut(2 * w * self.output[0]);
        below.fill(0.0); // an odd map's last row
        for (tile_rows, (grad, argmax)) in tiled.chunks_exact_mut(2 * w).zip(out_rows) {
            tile_rows.fill(0.0);
            for (column, (&g, &offset)) in grad.iter().zip(argmax).enumerate() {
                // The position by arithmetic, not by a branch on which of the four won
                // (data, so mispredicted); a window without one stores a zero at offset 3.
                let k = offset as usize & 3;
                let g = select_unpredictable(offset == NO_ARGMAX as i64, 0.0, g);
                tile_rows[(k >> 1) * w + 2 * column + (k & 1)] = g;
            }
        }
    }
}

/// The dims of `x` `[N, C, H, W]` and the geometry of pooling each of its planes.
fn planes(x: &NdArrayTensor, pool: PoolOptions2d) -> (Vec<usize>, PoolPlane) {
    let x_dims = dims(x);
    let plane = PoolPlane::new([x_dims[2], x_dims[3]], pool);
    (x_dims, plane)
}

/// Max-pool of `x` and the in-window argmax of each output.
pub(super) fn forward(x: &NdArrayTensor, pool: PoolOptions2d) -> (NdArrayTensor, NdArrayTensor) {
    let (x_dims, plane) = planes(x, pool);
    let x = values(x);
    let count = x_dims[0] * x_dims[1];
    let (mut pooled, mut argmax) = (
        output(count * plane.output_len()),
        output(count * plane.output_len()),
    );
    if !pooled.is_empty() {
        pooled
            .par_chunks_mut(plane.output_len())
            .zip(argmax.par_chunks_mut(plane.output_len()))
            .zip(x.par_chunks(plane.input_len()))
            .for_each(|((pooled, argmax), input)| {
                plane.pool(input, 0.0, f32::NEG_INFINITY, pooled, argmax)
            });
    }
    let shape = [x_dims[0], x_dims[1], plane.output[0], plane.output[1]];
    (tensor(pooled, &shape), tensor(argmax, &shape))
}

/// The gradient of the pool's input `x` from the pooled gradient `grad` and the argmax.
pub(super) fn backward(
    x: &NdArrayTensor,
    grad: &NdArrayTensor,
    argmax: &NdArrayTensor,
    pool: PoolOptions2d,
) -> NdArrayTensor {
    let (x_dims, plane) = planes(x, pool);
    let (grad, argmax) = (values(grad), indices(argmax));
    let mut x_grad = output(x_dims.iter().product());
    if !x_grad.is_empty() && plane.output_len() > 0 {
        x_grad
            .par_chunks_mut(plane.input_len())
            .zip(grad.par_chunks(plane.output_len()))
            .zip(argmax.par_chunks(plane.output_len()))
            .for_each(|((plane_grad, grad), argmax)| plane.scatter(grad, argmax, plane_grad));
    }
    tensor(x_grad, &x_dims)
}
