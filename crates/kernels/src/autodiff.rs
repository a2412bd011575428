//! [`KernelBackend`] for `Autodiff<B>`: records backward steps that call `B`'s own backward
//! ops, so the CubeCL kernels (or Burn's ops, on other backends) also compute gradients.

use burn::backend::autodiff::Autodiff;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::tensor::ops::{FloatTensor, IntTensor};

use crate::{
    ConvOptions2d, DenseActivation, GradsWanted, InputCopy, KernelBackend, LayerGrads,
    PoolOptions2d, Precision,
};

/// Which layer op a [`LayerState`] belongs to, with what its backward needs besides the
/// input and weight.
#[derive(Debug, Clone)]
enum LayerOp<B: KernelBackend> {
    Conv(ConvOptions2d),
    /// The fused conv·ReLU·pool: its gradient is routed through the saved argmax.
    ConvReluPool(ConvOptions2d, IntTensor<B>, PoolOptions2d),
    /// The dense layer, with its output when its activation is ReLU.
    Dense(Option<FloatTensor<B>>),
}

/// What a layer's backward step needs.
#[derive(Debug, Clone)]
struct LayerState<B: KernelBackend> {
    x: FloatTensor<B>,
    /// The convolutions' copy of `x` from their forward, if it made one.
    input_copy: InputCopy<B>,
    weight: FloatTensor<B>,
    op: LayerOp<B>,
}

/// Backward step of `conv`, `conv_relu_pool` and `dense`; parents are `[x, weight]` or
/// `[x, weight, bias]`.
#[derive(Debug)]
struct LayerBackward;

impl<B: KernelBackend, const N: usize> Backward<B, N> for LayerBackward {
    type State = LayerState<B>;

    fn backward(self, ops: Ops<Self::State, N>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let mut parents = ops.parents.into_iter();
        let (x_node, weight_node) = (parents.next().flatten(), parents.next().flatten());
        let bias_node = parents.next().flatten();
        let wants = GradsWanted {
            x: x_node.is_some(),
            bias: bias_node.is_some(),
        };
        let LayerState {
            x,
            input_copy,
            weight,
            op,
        } = ops.state;
        let computed: LayerGrads<FloatTensor<B>> = match op {
            LayerOp::Conv(conv) => B::conv_backward(x, input_copy, weight, grad, conv, wants),
            LayerOp::ConvReluPool(conv, argmax, pool) => {
                B::conv_relu_pool_backward(x, input_copy, weight, grad, argmax, conv, pool, wants)
            }
            LayerOp::Dense(relu_output) => B::dense_backward(x, weight, grad, relu_output, wants),
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

/// Records a layer op: runs `forward` on the inner tensors, which returns the output, the
/// op's [`LayerOp`] and the [`InputCopy`] it made, and, when a parent is tracked, saves what
/// [`LayerBackward`] needs.
fn record_layer<B, C, F>(
    x: FloatTensor<Autodiff<B, C>>,
    weight: FloatTensor<Autodiff<B, C>>,
    bias: Option<FloatTensor<Autodiff<B, C>>>,
    forward: F,
) -> (FloatTensor<Autodiff<B, C>>, LayerOp<B>)
where
    B: KernelBackend,
    C: CheckpointStrategy,
    F: FnOnce(
        FloatTensor<B>,
        FloatTensor<B>,
        Option<FloatTensor<B>>,
    ) -> (FloatTensor<B>, LayerOp<B>, InputCopy<B>),
{
    let (x_node, weight_node) = (x.node.clone(), weight.node.clone());
    let (x, weight) = (x.primitive, weight.primitive);
    let (bias_node, bias) = match bias {
        Some(bias) => (Some(bias.node.clone()), Some(bias.primitive)),
        None => (None, None),
    };
    let (output, op, input_copy) = forward(x.clone(), weight.clone(), bias);
    let state = || LayerState {
        x,
        input_copy,
        weight,
        op: op.clone(),
    };
    let output = match bias_node {
        Some(bias_node) => match LayerBackward
            .prepare::<C>([x_node, weight_node, bias_node])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish(state(), output),
            OpsKind::UnTracked(prep) => prep.finish(output),
        },
        None => match LayerBackward
            .prepare::<C>([x_node, weight_node])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish(state(), output),
            OpsKind::UnTracked(prep) => prep.finish(output),
        },
    };
    (output, op)
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

/// Backward step of `cross_entropy`; the targets get no gradient.
#[derive(Debug)]
struct CrossEntropyBackward;

impl<B: KernelBackend> Backward<B, 1> for CrossEntropyBackward {
    type State = (FloatTensor<B>, IntTensor<B>);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let grad = grads.consume::<B>(&ops.node);
        let [logits_node] = ops.parents;
        let (logits, targets) = ops.state;
        if let Some(node) = logits_node {
            grads.register::<B>(node.id, B::cross_entropy_backward(logits, targets, grad));
        }
    }
}

impl<B: KernelBackend, C: CheckpointStrategy> KernelBackend for Autodiff<B, C> {
    fn conv_precision(precision: Precision, device: &B::Device) -> Precision {
        B::conv_precision(precision, device)
    }

    fn conv(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        options: ConvOptions2d,
    ) -> (FloatTensor<Self>, InputCopy<Self>) {
        let (output, _) = record_layer::<B, C, _>(x, weight, bias, |x, weight, bias| {
            let (output, input_copy) = B::conv(x, weight, bias, options);
            (output, LayerOp::Conv(options), input_copy)
        });
        // The copy stays with the recorded backward step, on the inner backend.
        (output, None)
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
    ) -> (FloatTensor<Self>, IntTensor<Self>, InputCopy<Self>) {
        let (output, op) = record_layer::<B, C, _>(x, weight, bias, |x, weight, bias| {
            let (output, argmax, input_copy) = B::conv_relu_pool(x, weight, bias, conv, pool);
            (
                output,
                LayerOp::ConvReluPool(conv, argmax, pool),
                input_copy,
            )
        });
        let LayerOp::ConvReluPool(_, argmax, _) = op else {
            unreachable!("recorded as ConvReluPool above")
        };
        // The copy stays with the recorded backward step, on the inner backend.
        (output, argmax, None)
    }

    fn dense(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        activation: DenseActivation,
    ) -> FloatTensor<Self> {
        record_layer::<B, C, _>(x, weight, bias, |x, weight, bias| {
            let output = B::dense(x, weight, bias, activation);
            let relu_output = (activation == DenseActivation::Relu).then(|| output.clone());
            (output, LayerOp::Dense(relu_output), None)
        })
        .0
    }

    fn cross_entropy(logits: FloatTensor<Self>, targets: IntTensor<Self>) -> FloatTensor<Self> {
        let loss = B::cross_entropy(logits.primitive.clone(), targets.clone());
        match CrossEntropyBackward
            .prepare::<C>([logits.node.clone()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish((logits.primitive, targets), loss),
            OpsKind::UnTracked(prep) => prep.finish(loss),
        }
    }
}
