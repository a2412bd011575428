//! Model shapes, geometry validation and config round trips.

use burn::backend::NdArray;
use burn::prelude::*;
use cubenet::model::{
    Activation, ImageModelConfig, LeNetConfig, MlpConfig, ModelError, SimpleCnnConfig,
};

type B = NdArray;

fn images(n: usize, side: usize) -> Tensor<B, 4> {
    Tensor::random(
        [n, 1, side, side],
        burn::tensor::Distribution::Default,
        &Default::default(),
    )
}

#[test]
fn output_shapes() {
    let device = Default::default();
    let simple = SimpleCnnConfig::new()
        .with_filters(7)
        .init::<B>(&device)
        .unwrap();
    assert_eq!(simple.forward(images(3, 28)).dims(), [3, 10]);
    let lenet = LeNetConfig::new()
        .with_channels([4, 6])
        .with_hidden(16)
        .init::<B>(&device)
        .unwrap();
    assert_eq!(lenet.forward(images(2, 28)).dims(), [2, 10]);
    let mlp = MlpConfig::new(784, vec![32, 16], 10)
        .init::<B>(&device)
        .unwrap();
    let flat = Tensor::<B, 2>::zeros([5, 784], &device) + 0.5;
    assert_eq!(mlp.forward(flat).dims(), [5, 10]);
    // The MNIST wrapper flattens images for the MLP.
    let model = ImageModelConfig::Mlp(MlpConfig::new(784, vec![8], 10))
        .init::<B>(&device)
        .unwrap();
    assert_eq!(model.forward(images(4, 28)).dims(), [4, 10]);
    // Other input sizes and class counts follow the config.
    let wide = SimpleCnnConfig::new()
        .with_image_size(16)
        .with_num_classes(3);
    assert_eq!(
        wide.init::<B>(&device)
            .unwrap()
            .forward(images(1, 16))
            .dims(),
        [1, 3]
    );
}

#[test]
fn simple_cnn_has_its_parameter_count() {
    let model = SimpleCnnConfig::new()
        .with_filters(32)
        .init::<B>(&Default::default())
        .unwrap();
    // conv 32·(9+1) + linear 169·32·10 + 10
    assert_eq!(burn::module::Module::num_params(&model), 320 + 54_080 + 10);
}

/// Each MLP layer computes activation(W·x + b) with W stored `[outputs, inputs]`: checked by
/// hand through a ReLU layer (inside the dense kernels on a GPU), a tanh and a σ(2x) one,
/// all with square weights, which a transposed W would pass shape checks with.
#[test]
fn mlp_layers_apply_their_weight_rows_and_activations() {
    let device = Default::default();
    let gained = Activation::SigmoidGain { gain: 2.0 };
    let mlp = MlpConfig::new(3, vec![3, 3, 3], 3)
        .with_layer_activations(vec![Activation::Relu, Activation::Tanh, gained])
        .init::<B>(&device)
        .unwrap();
    let activations: [fn(f32) -> f32; 4] = [
        |z| z.max(0.0),
        f32::tanh,
        |z| 1.0 / (1.0 + (-2.0 * z).exp()),
        |z| z,
    ];
    let x = [0.5f32, -1.0, 2.0];
    let mut expected = x.to_vec();
    for (layer, activation) in mlp.layers().iter().zip(activations) {
        let weight = layer.weight().into_data().to_vec::<f32>().unwrap();
        let bias = layer.bias().into_data().to_vec::<f32>().unwrap();
        expected = weight
            .chunks_exact(expected.len())
            .zip(bias)
            .map(|(row, b)| {
                activation(row.iter().zip(&expected).map(|(w, v)| w * v).sum::<f32>() + b)
            })
            .collect();
    }
    let got = mlp
        .forward(Tensor::from_floats([x], &device))
        .into_data()
        .to_vec::<f32>()
        .unwrap();
    for (g, e) in got.iter().zip(&expected) {
        assert!((g - e).abs() < 1e-5, "{got:?} vs {expected:?}");
    }
}

#[test]
fn impossible_geometry_names_the_layer() {
    let device = Default::default();
    let err = SimpleCnnConfig::new()
        .with_image_size(2)
        .init::<B>(&device)
        .unwrap_err();
    assert_eq!(
        err,
        ModelError::WindowTooLarge {
            layer: "1 (conv 32 3x3)".into(),
            window: [3, 3],
            input: [2, 2]
        }
    );
    let err = SimpleCnnConfig::new()
        .with_image_size(27)
        .init::<B>(&device)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "layer `3 (pool 2)`: 2x2 windows with stride 2x2 do not tile the 25x25 input exactly"
    );
    // Without exact tiling the last row and column are dropped, like Burn's pool does.
    let loose = SimpleCnnConfig::new()
        .with_image_size(27)
        .with_exact_pooling(false);
    assert_eq!(
        loose
            .init::<B>(&device)
            .unwrap()
            .forward(images(1, 27))
            .dims(),
        [1, 10]
    );

    let err = SimpleCnnConfig::new()
        .with_filters(0)
        .init::<B>(&device)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "layer `1 (conv 0 3x3)`: filters must be positive, got a zero"
    );
    let err = LeNetConfig::new()
        .with_image_size(10)
        .init::<B>(&device)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "layer `6 (pool 2)`: the 2x2 window is larger than its 1x1 (padded) input"
    );
    let err = LeNetConfig::new()
        .with_channels([8, 0])
        .init::<B>(&device)
        .unwrap_err();
    assert!(
        err.to_string().starts_with("layer `4 (conv 0 5x5)`"),
        "{err}"
    );
    let err = MlpConfig::new(4, vec![8, 0], 1)
        .init::<B>(&device)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "layer `hidden2`: width must be positive, got a zero"
    );
}

#[test]
fn model_config_round_trips_through_json() {
    let config = ImageModelConfig::Mlp(
        MlpConfig::new(784, vec![64], 10).with_activation(Activation::SigmoidGain { gain: 2.5 }),
    );
    let json = serde_json::to_string(&config).unwrap();
    assert!(json.contains(r#""kind":"mlp""#), "{json}");
    let back: ImageModelConfig = serde_json::from_str(&json).unwrap();
    assert_eq!(serde_json::to_string(&back).unwrap(), json);
    let lenet = ImageModelConfig::Lenet(LeNetConfig::new().with_hidden(32));
    let json = serde_json::to_string(&lenet).unwrap();
    assert!(json.contains(r#""kind":"lenet""#) && json.contains(r#""channels":[32,64]"#));
    // One flat object, as the configs of earlier runs were saved.
    assert!(
        json.contains(r#""hidden":32,"image_size":28"#) && !json.contains("network"),
        "{json}"
    );
    let ImageModelConfig::Lenet(back) = serde_json::from_str(&json).unwrap() else {
        panic!("wrong variant from {json}")
    };
    assert_eq!((back.network.hidden, back.network.channels), (32, [32, 64]));
}
