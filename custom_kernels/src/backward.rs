//! [`KernelBackend`] for `Autodiff<B>`: records backward steps that call `B`'s own backward
//! ops, so the CubeCL kernels (or Burn's ops, on other backends) also compute gradients.

use burn::backend::autodiff::Autodiff;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::tensor::ops::{FloatTensor, IntTensor};

use crate::{ConvGrads, ConvOptions2d, GradsWanted, KernelBackend, PoolOptions2d};

/// What a convolution's backward step needs. With `pooling`, the op was the fused
/// conv·ReLU·pool and its gradient is routed through the saved argmax.
#[derive(Debug, Clone)]
struct ConvState<B: KernelBackend> {
    x: FloatTensor<B>,
    weight: FloatTensor<B>,
    conv: ConvOptions2d,
    pooling: Option<(IntTensor<B>, PoolOptions2d)>,
}

/// Backward step of `conv` and `conv_relu_pool`; parents are `[x, weight]` or
/// `[x, weight, bias]`.
#[derive(Debug)]
struct ConvBackward;

impl<B: KernelBackend, const N: usize> Backward<B, N> for ConvBackward {
    type State = ConvState<B>;

    fn backward(self, ops: Ops<Self::State, N>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let mut parents = ops.parents.into_iter();
        let (x_node, weight_node) = (parents.next().flatten(), parents.next().flatten());
        let bias_node = parents.next().flatten();
        let wants = GradsWanted {
            x: x_node.is_some(),
            bias: bias_node.is_some(),
        };
        let ConvState {
            x,
            weight,
            conv,
            pooling,
        } = ops.state;
        let computed: ConvGrads<B> = match pooling {
            None => B::conv_backward(x, weight, grad, conv, wants),
            Some((argmax, pool)) => {
                B::conv_relu_pool_backward(x, weight, grad, argmax, conv, pool, wants)
            }
        };
        if let (Some(node), Some(x_grad)) = (x_node, computed.x) {
            grads.register::<B>(node.id, x_grad);
        }
        if let Some(node) = weight_node {
            grads.register::<B>(node.id, computed.weight);
        }
        if let (Some(node), Some(bias_grad)) = (bias_node, computed.bias) {
            grads.register::<B>(node.id, bias_grad);
        }
    }
}

/// Records a convolution-like op: runs `forward` on the inner tensors and, when a parent is
/// tracked, saves what [`ConvBackward`] needs.
fn record_conv<B, C, F>(
    x: FloatTensor<Autodiff<B, C>>,
    weight: FloatTensor<Autodiff<B, C>>,
    bias: Option<FloatTensor<Autodiff<B, C>>>,
    conv: ConvOptions2d,
    pool: Option<PoolOptions2d>,
    forward: F,
) -> (FloatTensor<Autodiff<B, C>>, Option<IntTensor<B>>)
where
    B: KernelBackend,
    C: CheckpointStrategy,
    F: FnOnce(
        FloatTensor<B>,
        FloatTensor<B>,
        Option<FloatTensor<B>>,
    ) -> (FloatTensor<B>, Option<IntTensor<B>>),
{
    let (x_node, weight_node) = (x.node.clone(), weight.node.clone());
    let (x, weight) = (x.primitive, weight.primitive);
    let (bias_node, bias) = match bias {
        Some(bias) => (Some(bias.node.clone()), Some(bias.primitive)),
        None => (None, None),
    };
    let (output, argmax) = forward(x.clone(), weight.clone(), bias);
    let state = || ConvState {
        x,
        weight,
        conv,
        pooling: pool.map(|pool| (argmax.clone().expect("pooled ops return an argmax"), pool)),
    };
    let output = match bias_node {
        Some(bias_node) => match ConvBackward
            .prepare::<C>([x_node, weight_node, bias_node])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish(state(), output),
            OpsKind::UnTracked(prep) => prep.finish(output),
        },
        None => match ConvBackward
            .prepare::<C>([x_node, weight_node])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish(state(), output),
            OpsKind::UnTracked(prep) => prep.finish(output),
        },
    };
    (output, argmax)
}

/// Backward step of `max_pool_with_argmax`.
#[derive(Debug)]
struct MaxPoolBackward;

impl<B: KernelBackend> Backward<B, 1> for MaxPoolBackward {
    type State = (FloatTensor<B>, IntTensor<B>, PoolOptions2d);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let [x_node] = ops.parents;
        let (x, argmax, pool) = ops.state;
        if let Some(node) = x_node {
            grads.register::<B>(node.id, B::max_pool_backward(x, grad, argmax, pool));
        }
    }
}

impl<B: KernelBackend, C: CheckpointStrategy> KernelBackend for Autodiff<B, C> {
    fn conv(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        options: ConvOptions2d,
    ) -> FloatTensor<Self> {
        record_conv::<B, C, _>(x, weight, bias, options, None, |x, weight, bias| {
            (B::conv(x, weight, bias, options), None)
        })
        .0
    }

    fn max_pool_with_argmax(
        x: FloatTensor<Self>,
        pool: PoolOptions2d,
    ) -> (FloatTensor<Self>, IntTensor<Self>) {
        let (output, argmax) = B::max_pool_with_argmax(x.primitive.clone(), pool);
        let output = match MaxPoolBackward
            .prepare::<C>([x.node.clone()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish((x.primitive, argmax.clone(), pool), output),
            OpsKind::UnTracked(prep) => prep.finish(output),
        };
        (output, argmax)
    }

    fn conv_relu_pool(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        conv: ConvOptions2d,
        pool: PoolOptions2d,
    ) -> (FloatTensor<Self>, IntTensor<Self>) {
        let (output, argmax) =
            record_conv::<B, C, _>(x, weight, bias, conv, Some(pool), |x, weight, bias| {
                let (output, argmax) = B::conv_relu_pool(x, weight, bias, conv, pool);
                (output, Some(argmax))
            });
        (output, argmax.expect("conv_relu_pool returns an argmax"))
    }
}
