//! Convolution on the CPU as one matrix product per image: the image's patches unrolled
//! into columns (im2col) times the filters, so the arithmetic runs in `gemm`'s vectorized,
//! cache-blocked kernels. Images are independent, so rayon spreads them over the threads,
//! each with its own patch buffer, and every product inside runs on one thread; the
//! backward pass sums the batch's weight gradient in fixed groups of images, added in order.

use std::ops::Range;

use burn::backend::ndarray::NdArrayTensor;
use gemm::Parallelism;
use rayon::prelude::*;

use super::matmul::{Operand, Write, matmul_into};
use super::tensor::{dims, output, tensor, values};
use crate::{ConvOptions2d, GradsWanted, LayerGrads};

/// The sizes of one convolution: a batch of `[c_in, h, w]` images, `[c_out, c_in, kh, kw]`
/// filters, and the `[c_out, oh, ow]` output per image.
#[derive(Debug, Clone, Copy)]
pub(super) struct ConvGeometry {
    pub batch: usize,
    pub c_in: usize,
    pub input: [usize; 2],
    pub c_out: usize,
    pub kernel: [usize; 2],
    pub options: ConvOptions2d,
    pub output: [usize; 2],
}

impl ConvGeometry {
    /// The geometry of convolving `x` `[N, C_in, H, W]` with `weight` `[C_out, C_in, KH, KW]`.
    pub fn new(x: &NdArrayTensor, weight: &NdArrayTensor, options: ConvOptions2d) -> Self {
        let (&[batch, c_in, h, w], &[c_out, weight_c_in, kh, kw]) =
            (&dims(x)[..], &dims(weight)[..])
        else {
            panic!("a convolution takes 4-D input and filters")
        };
        assert_eq!(c_in, weight_c_in, "input channels differ from the filters'");
        Self {
            batch,
            c_in,
            input: [h, w],
            c_out,
            kernel: [kh, kw],
            options,
            output: options.output_size([h, w], [kh, kw]),
        }
    }

    /// Values in one patch (a column of the unrolled image, a row of a filter).
    fn patch_len(&self) -> usize {
        self.c_in * self.kernel[0] * self.kernel[1]
    }

    /// Output positions per channel (columns of the unrolled image).
    pub fn positions(&self) -> usize {
        self.output[0] * self.output[1]
    }

    pub fn image_len(&self) -> usize {
        self.c_in * self.input[0] * self.input[1]
    }

    pub fn output_image_len(&self) -> usize {
        self.c_out * self.positions()
    }

    /// The buffer [`Self::image_forward`] unrolls an image into.
    pub fn patch_buffer(&self) -> Vec<f32> {
        vec![0.0; self.patch_len() * self.positions()]
    }

    /// For one row of the unrolled image (channel, kernel row, kernel column) and one
    /// output row `oy`: the input row it reads (as a row index into the `[c_in·h, w]`
    /// image), or `None` where that falls in the padding, and the [`Columns`] it reads.
    fn source_row(&self, row: usize, oy: usize) -> Option<(usize, Columns)> {
        let [kh, kw] = self.kernel;
        let [h, w] = self.input;
        let (ki, kj) = ((row / kw) % kh, row % kw);
        let iy = (oy * self.options.stride[0] + ki)
            .checked_sub(self.options.padding[0])
            .filter(|&iy| iy < h)?;
        let columns = Columns::new(
            kj,
            self.options.stride[1],
            self.options.padding[1],
            w,
            self.output[1],
        );
        Some(((row / (kh * kw)) * h + iy, columns))
    }

    /// Unrolls `image` `[c_in, h, w]` into `patches` `[c_in·kh·kw, oh·ow]`: column `p`
    /// holds the input values output position `p` sees, zeros where it overlaps padding.
    fn unroll(&self, image: &[f32], patches: &mut [f32]) {
        let [_, w] = self.input;
        let ow = self.output[1];
        for (row, patch_row) in patches.chunks_exact_mut(self.positions()).enumerate() {
            for (oy, out) in patch_row.chunks_exact_mut(ow).enumerate() {
                let Some((input_row, columns)) = self.source_row(row, oy) else {
                    out.fill(0.0);
                    continue;
                };
                let input = &image[input_row * w..][..w];
                let (before, rest) = out.split_at_mut(columns.outputs.start);
                let (inside, after) = rest.split_at_mut(columns.outputs.len());
                before.fill(0.0);
                after.fill(0.0);
                let first = columns.first_input;
                if columns.stride == 1 {
                    inside.copy_from_slice(&input[first..][..inside.len()]);
                } else {
                    let sources = input[first..].iter().step_by(columns.stride);
                    inside.iter_mut().zip(sources).for_each(|(v, x)| *v = *x);
                }
            }
        }
    }

    /// The transpose of [`Self::unroll`]: sums each column of `patches` back into the
    /// input positions it came from, overwriting `image`.
    fn fold_back(&self, patches: &[f32], image: &mut [f32]) {
        let [_, w] = self.input;
        let ow = self.output[1];
        image.fill(0.0);
        for (row, patch_row) in patches.chunks_exact(self.positions()).enumerate() {
            for (oy, values) in patch_row.chunks_exact(ow).enumerate() {
                let Some((input_row, columns)) = self.source_row(row, oy) else {
                    continue;
                };
                let input = &mut image[input_row * w..][..w];
                let targets = input[columns.first_input..]
                    .iter_mut()
                    .step_by(columns.stride);
                for (x, v) in targets.zip(&values[columns.outputs.clone()]) {
                    *x += v;
                }
            }
        }
    }

    /// Image `index` of the batch `x` convolved with `weight`, without bias, into `out`
    /// `[c_out, oh·ow]`.
    pub fn image_forward(
        &self,
        x: &[f32],
        index: usize,
        weight: &[f32],
        patches: &mut [f32],
        out: &mut [f32],
    ) {
        let image = &x[index * self.image_len()..][..self.image_len()];
        self.unroll(image, patches);
        matmul_into(
            out,
            Operand::rows(weight, self.patch_len()),
            Operand::rows(patches, self.positions()),
            [self.c_out, self.patch_len(), self.positions()],
            Write::Overwrite,
            Parallelism::None,
        );
    }
}

/// Which output columns of one kernel column `kj` read inside an input row (the rest read
/// padding), and the input column the first of them reads; consecutive outputs read
/// `stride` apart.
#[derive(Debug, Clone)]
struct Columns {
    outputs: Range<usize>,
    first_input: usize,
    stride: usize,
}

impl Columns {
    /// Output column `ox` reads input column `ox·stride + kj − pad`, inside when in `0..w`.
    fn new(kj: usize, stride: usize, pad: usize, w: usize, ow: usize) -> Self {
        let start = pad.saturating_sub(kj).div_ceil(stride).min(ow);
        let end = (w + pad)
            .saturating_sub(kj)
            .div_ceil(stride)
            .clamp(start, ow);
        // With no output inside, the first input is never read.
        let first_input = if start < end {
            start * stride + kj - pad
        } else {
            0
        };
        Self {
            outputs: start..end,
            first_input,
            stride,
        }
    }
}

/// conv(x, weight) + bias.
pub(super) fn forward(
    x: &NdArrayTensor,
    weight: &NdArrayTensor,
    bias: Option<&NdArrayTensor>,
    options: ConvOptions2d,
) -> NdArrayTensor {
    let geometry = ConvGeometry::new(x, weight, options);
    let (x, weight, bias) = (values(x), values(weight), bias.map(values));
    let mut y = output(geometry.batch * geometry.output_image_len());
    if !y.is_empty() {
        y.par_chunks_mut(geometry.output_image_len())
            .enumerate()
            .for_each_init(
                || geometry.patch_buffer(),
                |patches, (index, out)| {
                    geometry.image_forward(&x, index, &weight, patches, out);
                    if let Some(bias) = &bias {
                        for (channel, b) in
                            out.chunks_exact_mut(geometry.positions()).zip(bias.iter())
                        {
                            channel.iter_mut().for_each(|v| *v += b);
                        }
                    }
                },
            );
    }
    let [oh, ow] = geometry.output;
    tensor(y, &[geometry.batch, geometry.c_out, oh, ow])
}

/// The gradients of a convolution whose output gradient for image `i` is what
/// `output_grad(i, buffer)` writes into its `[c_out, oh·ow]` buffer: the plain conv's is
/// a copy of its slice, the fused conv·ReLU·pool's is scattered from the pooled gradient.
/// Per image: dW += G · patchesᵀ, db += Σ G, and dx = fold(Wᵀ · G).
pub(super) fn backward(
    geometry: ConvGeometry,
    x: &NdArrayTensor,
    weight: &NdArrayTensor,
    wants: GradsWanted,
    output_grad: impl Fn(usize, &mut [f32]) + Sync,
) -> LayerGrads<NdArrayTensor> {
    let (x, weight) = (values(x), values(weight));
    let (k, p, image_len) = (
        geometry.patch_len(),
        geometry.positions(),
        geometry.image_len(),
    );
    let mut x_grad = wants.x.then(|| output(geometry.batch * image_len));
    let mut images: Vec<Option<&mut [f32]>> = match x_grad.as_mut() {
        Some(dx) => dx.chunks_mut(image_len.max(1)).map(Some).collect(),
        None => (0..geometry.batch).map(|_| None).collect(),
    };
    let per_group = images_per_group(geometry.batch);
    let partials: Vec<BackwardBuffers> = images
        .par_chunks_mut(per_group)
        .enumerate()
        .map(|(group, image_grads)| {
            let mut buffers = BackwardBuffers::new(&geometry);
            for (offset, image_grad) in image_grads.iter_mut().enumerate() {
                let index = group * per_group + offset;
                let image = &x[index * image_len..][..image_len];
                geometry.unroll(image, &mut buffers.patches);
                output_grad(index, &mut buffers.output_grad);
                let g = Operand::rows(&buffers.output_grad, p);
                matmul_into(
                    &mut buffers.weight_grad,
                    g,
                    Operand::rows(&buffers.patches, p).t(),
                    [geometry.c_out, p, k],
                    Write::Accumulate,
                    Parallelism::None,
                );
                for (sum, channel) in buffers
                    .bias_grad
                    .iter_mut()
                    .zip(buffers.output_grad.chunks_exact(p))
                {
                    *sum += lane_sum(channel);
                }
                if let Some(image_grad) = image_grad {
                    // The patch buffer is free again: it takes Wᵀ · G.
                    matmul_into(
                        &mut buffers.patches,
                        Operand::rows(&weight, k).t(),
                        g,
                        [k, geometry.c_out, p],
                        Write::Overwrite,
                        Parallelism::None,
                    );
                    geometry.fold_back(&buffers.patches, image_grad);
                }
            }
            buffers
        })
        .collect();
    // In group order, whichever thread finished first.
    let sums = partials
        .into_iter()
        .reduce(BackwardBuffers::add)
        .unwrap_or_else(|| BackwardBuffers::new(&geometry));
    let (c_out, [kh, kw]) = (geometry.c_out, geometry.kernel);
    LayerGrads {
        x: x_grad.map(|dx| {
            let [h, w] = geometry.input;
            tensor(dx, &[geometry.batch, geometry.c_in, h, w])
        }),
        weight: tensor(sums.weight_grad, &[c_out, geometry.c_in, kh, kw]),
        bias: wants.bias.then(|| tensor(sums.bias_grad, &[c_out])),
    }
}

/// The sum of `values` in eight running lanes, which the compiler turns into vector adds;
/// one running sum would wait out each add's latency in turn.
fn lane_sum(values: &[f32]) -> f32 {
    let chunks = values.chunks_exact(8);
    let tail: f32 = chunks.remainder().iter().sum();
    let mut lanes = [0.0f32; 8];
    for chunk in chunks {
        for (lane, v) in lanes.iter_mut().zip(chunk) {
            *lane += v;
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// Groups of images per thread in [`backward`]: enough for work stealing to even out the
/// threads, few enough that the per-group buffers and their sum stay cheap.
const GROUPS_PER_THREAD: usize = 4;

/// The images of each group [`backward`] sums on its own. The groups depend only on the
/// batch and the thread count, never on which thread ran what, so the weight and bias
/// gradients are added in the same order on every run.
fn images_per_group(batch: usize) -> usize {
    batch
        .div_ceil(GROUPS_PER_THREAD * rayon::current_num_threads())
        .max(1)
}

/// One group's buffers in [`backward`]: its patch and output-gradient buffers and its
/// partial sums of the weight and bias gradients.
struct BackwardBuffers {
    patches: Vec<f32>,
    output_grad: Vec<f32>,
    weight_grad: Vec<f32>,
    bias_grad: Vec<f32>,
}

impl BackwardBuffers {
    fn new(geometry: &ConvGeometry) -> Self {
        Self {
            patches: geometry.patch_buffer(),
            output_grad: vec![0.0; geometry.output_image_len()],
            weight_grad: vec![0.0; geometry.c_out * geometry.patch_len()],
            bias_grad: vec![0.0; geometry.c_out],
        }
    }

    /// Both groups' partial sums in one.
    fn add(mut self, other: Self) -> Self {
        let pairs = self.weight_grad.iter_mut().zip(&other.weight_grad);
        pairs
            .chain(self.bias_grad.iter_mut().zip(&other.bias_grad))
            .for_each(|(a, b)| *a += b);
        self
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};

    use super::*;

    /// Seeded values in [−1, 1).
    fn random(rng: &mut StdRng, len: usize) -> Vec<f32> {
        (0..len).map(|_| rng.random_range(-1.0..1.0)).collect()
    }

    /// A batch's weight and bias gradients come out the same to the bit on every run: a pool
    /// of more threads than cores lets work stealing hand the images to other threads on
    /// every call.
    #[test]
    fn backward_adds_a_batch_in_the_same_order_on_every_run() {
        let mut rng = StdRng::seed_from_u64(11);
        let [batch, c_in, side, c_out] = [96, 3, 12, 8];
        let x = tensor(
            random(&mut rng, batch * c_in * side * side),
            &[batch, c_in, side, side],
        );
        let weight = tensor(random(&mut rng, c_out * c_in * 9), &[c_out, c_in, 3, 3]);
        let options = ConvOptions2d::new([1, 1], [1, 1]);
        let geometry = ConvGeometry::new(&x, &weight, options);
        let image_len = geometry.output_image_len();
        let grad = random(&mut rng, batch * image_len);
        let wants = GradsWanted {
            x: true,
            bias: true,
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(8)
            .build()
            .unwrap();
        let sums = || {
            let grads = pool.install(|| {
                backward(geometry, &x, &weight, wants, |index, image_grad| {
                    image_grad.copy_from_slice(&grad[index * image_len..][..image_len]);
                })
            });
            let bias = grads.bias.expect("the bias gradient was asked for");
            [grads.weight, bias].map(|t| values(&t).iter().map(|v| v.to_bits()).collect::<Vec<_>>())
        };
        let first = sums();
        for run in 1..40 {
            assert!(
                sums() == first,
                "run {run} added the batch in another order"
            );
        }
    }
}
