//! The dense layer on the CPU: its three products as `gemm` calls that read the operands
//! through strides (no transposed copies), bias, ReLU and the ReLU mask in one pass over
//! the output rows.

use burn::backend::ndarray::NdArrayTensor;
use rayon::prelude::*;

use super::matmul::{Operand, Write, matmul_into, parallelism};
use super::tensor::{dims, output, tensor, values};
use crate::{DenseActivation, GradsWanted, LayerGrads};

/// `lhs [m, k] · rhs [k, n]` as a new row-major `[m, n]` matrix, on all threads when large.
fn matmul(lhs: Operand, rhs: Operand, [m, k, n]: [usize; 3]) -> Vec<f32> {
    let mut out = output(m * n);
    matmul_into(
        &mut out,
        lhs,
        rhs,
        [m, k, n],
        Write::Overwrite,
        parallelism(m * n * k),
    );
    out
}

/// `activation(x · weightᵀ + bias)` for `x` `[M, K]` and `weight` `[N, K]`.
pub(super) fn forward(
    x: &NdArrayTensor,
    weight: &NdArrayTensor,
    bias: Option<&NdArrayTensor>,
    activation: DenseActivation,
) -> NdArrayTensor {
    let ([m, k], [n, _]) = (matrix(x), matrix(weight));
    let (x, weight) = (values(x), values(weight));
    let mut y = matmul(
        Operand::rows(&x, k),
        Operand::rows(&weight, k).t(),
        [m, k, n],
    );
    let bias = bias.map(values);
    if n > 0 {
        y.par_chunks_mut(n).for_each(|row| {
            if let Some(bias) = &bias {
                row.iter_mut().zip(bias.iter()).for_each(|(v, b)| *v += b);
            }
            if activation == DenseActivation::Relu {
                row.iter_mut().for_each(|v| *v = v.max(0.0));
            }
        });
    }
    tensor(y, &[m, n])
}

/// The gradients of [`forward`] from the output's gradient `grad` `[M, N]`; with
/// `relu_output`, only where that output is positive.
pub(super) fn backward(
    x: &NdArrayTensor,
    weight: &NdArrayTensor,
    grad: &NdArrayTensor,
    relu_output: Option<&NdArrayTensor>,
    wants: GradsWanted,
) -> LayerGrads<NdArrayTensor> {
    let ([m, k], [n, _]) = (matrix(x), matrix(weight));
    // Borrowed as it is; copied only to mask it.
    let mut g = values(grad);
    if let Some(y) = relu_output {
        g.to_mut()
            .iter_mut()
            .zip(values(y).iter())
            .filter(|(_, y)| **y <= 0.0)
            .for_each(|(g, _)| *g = 0.0);
    }
    let g_rows = Operand::rows(&g, n);
    let x_grad = wants.x.then(|| {
        let dx = matmul(g_rows, Operand::rows(&values(weight), k), [m, n, k]);
        tensor(dx, &[m, k])
    });
    let weight_grad = matmul(g_rows.t(), Operand::rows(&values(x), k), [n, m, k]);
    let bias = wants.bias.then(|| {
        let mut sums = vec![0f32; n];
        for row in g.chunks(n.max(1)) {
            sums.iter_mut().zip(row).for_each(|(s, v)| *s += v);
        }
        tensor(sums, &[n])
    });
    LayerGrads {
        x: x_grad,
        weight: tensor(weight_grad, &[n, k]),
        bias,
    }
}

/// The two dims of a matrix operand.
fn matrix(tensor: &NdArrayTensor) -> [usize; 2] {
    match dims(tensor)[..] {
        [rows, cols] => [rows, cols],
        ref other => panic!("a dense operand is a matrix, got dims {other:?}"),
    }
}
