//! A CNN defined layer by layer (a run file's `layers` list): every layer's shape is checked
//! before a weight is made ([`CnnConfig::summary`]), and conv → ReLU → pool and dense → ReLU
//! run as one layer each, on cubenet's fused kernels where the kernel path is `custom`.
//! Residual blocks run as their steps: a fork that keeps the block's input, the block's
//! layers, and a join that adds the input's shortcut.

use burn::nn::{Dropout, DropoutConfig, Relu};
use burn::prelude::*;
use cubenet_kernels::{ConvOptions2d, KernelBackend};

use super::cnn_config::{CnnConfig, Step, fused_len, steps};
use super::pooling::{AvgPool, GlobalPooling, MaxPool, pool_options};
use super::residual::{Fork, Join};
use super::{
    Activation, AfterConv, BatchNorm, ConvBlock, Dense, FeatureShape, Kernels, LayerSpec,
    ModelError,
};

impl CnnConfig {
    /// Checks every layer's shape, then initializes the weights on `device`.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Result<Cnn<B>, ModelError> {
        let inputs = self.summary()?.shapes();
        let steps = steps(&self.layers);
        let mut cnn = Cnn {
            features: Vec::new(),
            head: Vec::new(),
            kernels: self.kernels,
        };
        // The inputs of the residual blocks entered and not yet joined.
        let mut kept = Vec::new();
        let mut index = 0;
        while index < steps.len() {
            let (input, output) = (inputs[index], inputs[index + 1]);
            let any_shape = |layer| match input {
                FeatureShape::Maps(_) => Built::Maps(MapLayer::AnyShape(layer)),
                FeatureShape::Flat(_) => Built::Flat(FlatLayer::AnyShape(layer)),
            };
            let used = fused_len(&steps, index);
            let layer = match &steps[index].1 {
                Step::Layer(layer) => layer,
                &Step::Fork(shortcut) => {
                    kept.push(input);
                    cnn.features.push(MapLayer::Fork(Fork::new(shortcut)));
                    index += 1;
                    continue;
                }
                &Step::Join(shortcut) => {
                    let from = kept.pop().expect("every join follows its fork");
                    let (FeatureShape::Maps(from), FeatureShape::Maps(to)) = (from, output) else {
                        unreachable!("the summary refuses a flat residual block")
                    };
                    let join =
                        Join::new(shortcut, [from, to], self.kernels, self.precision, device);
                    cnn.features.push(MapLayer::Join(join));
                    index += 1;
                    continue;
                }
            };
            let built = match *layer {
                LayerSpec::Conv(conv) => {
                    let after = match (used, steps.get(index + 2)) {
                        (3, Some((_, Step::Layer(LayerSpec::Pool { window, stride })))) => {
                            AfterConv::ReluPool(pool_options(*window, *stride))
                        }
                        (2, _) => AfterConv::Relu,
                        _ => AfterConv::Nothing,
                    };
                    let block = ConvBlock::new(
                        [input.features(), conv.filters],
                        [conv.kernel; 2],
                        ConvOptions2d::new([conv.stride; 2], [conv.padding; 2])
                            .with_precision(self.precision),
                        conv.bias,
                        after,
                        self.kernels,
                        device,
                    );
                    Built::Maps(MapLayer::Conv(block))
                }
                LayerSpec::Pool { window, stride } => {
                    Built::Maps(MapLayer::Pool(MaxPool::new(window, stride, self.kernels)))
                }
                LayerSpec::AvgPool { window, stride } => {
                    Built::Maps(MapLayer::AvgPool(AvgPool::new(window, stride)))
                }
                LayerSpec::GlobalPool(pool) => {
                    Built::Maps(MapLayer::GlobalPool(GlobalPooling::new(pool)))
                }
                LayerSpec::Dense(_) => {
                    let dense = Dense::new([input.values(), output.values()], self.kernels, device);
                    match used {
                        2 => Built::Flat(FlatLayer::DenseRelu(dense)),
                        _ => Built::Flat(FlatLayer::Dense(dense)),
                    }
                }
                LayerSpec::Relu => any_shape(AnyShapeLayer::Relu(Relu)),
                LayerSpec::Gelu => {
                    any_shape(AnyShapeLayer::Pointwise(Pointwise::new(Activation::Gelu)))
                }
                LayerSpec::Silu => {
                    any_shape(AnyShapeLayer::Pointwise(Pointwise::new(Activation::Silu)))
                }
                LayerSpec::Dropout(probability) => {
                    let dropout = DropoutConfig::new(probability).init();
                    any_shape(AnyShapeLayer::Dropout(dropout))
                }
                LayerSpec::BatchNorm(norm) => {
                    let norm = BatchNorm::new(input.features(), norm, device);
                    any_shape(AnyShapeLayer::BatchNorm(norm))
                }
                LayerSpec::Residual(_) => unreachable!("residual blocks are opened into steps"),
            };
            match built {
                Built::Maps(layer) => cnn.features.push(layer),
                Built::Flat(layer) => cnn.head.push(layer),
            }
            index += used;
        }
        Ok(cnn)
    }
}

/// A CNN built from a [`CnnConfig`]: layers on feature maps, then, flattened, the dense
/// layers and what follows them. Images `[n, c, h, w]` in, logits `[n, classes]` out.
#[derive(Module, Debug)]
pub struct Cnn<B: Backend> {
    /// The layers before the first dense layer, on `[n, c, h, w]`.
    features: Vec<MapLayer<B>>,
    /// The first dense layer and those after it, on `[n, features]`.
    head: Vec<FlatLayer<B>>,
    #[module(skip)]
    kernels: Kernels,
}

impl<B: Backend> Cnn<B> {
    /// Which implementation runs the layers.
    pub fn kernels(&self) -> Kernels {
        self.kernels
    }
}

impl<B: KernelBackend> Cnn<B> {
    /// Class logits `[n, classes]` for images `[n, c, h, w]`.
    pub fn forward(&self, images: Tensor<B, 4>) -> Tensor<B, 2> {
        self.classify(self.features(images))
    }

    /// The layers on feature maps, their output flattened to `[n, c·h·w]`. Split from
    /// [`classify`](Self::classify) so that benchmarks can time each side.
    pub fn features(&self, images: Tensor<B, 4>) -> Tensor<B, 2> {
        let mut kept = Vec::new();
        let mut x = images;
        for layer in &self.features {
            x = match layer {
                MapLayer::Fork(_) => {
                    kept.push(x.clone());
                    x
                }
                MapLayer::Join(join) => {
                    join.forward(kept.pop().expect("every join follows its fork"), x)
                }
                layer => layer.forward(x),
            };
        }
        x.flatten(1, 3)
    }

    /// Class logits from the flattened features: the dense layers and what follows them.
    pub fn classify(&self, features: Tensor<B, 2>) -> Tensor<B, 2> {
        self.head.iter().fold(features, |x, layer| layer.forward(x))
    }
}

/// A layer of [`Cnn::init`] before it is placed on the maps' side or the flat side.
#[allow(clippy::large_enum_variant)] // one at a time, while the network is built
enum Built<B: Backend> {
    Maps(MapLayer<B>),
    Flat(FlatLayer<B>),
}

/// A layer on feature maps.
#[derive(Module, Debug)]
#[allow(clippy::large_enum_variant)] // a handful per network; boxing would change nothing
pub enum MapLayer<B: Backend> {
    /// A convolution with the ReLU and pool that follow it, if any.
    Conv(ConvBlock<B>),
    /// A max-pool that does not follow conv → ReLU.
    Pool(MaxPool),
    AvgPool(AvgPool),
    GlobalPool(GlobalPooling),
    /// A residual block's start: [`Cnn::features`] keeps its input.
    Fork(Fork),
    /// A residual block's end: its shortcut added.
    Join(Join<B>),
    AnyShape(AnyShapeLayer<B>),
}

impl<B: KernelBackend> MapLayer<B> {
    /// The layer on `x`; forks and joins are [`Cnn::features`]' to run, with the kept input.
    fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        match self {
            MapLayer::Conv(block) => block.forward(x),
            MapLayer::Pool(pool) => pool.forward(x),
            MapLayer::AvgPool(pool) => pool.forward(x),
            MapLayer::GlobalPool(pool) => pool.forward(x),
            MapLayer::AnyShape(layer) => layer.forward(x),
            MapLayer::Fork(_) | MapLayer::Join(_) => unreachable!("run by Cnn::features"),
        }
    }
}

/// A layer on flattened features.
#[derive(Module, Debug)]
pub enum FlatLayer<B: Backend> {
    Dense(Dense<B>),
    /// A dense layer with the ReLU that follows it, applied inside the dense kernels.
    DenseRelu(Dense<B>),
    AnyShape(AnyShapeLayer<B>),
}

impl<B: KernelBackend> FlatLayer<B> {
    fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        match self {
            FlatLayer::Dense(dense) => dense.forward(x),
            FlatLayer::DenseRelu(dense) => dense.forward_relu(x),
            FlatLayer::AnyShape(layer) => layer.forward(x),
        }
    }
}

/// A layer that works on maps and on features alike.
#[derive(Module, Debug)]
#[allow(clippy::large_enum_variant)] // a handful per network; boxing would change nothing
pub enum AnyShapeLayer<B: Backend> {
    /// A ReLU that follows no convolution or dense layer.
    Relu(Relu),
    /// GELU or SiLU.
    Pointwise(Pointwise),
    /// Inactive outside training (on a backend without autodiff).
    Dropout(Dropout),
    /// Over axis 1: the channels of maps, the features of flat activations.
    BatchNorm(BatchNorm<B>),
}

impl<B: Backend> AnyShapeLayer<B> {
    fn forward<const D: usize>(&self, x: Tensor<B, D>) -> Tensor<B, D> {
        match self {
            AnyShapeLayer::Relu(relu) => relu.forward(x),
            AnyShapeLayer::Pointwise(pointwise) => pointwise.activation.forward(x),
            AnyShapeLayer::Dropout(dropout) => dropout.forward(x),
            AnyShapeLayer::BatchNorm(norm) => norm.forward(x),
        }
    }
}

/// An element-wise activation as a layer of its own.
#[derive(Module, Clone, Debug)]
pub struct Pointwise {
    activation: Activation,
}

impl Pointwise {
    fn new(activation: Activation) -> Self {
        Self { activation }
    }
}

#[cfg(test)]
mod tests {
    use burn::backend::{Autodiff, NdArray};
    use burn::module::{ModuleMapper, ModuleVisitor, Param};
    use burn::tensor::{TensorData, Tolerance};
    use cubenet_kernels::testing::SeededInit;
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};

    use super::*;
    use crate::model::{LayerSpecs, LeNetConfig, Precision, SimpleCnnConfig};

    type B = NdArray;

    const EXAMPLE: &str = r#"
        input = [1, 28, 28]
        classes = 10
        kernels = "burn"
        precision = "tf32"
        layers = [
          { conv = 32, kernel = 3, padding = 1 }, { relu = true }, { pool = 2 },
          { conv = 64, kernel = 3, padding = 1, stride = 1 }, { relu = true }, { pool = 2 },
          { dense = 128 }, { relu = true }, { dropout = 0.25 }, { batch_norm = true },
          { dense = "classes" },
        ]
    "#;

    /// A 10-class CNN with the layers of a run file.
    fn config(input: [usize; 3], layers: &str) -> CnnConfig {
        #[derive(serde::Deserialize)]
        struct File {
            layers: LayerSpecs,
        }
        let file: File = toml::from_str(&format!("layers = [{layers}]"))
            .unwrap_or_else(|err| panic!("{layers}: {err}"));
        CnnConfig::new(input, 10, file.layers)
    }

    fn error(input: [usize; 3], layers: &str) -> String {
        config(input, layers).summary().unwrap_err().to_string()
    }

    /// Images of values in [-2, 2), the same for the same `seed` in every run.
    fn images<B: Backend>(seed: u64, shape: [usize; 4]) -> Tensor<B, 4> {
        let mut rng = StdRng::seed_from_u64(seed);
        let values: Vec<f32> = (0..shape.iter().product())
            .map(|_| rng.random_range(-2.0..2.0))
            .collect();
        Tensor::from_data(TensorData::new(values, shape), &Default::default())
    }

    fn max_difference<B: Backend>(a: Tensor<B, 2>, b: Tensor<B, 2>) -> f32 {
        (a - b).abs().max().into_scalar().elem()
    }

    /// Every float parameter's values, in the order Burn visits them.
    struct Collect(Vec<TensorData>);

    impl<B: Backend> ModuleVisitor<B> for Collect {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            self.0.push(param.val().into_data());
        }
    }

    /// Overwrites every float parameter with the next collected values.
    struct Replace(std::vec::IntoIter<TensorData>);

    impl<B: Backend> ModuleMapper<B> for Replace {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
            let data = self.0.next().expect("as many parameters");
            param.map(|tensor| {
                assert_eq!(tensor.shape(), data.shape, "parameter shapes differ");
                Tensor::from_data(data, &tensor.device())
            })
        }
    }

    /// `cnn` with parameters that are the same for the same `seed` in every run, all of them
    /// drawn: Burn initializes parameters lazily, and a clone of an undrawn parameter draws
    /// values of its own, so a record taken from a fresh model to copy it would hold other
    /// weights than the model computes with.
    fn redrawn<B: Backend>(cnn: Cnn<B>, seed: u64) -> Cnn<B> {
        cnn.map(&mut SeededInit::new(seed))
    }

    /// `to` with the parameters of `from`, visited in the same order.
    fn copy_params<B: Backend, M: Module<B>>(from: &impl Module<B>, to: M) -> M {
        let mut collect = Collect(Vec::new());
        from.visit(&mut collect);
        let mut replace = Replace(collect.0.into_iter());
        let copied = to.map(&mut replace);
        assert!(replace.0.next().is_none(), "as many parameters");
        copied
    }

    #[test]
    fn the_example_run_file_cnn_builds_and_classifies() {
        let config: CnnConfig = toml::from_str(EXAMPLE).unwrap();
        assert_eq!(config.kernels, Kernels::Burn);
        assert_eq!(config.precision, Precision::Tf32);
        let summary = config.summary().unwrap();
        let outputs: Vec<String> = summary
            .layers
            .iter()
            .map(|layer| layer.output.to_string())
            .collect();
        assert_eq!(
            outputs,
            [
                "32x28x28", "32x28x28", "32x14x14", "64x14x14", "64x14x14", "64x7x7", "128", "128",
                "128", "128", "10"
            ]
        );
        let cnn = config.init::<B>(&Default::default()).unwrap();
        assert_eq!(summary.params(), cnn.num_params());
        // conv·ReLU·pool twice, dense·ReLU, dropout, batch norm, dense.
        assert_eq!((cnn.features.len(), cnn.head.len()), (2, 4));
        assert_eq!(cnn.forward(images(1, [3, 1, 28, 28])).dims(), [3, 10]);
    }

    #[test]
    fn summary_table_is_aligned() {
        let config = config(
            [1, 28, 28],
            r#"{ conv = 8 }, { relu = true }, { pool = 2 }, { dense = "classes" }"#,
        );
        let table = config.summary().unwrap().to_string();
        assert_eq!(
            table,
            "\
layer            output   params
input            1x28x28
1 conv 8 3x3     8x26x26      80
2 relu           8x26x26       0
3 pool 2         8x13x13       0
4 dense classes  10        13530
total                      13610
"
        );
    }

    #[test]
    fn parameter_counts_match_burn() {
        let layers = [
            EXAMPLE_LAYERS_WITHOUT_FUSION,
            r#"{ batch_norm = true }, { conv = 5, kernel = 2, stride = 2 }, { relu = true },
               { dense = 7 }, { batch_norm = true }, { relu = true }, { dense = "classes" }"#,
        ];
        for layers in layers {
            let config = config([3, 9, 11], layers);
            let cnn = config.init::<B>(&Default::default()).unwrap();
            assert_eq!(
                config.summary().unwrap().params(),
                cnn.num_params(),
                "{layers}"
            );
            assert_eq!(cnn.forward(images(2, [2, 3, 9, 11])).dims(), [2, 10]);
        }
    }

    /// Conv without ReLU, pool without conv, ReLU and dropout on maps: nothing to fuse.
    const EXAMPLE_LAYERS_WITHOUT_FUSION: &str = r#"{ conv = 4, padding = 1 }, { pool = 2 },
        { relu = true }, { dropout = 0.5 }, { conv = 6 }, { batch_norm = true },
        { dense = "classes" }"#;

    #[test]
    fn shapes_follow_padding_stride_and_odd_sizes() {
        let outputs = |input, layers| -> Vec<FeatureShape> {
            config(input, layers)
                .summary()
                .unwrap()
                .layers
                .iter()
                .map(|layer| layer.output)
                .collect()
        };
        // 27 → conv 3 → 25 → pool 2 drops the last row and column → 12.
        assert_eq!(
            outputs(
                [1, 27, 27],
                r#"{ conv = 4 }, { pool = 2 }, { dense = "classes" }"#
            ),
            [
                FeatureShape::Maps([4, 25, 25]),
                FeatureShape::Maps([4, 12, 12]),
                FeatureShape::Flat(10)
            ]
        );
        // Heights 27 → (27 + 2 − 3) / 2 + 1 = 14 → (14 + 4 − 5) / 2 + 1 = 7 → (7 − 3) / 2 + 1
        // = 3; widths 15 → 8 → 4 → 1.
        assert_eq!(
            outputs(
                [2, 27, 15],
                r#"{ conv = 4, stride = 2, padding = 1 }, { conv = 3, kernel = 5, stride = 2, padding = 2 },
                   { pool = 3, stride = 2 }, { dense = "classes" }"#
            ),
            [
                FeatureShape::Maps([4, 14, 8]),
                FeatureShape::Maps([3, 7, 4]),
                FeatureShape::Maps([3, 3, 1]),
                FeatureShape::Flat(10)
            ]
        );
        let cnn = config(
            [2, 27, 15],
            r#"{ conv = 4, stride = 2, padding = 1 }, { relu = true }, { pool = 3, stride = 2 },
               { dense = "classes" }"#,
        )
        .init::<B>(&Default::default())
        .unwrap();
        assert_eq!(cnn.forward(images(3, [5, 2, 27, 15])).dims(), [5, 10]);
    }

    #[test]
    fn bad_layers_are_refused_by_position() {
        let cases = [
            (
                r#"{ dense = 16 }, { conv = 8 }, { dense = "classes" }"#,
                "layer `2 (conv 8 3x3)`: it needs feature maps, and a dense layer before it has \
                 flattened them",
            ),
            (
                r#"{ dense = 16 }, { relu = true }, { pool = 2 }, { dense = "classes" }"#,
                "layer `3 (pool 2)`: it needs feature maps, and a dense layer before it has \
                 flattened them",
            ),
            (
                r#"{ dense = "classes" }, { relu = true }"#,
                "layer `1 (dense classes)`: `dense = \"classes\"` gives the logits, so it must \
                 be the last layer",
            ),
            (
                r#"{ conv = 0 }, { dense = "classes" }"#,
                "layer `1 (conv 0 3x3)`: filters must be positive, got a zero",
            ),
            (
                r#"{ conv = 4, kernel = 0 }, { dense = "classes" }"#,
                "layer `1 (conv 4 0x0)`: kernel size must be positive, got a zero",
            ),
            (
                r#"{ conv = 4, stride = 0 }, { dense = "classes" }"#,
                "layer `1 (conv 4 3x3, stride 0)`: stride must be positive, got a zero",
            ),
            (
                r#"{ pool = 0 }, { dense = "classes" }"#,
                "layer `1 (pool 0)`: pool window must be positive, got a zero",
            ),
            (
                r#"{ dense = 0 }, { dense = "classes" }"#,
                "layer `1 (dense 0)`: width must be positive, got a zero",
            ),
            (
                r#"{ conv = 4, kernel = 5 }, { relu = true }, { pool = 2 }, { pool = 2 }, { pool = 2 },
                   { conv = 8, kernel = 5 }, { dense = "classes" }"#,
                "layer `6 (conv 8 5x5)`: the 5x5 window is larger than its 3x3 (padded) input",
            ),
            (
                r#"{ pool = 2 }, { pool = 2 }, { pool = 2 }, { pool = 2 }, { pool = 2 },
                   { dense = "classes" }"#,
                "layer `5 (pool 2)`: the 2x2 window is larger than its 1x1 (padded) input",
            ),
            (
                r#"{ pool = 16 }, { dense = "classes" }"#,
                "layer `1 (pool 16)`: pool windows are at most 15x15: the pool stores each \
                 output's argmax in a byte",
            ),
            (
                r#"{ dropout = 1.0 }, { dense = "classes" }"#,
                "layer `1 (dropout 1)`: the dropout probability must be at least 0 and less \
                 than 1",
            ),
            (
                r#"{ dense = 10 }, { dropout = -0.1 }"#,
                "layer `2 (dropout -0.1)`: the dropout probability must be at least 0 and less \
                 than 1",
            ),
            (
                r#"{ dense = "classes" }, { dense = "classes" }"#,
                "layer `1 (dense classes)`: `dense = \"classes\"` gives the logits, so it must \
                 be the last layer",
            ),
            (
                r#"{ dense = 12 }, { relu = true }"#,
                "layer `2 (relu)`: a CNN ends with its logits, one per class (10): make the last \
                 layer `dense = \"classes\"` (this one outputs 12)",
            ),
            (
                r#"{ conv = 4 }"#,
                "layer `1 (conv 4 3x3)`: a CNN ends with its logits, one per class (10): make \
                 the last layer `dense = \"classes\"` (this one outputs 4x26x26)",
            ),
            (
                "",
                "a CNN needs layers, the last of them `dense = \"classes\"`",
            ),
        ];
        for (layers, expected) in cases {
            assert_eq!(error([1, 28, 28], layers), expected, "{layers}");
        }
        assert_eq!(
            error([1, 0, 28], r#"{ dense = "classes" }"#),
            "layer `input`: image size must be positive, got a zero"
        );
        let mut no_classes = config([1, 28, 28], r#"{ dense = "classes" }"#);
        no_classes.classes = 0;
        let err = no_classes.summary().unwrap_err();
        assert_eq!(
            err.to_string(),
            "layer `output`: classes must be positive, got a zero"
        );
    }

    #[test]
    fn a_last_dense_layer_of_the_class_count_gives_the_logits() {
        assert!(config([1, 8, 8], "{ dense = 10 }").summary().is_ok());
    }

    /// The presets' layers written in a run file.
    const LENET_LAYERS: &str = r#"{ conv = 4, kernel = 5, padding = 2 }, { relu = true },
        { pool = 2 }, { conv = 6, kernel = 5 }, { relu = true }, { pool = 2 }, { dense = 16 },
        { relu = true }, { dense = "classes" }"#;
    const SINGLE_CONV_LAYERS: &str =
        r#"{ conv = 5 }, { relu = true }, { pool = 2 }, { dense = "classes" }"#;

    #[test]
    fn run_file_cnns_compute_the_presets() {
        let device = Default::default();
        for kernels in [Kernels::Custom, Kernels::Burn] {
            let presets = [
                (
                    LeNetConfig::new()
                        .with_channels([4, 6])
                        .with_hidden(16)
                        .with_kernels(kernels)
                        .cnn()
                        .unwrap(),
                    LENET_LAYERS,
                ),
                (
                    SimpleCnnConfig::new()
                        .with_filters(5)
                        .with_kernels(kernels)
                        .cnn()
                        .unwrap(),
                    SINGLE_CONV_LAYERS,
                ),
            ];
            for (preset, layers) in presets {
                let run_file = config([1, 28, 28], layers).with_kernels(kernels);
                assert_eq!(run_file.layers, preset.layers);
                let preset = preset.init::<B>(&device).unwrap();
                let run_file = copy_params(&preset, run_file.init::<B>(&device).unwrap());
                let x = images(4, [3, 1, 28, 28]);
                let difference = max_difference(preset.forward(x.clone()), run_file.forward(x));
                assert_eq!(difference, 0.0, "{kernels:?}: {layers}");
            }
        }
    }

    /// Fused and unfused layers, strides and padding, a pool of its own, batch norm on maps
    /// and on features; no dropout, which is random in training.
    const MIXED: &str = r#"{ conv = 4, padding = 1 }, { relu = true }, { pool = 2 },
        { conv = 6, stride = 2, padding = 1 }, { relu = true }, { batch_norm = true },
        { conv = 5, kernel = 2 }, { pool = 3, stride = 2 }, { relu = true },
        { dense = 12 }, { relu = true }, { batch_norm = true }, { dense = 9 }, { dense = "classes" }"#;

    #[test]
    fn custom_and_burn_kernel_paths_agree() {
        let device = Default::default();
        let custom = redrawn(config([2, 21, 20], MIXED).init::<B>(&device).unwrap(), 5);
        let burn = config([2, 21, 20], MIXED)
            .with_kernels(Kernels::Burn)
            .init::<B>(&device)
            .unwrap()
            .load_record(custom.clone().into_record());
        let x = images(5, [3, 2, 21, 20]);
        let difference = max_difference(custom.forward(x.clone()), burn.forward(x));
        assert!(difference < 1e-5, "{difference}");
    }

    /// Every parameter's gradient, in the order Burn visits them.
    struct Gradients<'a>(
        &'a <Autodiff<B> as burn::tensor::backend::AutodiffBackend>::Gradients,
        Vec<TensorData>,
    );

    impl ModuleVisitor<Autodiff<B>> for Gradients<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<Autodiff<B>, D>>) {
            // Batch norm's running statistics are visited too, and have none.
            if let Some(grad) = param.val().grad(self.0) {
                self.1.push(grad.into_data());
            }
        }
    }

    /// Seeded ([`SeededInit`] says why): the paths sum in other orders, and 15 of 600 runs on
    /// Burn's shared generator failed, as do 13 of seeds 0–399 in every run; with no ReLU or
    /// pool in the network, none of 1,000 runs did.
    #[test]
    fn custom_and_burn_kernel_paths_train_alike() {
        let device = Default::default();
        let init = |kernels| {
            config([2, 21, 20], MIXED)
                .with_kernels(kernels)
                .init::<Autodiff<B>>(&device)
                .unwrap()
        };
        for seed in 0..4 {
            let custom = redrawn(init(Kernels::Custom), seed);
            let burn = init(Kernels::Burn).load_record(custom.clone().into_record());
            let x = images::<Autodiff<B>>(seed, [8, 2, 21, 20]);
            let mut all = Vec::new();
            for cnn in [custom, burn] {
                let gradients = cnn.forward(x.clone()).powi_scalar(2).sum().backward();
                let mut visitor = Gradients(&gradients, Vec::new());
                cnn.visit(&mut visitor);
                all.push(visitor.1);
            }
            // Weight and bias of 3 convolutions and 3 dense layers, scale and shift of 2 norms.
            assert_eq!((all[0].len(), all[1].len()), (16, 16));
            for (custom, burn) in all[0].iter().zip(&all[1]) {
                custom.assert_approx_eq::<f32>(burn, Tolerance::rel_abs(1e-3, 1e-4));
            }
        }
    }

    /// Residual blocks of every shortcut, one nested, GELU, SiLU, average and global pools,
    /// batch norm without scale and shift, convolutions without bias.
    const RESIDUAL: &str = r#"{ conv = 5, padding = 1, bias = false }, { batch_norm = true },
        { gelu = true },
        { residual = [{ conv = 5, padding = 1 }, { relu = true }, { pool = 3, stride = 1 },
                      { conv = 5, padding = 2 }, { batch_norm = true, affine = false, momentum = 0.3 }] },
        { silu = true }, { avg_pool = 2, stride = 1 },
        { residual = [{ conv = 7, padding = 1, stride = 2 }, { relu = true },
                      { residual = [{ conv = 7, padding = 1 }, { silu = true }] }],
          shortcut = "conv" },
        { residual = [{ conv = 10, kernel = 1, stride = 2 }], shortcut = "option_a" },
        { global_pool = "max" }, { dense = 6 }, { gelu = true }, { dense = "classes" }"#;

    #[test]
    fn residual_blocks_open_into_steps_and_their_shapes_are_checked() {
        let summary = config([2, 13, 12], RESIDUAL).summary().unwrap();
        let rows: Vec<String> = summary
            .layers
            .iter()
            .map(|layer| format!("{} {} {}", layer.position, layer.step, layer.output))
            .collect();
        assert_eq!(
            rows,
            [
                "1 conv 5 3x3, padding 1, no bias 5x13x12",
                "2 batch_norm 5x13x12",
                "3 gelu 5x13x12",
                "4 residual, shortcut identity 5x13x12",
                "4.1 conv 5 3x3, padding 1 5x13x12",
                "4.2 relu 5x13x12",
                "4.3 pool 3, stride 1 5x11x10",
                "4.4 conv 5 3x3, padding 2 5x13x12",
                "4.5 batch_norm, momentum 0.3, not affine 5x13x12",
                "4 add the identity shortcut 5x13x12",
                "5 silu 5x13x12",
                "6 avg_pool 2, stride 1 5x12x11",
                "7 residual, shortcut conv 5x12x11",
                "7.1 conv 7 3x3, stride 2, padding 1 7x6x6",
                "7.2 relu 7x6x6",
                "7.3 residual, shortcut identity 7x6x6",
                "7.3.1 conv 7 3x3, padding 1 7x6x6",
                "7.3.2 silu 7x6x6",
                "7.3 add the identity shortcut 7x6x6",
                "7 add the conv shortcut 7x6x6",
                "8 residual, shortcut option_a 7x6x6",
                "8.1 conv 10 1x1, stride 2 10x3x3",
                "8 add the option_a shortcut 10x3x3",
                "9 global_pool max 10x1x1",
                "10 dense 6 6",
                "11 gelu 6",
                "12 dense classes 10",
            ]
        );
        let cnn = config([2, 13, 12], RESIDUAL)
            .init::<B>(&Default::default())
            .unwrap();
        assert_eq!(summary.params(), cnn.num_params());
        assert_eq!(cnn.forward(images(6, [1, 2, 13, 12])).dims(), [1, 10]);
    }

    #[test]
    fn residual_blocks_that_cannot_add_their_shortcut_are_refused() {
        let cases = [
            (
                r#"{ residual = [{ conv = 4, padding = 1 }] }, { dense = "classes" }"#,
                "layer `1 (add the identity shortcut)`: its layers turn 1x8x8 into 4x8x8, and an \
                 identity shortcut keeps the shape: use shortcut = \"conv\" or \"option_a\"",
            ),
            (
                r#"{ residual = [{ conv = 4 }], shortcut = "conv" }, { dense = "classes" }"#,
                "layer `1 (add the conv shortcut)`: its layers turn 1x8x8 into 4x6x6, which no \
                 stride of a shortcut gives: a block may only shrink its maps by a whole stride",
            ),
            (
                r#"{ conv = 4 }, { residual = [{ conv = 2, padding = 1, stride = 2 }], shortcut = "option_a" },
                   { dense = "classes" }"#,
                "layer `2 (add the option_a shortcut)`: its layers turn 4x6x6 into 2x3x3: option_a \
                 adds zero channels and cannot remove any; use shortcut = \"conv\"",
            ),
            (
                r#"{ residual = [] }, { dense = "classes" }"#,
                "layer `1 (residual, shortcut identity)`: a residual block needs layers",
            ),
            (
                r#"{ residual = [{ dense = 4 }] }, { dense = "classes" }"#,
                "layer `1 (add the identity shortcut)`: a residual block works on feature maps: a \
                 dense layer cannot be in one",
            ),
            (
                r#"{ residual = [{ relu = true }, { conv = 0 }] }, { dense = "classes" }"#,
                "layer `1.2 (conv 0 3x3)`: filters must be positive, got a zero",
            ),
            (
                r#"{ batch_norm = true, momentum = 1.5 }, { dense = "classes" }"#,
                "layer `1 (batch_norm, momentum 1.5)`: batch norm's momentum is the weight of \
                 each batch: from 0 to 1",
            ),
            (
                r#"{ global_pool = "avg" }, { dense = 3 }, { global_pool = "max" }, { dense = "classes" }"#,
                "layer `3 (global_pool max)`: it needs feature maps, and a dense layer before it \
                 has flattened them",
            ),
        ];
        for (layers, expected) in cases {
            assert_eq!(error([1, 8, 8], layers), expected, "{layers}");
        }
    }

    /// ResNet-20 as `configs/resnet20.toml` writes it has the paper's 0.27 M parameters:
    /// 269,722 trained ones (as the reference CIFAR implementations count them) and the
    /// 1,376 running statistics of its 688 normalized channels.
    #[test]
    fn resnet20_has_the_papers_parameters() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../configs/resnet20.toml");
        let table: toml::Table = toml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let layers: LayerSpecs = table["model"]["layers"].clone().try_into().unwrap();
        let config = CnnConfig::new([3, 32, 32], 10, layers);
        let summary = config.summary().unwrap();
        assert_eq!(summary.params(), 269_722 + 1_376);
        assert_eq!(
            summary.layers.last().unwrap().output,
            FeatureShape::Flat(10)
        );
        let cnn = config.init::<B>(&Default::default()).unwrap();
        assert_eq!(cnn.forward(images(7, [2, 3, 32, 32])).dims(), [2, 10]);
    }

    #[test]
    fn custom_and_burn_kernel_paths_agree_on_residual_networks() {
        let device = Default::default();
        let init = |kernels| {
            config([2, 13, 12], RESIDUAL)
                .with_kernels(kernels)
                .init::<Autodiff<B>>(&device)
                .unwrap()
        };
        for seed in 0..3 {
            let custom = redrawn(init(Kernels::Custom), seed);
            let burn = init(Kernels::Burn).load_record(custom.clone().into_record());
            let x = images::<Autodiff<B>>(seed, [5, 2, 13, 12]);
            let mut all = Vec::new();
            for cnn in [custom, burn] {
                let logits = cnn.forward(x.clone());
                let gradients = logits.clone().powi_scalar(2).sum().backward();
                let mut visitor = Gradients(&gradients, Vec::new());
                cnn.visit(&mut visitor);
                all.push((logits.into_data(), visitor.1));
            }
            let [(custom_logits, custom), (burn_logits, burn)] = &all[..] else {
                unreachable!()
            };
            custom_logits.assert_approx_eq::<f32>(burn_logits, Tolerance::rel_abs(1e-4, 1e-5));
            // 8 convolutions (2 without bias), 2 dense layers, 2 scaled norms.
            assert_eq!((custom.len(), burn.len()), (20, 20));
            for (custom, burn) in custom.iter().zip(burn) {
                custom.assert_approx_eq::<f32>(burn, Tolerance::rel_abs(1e-3, 1e-4));
            }
        }
    }

    /// GELU's gradient is the exact one, Φ(x) + x·φ(x), not the tanh approximation's.
    #[test]
    fn gelu_is_exact_and_so_is_its_gradient() {
        let device = Default::default();
        let values = [-3.0f32, -1.0, -0.25, 0.0, 0.5, 2.0];
        let x = Tensor::<Autodiff<B>, 1>::from_floats(values, &device).require_grad();
        let y = Activation::Gelu.forward(x.clone());
        let grad = x.grad(&y.clone().sum().backward()).unwrap().into_data();
        let normal = |x: f64| (-x * x / 2.0).exp() / (2.0 * std::f64::consts::PI).sqrt();
        // Φ by a fine midpoint sum of φ from −10, which no approximation of erf shares.
        let cdf = |x: f64| {
            let steps = 200_000;
            let h = (x + 10.0) / steps as f64;
            (0..steps)
                .map(|i| normal(-10.0 + (i as f64 + 0.5) * h) * h)
                .sum::<f64>()
        };
        let expected_y: Vec<f32> = values
            .iter()
            .map(|&v| (v as f64 * cdf(v as f64)) as f32)
            .collect();
        let expected_grad: Vec<f32> = values
            .iter()
            .map(|&v| (cdf(v as f64) + v as f64 * normal(v as f64)) as f32)
            .collect();
        y.into_data().assert_approx_eq::<f32>(
            &TensorData::from(expected_y.as_slice()),
            Tolerance::absolute(1e-5),
        );
        grad.assert_approx_eq::<f32>(
            &TensorData::from(expected_grad.as_slice()),
            Tolerance::absolute(1e-5),
        );
    }
}
