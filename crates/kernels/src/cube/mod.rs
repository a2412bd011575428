//! [`KernelBackend`] for the CubeCL backend, on any runtime (CUDA, wgpu): one file per op
//! family, mirroring [`crate::kernels`], each holding its launches and their tuning
//! constants; shared here are allocation ([`alloc`]), launch geometry ([`grid`]), input
//! layouts ([`layout`]) and the launch itself ([`launch`], which says why kernels launch
//! unchecked). The trait impl below only delegates.

mod alloc;
mod conv;
mod dense;
mod fused;
mod grid;
mod launch;
mod layout;
mod loss;
mod pack;
mod pool;
mod read;
mod update;

use burn::tensor::Shape;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};

use crate::{
    AdamMoments, AdamStep, ConvOptions2d, DenseActivation, GradsWanted, InputCopy, KernelBackend,
    LayerGrads, MomentumStep, PendingRead, PoolOptions2d, Precision,
};

impl<R, F, I, BT> KernelBackend for CubeBackend<R, F, I, BT>
where
    R: CubeRuntime,
    F: FloatElement,
    I: IntElement,
    BT: BoolElement,
{
    fn conv_precision(precision: Precision, device: &R::Device) -> Precision {
        conv::gemm::tensor_core_operands(precision, F::dtype(), &R::client(device))
            .unwrap_or(Precision::Fp32)
    }

    fn conv(
        x: CubeTensor<R>,
        weight: CubeTensor<R>,
        bias: Option<CubeTensor<R>>,
        options: ConvOptions2d,
    ) -> (CubeTensor<R>, InputCopy<Self>) {
        conv::forward::<R, F>(x, weight, bias, options)
    }

    fn conv_backward(
        x: CubeTensor<R>,
        input_copy: InputCopy<Self>,
        weight: CubeTensor<R>,
        grad: CubeTensor<R>,
        options: ConvOptions2d,
        wants: GradsWanted,
    ) -> LayerGrads<CubeTensor<R>> {
        conv::backward::<R, F>(x, input_copy, weight, grad, options, wants)
    }

    fn max_pool_with_argmax(
        x: CubeTensor<R>,
        pool: PoolOptions2d,
    ) -> (CubeTensor<R>, CubeTensor<R>) {
        pool::forward::<R, F>(x, pool)
    }

    fn max_pool_backward(
        x: CubeTensor<R>,
        grad: CubeTensor<R>,
        argmax: CubeTensor<R>,
        pool: PoolOptions2d,
    ) -> CubeTensor<R> {
        pool::backward::<R, F>(x, grad, argmax, pool)
    }

    fn conv_relu_pool(
        x: CubeTensor<R>,
        weight: CubeTensor<R>,
        bias: Option<CubeTensor<R>>,
        conv: ConvOptions2d,
        pool: PoolOptions2d,
    ) -> (CubeTensor<R>, CubeTensor<R>, InputCopy<Self>) {
        fused::forward::<R, F>(x, weight, bias, conv, pool)
    }

    fn conv_relu_pool_backward(
        x: CubeTensor<R>,
        input_copy: InputCopy<Self>,
        weight: CubeTensor<R>,
        grad: CubeTensor<R>,
        argmax: CubeTensor<R>,
        conv: ConvOptions2d,
        pool: PoolOptions2d,
        wants: GradsWanted,
    ) -> LayerGrads<CubeTensor<R>> {
        fused::backward::<R, F>(x, input_copy, weight, grad, argmax, conv, pool, wants)
    }

    fn dense(
        x: CubeTensor<R>,
        weight: CubeTensor<R>,
        bias: Option<CubeTensor<R>>,
        activation: DenseActivation,
    ) -> CubeTensor<R> {
        dense::forward::<R, F>(x, weight, bias, activation)
    }

    fn dense_backward(
        x: CubeTensor<R>,
        weight: CubeTensor<R>,
        grad: CubeTensor<R>,
        relu_output: Option<CubeTensor<R>>,
        wants: GradsWanted,
    ) -> LayerGrads<CubeTensor<R>> {
        dense::backward::<R, F>(x, weight, grad, relu_output, wants)
    }

    fn cross_entropy(logits: CubeTensor<R>, targets: CubeTensor<R>) -> CubeTensor<R> {
        loss::forward::<R, F, I>(logits, targets)
    }

    fn cross_entropy_backward(
        logits: CubeTensor<R>,
        targets: CubeTensor<R>,
        grad: CubeTensor<R>,
    ) -> CubeTensor<R> {
        loss::backward::<R, F, I>(logits, targets, grad)
    }

    fn sgd_update(
        params: Vec<CubeTensor<R>>,
        grads: Vec<CubeTensor<R>>,
        lr: f64,
        weight_decay: f64,
    ) -> Vec<CubeTensor<R>> {
        update::sgd::<R, F>(params, grads, lr, weight_decay)
    }

    fn sgd_momentum_update(
        params: Vec<CubeTensor<R>>,
        grads: Vec<CubeTensor<R>>,
        velocities: Vec<CubeTensor<R>>,
        step: MomentumStep,
    ) -> (Vec<CubeTensor<R>>, Vec<CubeTensor<R>>) {
        update::sgd_momentum::<R, F>(params, grads, velocities, step)
    }

    fn adam_update(
        params: Vec<CubeTensor<R>>,
        grads: Vec<CubeTensor<R>>,
        moments: AdamMoments<CubeTensor<R>>,
        step: AdamStep,
    ) -> (Vec<CubeTensor<R>>, AdamMoments<CubeTensor<R>>) {
        update::adam::<R, F>(params, grads, moments, step)
    }

    fn pack(tensors: Vec<CubeTensor<R>>) -> CubeTensor<R> {
        pack::pack::<R, F>(tensors)
    }

    fn unpack(packed: CubeTensor<R>, shapes: Vec<Shape>) -> Vec<CubeTensor<R>> {
        pack::unpack(packed, shapes)
    }

    fn read_early(floats: Vec<CubeTensor<R>>, ints: Vec<CubeTensor<R>>) -> PendingRead {
        read::read_early(floats.into_iter().chain(ints).collect())
    }
}
