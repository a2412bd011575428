//! max-pool(ReLU(conv(x) + bias)) on the CPU: each thread convolves one image into its own
//! buffer and pools it from there, so the full-resolution conv output never exists for the
//! batch; the backward pass scatters the pooled gradient into the same per-image buffer and
//! hands it to the convolution's backward.

use burn::backend::ndarray::NdArrayTensor;
use rayon::prelude::*;

use super::conv::{self, ConvGeometry};
use super::pool::PoolPlane;
use super::tensor::{indices, output, tensor, values};
use crate::{ConvOptions2d, GradsWanted, LayerGrads, PoolOptions2d};

/// The pooled map and its argmax ([`crate::NO_ARGMAX`] where ReLU zeroed the window).
pub(super) fn forward(
    x: &NdArrayTensor,
    weight: &NdArrayTensor,
    bias: Option<&NdArrayTensor>,
    conv_options: ConvOptions2d,
    pool: PoolOptions2d,
) -> (NdArrayTensor, NdArrayTensor) {
    let geometry = ConvGeometry::new(x, weight, conv_options);
    let plane = PoolPlane::new(geometry.output, pool);
    let (x, weight) = (values(x), values(weight));
    let bias = bias.map(values);
    let image_len = geometry.c_out * plane.output_len();
    let mut pooled = output(geometry.batch * image_len);
    let mut argmax = output(geometry.batch * image_len);
    if !pooled.is_empty() {
        pooled
            .par_chunks_mut(image_len)
            .zip(argmax.par_chunks_mut(image_len))
            .enumerate()
            .for_each_init(
                || {
                    (
                        geometry.patch_buffer(),
                        vec![0.0; geometry.output_image_len()],
                    )
                },
                |(patches, conv), (index, (pooled, argmax))| {
                    geometry.image_forward(&x, index, &weight, patches, conv);
                    let channels = conv
                        .chunks_exact(plane.input_len())
                        .zip(pooled.chunks_exact_mut(plane.output_len()))
                        .zip(argmax.chunks_exact_mut(plane.output_len()))
                        .enumerate();
                    for (channel, ((conv, pooled), argmax)) in channels {
                        let shift = bias.as_ref().map_or(0.0, |b| b[channel]);
                        plane.pool(conv, shift, 0.0, pooled, argmax);
                    }
                },
            );
    }
    let shape = [
        geometry.batch,
        geometry.c_out,
        plane.output[0],
        plane.output[1],
    ];
    (tensor(pooled, &shape), tensor(argmax, &shape))
}

/// The gradients of [`forward`] from the pooled gradient `grad` and the argmax.
pub(super) fn backward(
    x: &NdArrayTensor,
    weight: &NdArrayTensor,
    grad: &NdArrayTensor,
    argmax: &NdArrayTensor,
    conv_options: ConvOptions2d,
    pool: PoolOptions2d,
    wants: GradsWanted,
) -> LayerGrads<NdArrayTensor> {
    let geometry = ConvGeometry::new(x, weight, conv_options);
    let plane = PoolPlane::new(geometry.output, pool);
    let (grad, argmax) = (values(grad), indices(argmax));
    let image_len = geometry.c_out * plane.output_len();
    conv::backward(geometry, x, weight, wants, |index, conv_grad| {
        let channels = conv_grad
            .chunks_exact_mut(plane.input_len())
            .zip(grad[index * image_len..][..image_len].chunks_exact(plane.output_len()))
            .zip(argmax[index * image_len..][..image_len].chunks_exact(plane.output_len()));
        for ((conv_grad, grad), argmax) in channels {
            plane.scatter(grad, argmax, conv_grad);
        }
    })
}
