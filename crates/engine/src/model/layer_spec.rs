//! The layers of a [`CnnConfig`](super::CnnConfig) as a run file writes them: a list of
//! inline tables, one key naming the layer and its options beside it.
//!
//! ```toml
//! layers = [
//!   { conv = 32, kernel = 3, padding = 1 }, { relu = true }, { pool = 2 },
//!   { dense = 128 }, { relu = true }, { dropout = 0.25 }, { dense = "classes" },
//! ]
//! ```
//!
//! Parsing refuses unknown keys, tables naming no layer or two, and options that belong to
//! another layer, naming the layer's position (from 1) in the list. Sizes are checked when
//! the network is built, where the input's shape is known.

use std::fmt;
use std::ops::Deref;

use serde::de::{self, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use super::layer_options::{ConvSpec, GlobalPool, NormSpec, Shortcut, Width};

/// A residual block: its `layers` run on the input, and the `shortcut` of the input is
/// added to their output.
#[derive(Debug, Clone, PartialEq)]
pub struct ResidualSpec {
    pub layers: LayerSpecs,
    pub shortcut: Shortcut,
}

/// One layer of a CNN, input side first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "LayerTable", try_from = "LayerTable")]
pub enum LayerSpec {
    /// `{ conv = 32, kernel = 3, stride = 1, padding = 1, bias = true }`; all but `conv`
    /// optional ([`ConvSpec`]'s defaults).
    Conv(ConvSpec),
    /// `{ pool = 2 }`: max-pool over `window`×`window` windows, moved by `stride` (default:
    /// the window, so that windows tile); a remainder too small for a window is dropped.
    Pool { window: usize, stride: usize },
    /// `{ avg_pool = 2 }`: the mean of each window, windows as `pool` places them.
    AvgPool { window: usize, stride: usize },
    /// `{ global_pool = "avg" }` or `"max"`: each channel's map to one value (`c×1×1`).
    GlobalPool(GlobalPool),
    /// `{ relu = true }`.
    Relu,
    /// `{ gelu = true }`: x·Φ(x) with the exact normal CDF (not the tanh approximation).
    Gelu,
    /// `{ silu = true }`: x·σ(x).
    Silu,
    /// `{ dense = 128 }` or `{ dense = "classes" }`; the feature maps are flattened before
    /// the first dense layer.
    Dense(Width),
    /// `{ dropout = 0.25 }`: zeroes each value with this probability in training.
    Dropout(f64),
    /// `{ batch_norm = true, momentum = 0.1, eps = 1e-5, affine = true }`: batch
    /// normalization over the channels of feature maps, or over the features after a dense
    /// layer; the options are optional ([`NormSpec`]'s defaults).
    BatchNorm(NormSpec),
    /// `{ residual = [ ...layers... ], shortcut = "identity" }` (or `"conv"`,
    /// `"option_a"`): see [`Shortcut`].
    Residual(ResidualSpec),
}

impl LayerSpec {
    /// A max-pool whose `window`×`window` windows tile the input (stride = window).
    pub fn pool(window: usize) -> Self {
        LayerSpec::Pool {
            window,
            stride: window,
        }
    }

    /// This layer and every layer inside it, as [`MAX_LAYERS`] counts them.
    pub fn count(&self) -> usize {
        match self {
            LayerSpec::Residual(block) => {
                1 + block.layers.iter().map(LayerSpec::count).sum::<usize>()
            }
            _ => 1,
        }
    }
}

/// Short and unambiguous, as error messages and summaries name the layer: `conv 32 3x3,
/// padding 1`, `pool 2`, `dense classes`.
impl fmt::Display for LayerSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pool = |f: &mut fmt::Formatter<'_>, kind, window, stride| {
            write!(f, "{kind} {window}")?;
            if stride != window {
                write!(f, ", stride {stride}")?;
            }
            Ok(())
        };
        match self {
            LayerSpec::Conv(conv) => {
                let ConvSpec {
                    filters, kernel, ..
                } = conv;
                write!(f, "conv {filters} {kernel}x{kernel}")?;
                if conv.stride != 1 {
                    write!(f, ", stride {}", conv.stride)?;
                }
                if conv.padding != 0 {
                    write!(f, ", padding {}", conv.padding)?;
                }
                if !conv.bias {
                    f.write_str(", no bias")?;
                }
                Ok(())
            }
            &LayerSpec::Pool { window, stride } => pool(f, "pool", window, stride),
            &LayerSpec::AvgPool { window, stride } => pool(f, "avg_pool", window, stride),
            LayerSpec::GlobalPool(GlobalPool::Avg) => f.write_str("global_pool avg"),
            LayerSpec::GlobalPool(GlobalPool::Max) => f.write_str("global_pool max"),
            LayerSpec::Relu => f.write_str("relu"),
            LayerSpec::Gelu => f.write_str("gelu"),
            LayerSpec::Silu => f.write_str("silu"),
            LayerSpec::Dense(width) => write!(f, "dense {width}"),
            LayerSpec::Dropout(probability) => write!(f, "dropout {probability}"),
            LayerSpec::BatchNorm(norm) => {
                f.write_str("batch_norm")?;
                let defaults = NormSpec::new();
                if norm.momentum != defaults.momentum {
                    write!(f, ", momentum {}", norm.momentum)?;
                }
                if norm.eps != defaults.eps {
                    write!(f, ", eps {}", norm.eps)?;
                }
                if !norm.affine {
                    f.write_str(", not affine")?;
                }
                Ok(())
            }
            LayerSpec::Residual(block) => write!(f, "residual, shortcut {}", block.shortcut),
        }
    }
}

/// A layer as an inline table: every key any layer has, each optional; [`LayerSpec`]'s
/// conversions decide which combinations make a layer.
#[derive(Default, Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a layer such as { conv = 32 } or { relu = true }"
)]
struct LayerTable {
    #[serde(skip_serializing_if = "Option::is_none")]
    conv: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kernel: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pool: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    avg_pool: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    global_pool: Option<GlobalPool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stride: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    padding: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bias: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    relu: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gelu: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    silu: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dense: Option<Width>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dropout: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    batch_norm: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    momentum: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    eps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    affine: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    residual: Option<LayerSpecs>,
    #[serde(skip_serializing_if = "Option::is_none")]
    shortcut: Option<Shortcut>,
}

const KINDS: &str = "conv, pool, avg_pool, global_pool, relu, gelu, silu, dense, dropout, \
                     batch_norm or residual";

impl TryFrom<LayerTable> for LayerSpec {
    type Error = String;

    fn try_from(table: LayerTable) -> Result<Self, String> {
        let kinds = [
            ("conv", table.conv.is_some()),
            ("pool", table.pool.is_some()),
            ("avg_pool", table.avg_pool.is_some()),
            ("global_pool", table.global_pool.is_some()),
            ("relu", table.relu.is_some()),
            ("gelu", table.gelu.is_some()),
            ("silu", table.silu.is_some()),
            ("dense", table.dense.is_some()),
            ("dropout", table.dropout.is_some()),
            ("batch_norm", table.batch_norm.is_some()),
            ("residual", table.residual.is_some()),
        ];
        let named: Vec<&str> = kinds
            .iter()
            .filter(|(_, given)| *given)
            .map(|(kind, _)| *kind)
            .collect();
        let kind = match named[..] {
            [kind] => kind,
            [] => return Err(format!("no layer named: give one of {KINDS}")),
            _ => {
                return Err(format!(
                    "one layer per table, this one names {}",
                    named.join(" and ")
                ));
            }
        };
        let windows = ["conv", "pool", "avg_pool"].contains(&kind);
        let options = [
            ("kernel", table.kernel.is_some(), kind == "conv"),
            ("stride", table.stride.is_some(), windows),
            ("padding", table.padding.is_some(), kind == "conv"),
            ("bias", table.bias.is_some(), kind == "conv"),
            ("momentum", table.momentum.is_some(), kind == "batch_norm"),
            ("eps", table.eps.is_some(), kind == "batch_norm"),
            ("affine", table.affine.is_some(), kind == "batch_norm"),
            ("shortcut", table.shortcut.is_some(), kind == "residual"),
        ];
        if let Some((option, ..)) = options.iter().find(|(_, given, fits)| *given && !fits) {
            return Err(format!("`{option}` is not an option of a {kind} layer"));
        }
        let enabled = |on: bool, spec: LayerSpec| match on {
            true => Ok(spec),
            false => Err(format!("`{kind} = false`: leave the layer out instead")),
        };
        match table {
            LayerTable {
                conv: Some(filters),
                kernel,
                stride,
                padding,
                bias,
                ..
            } => {
                let defaults = ConvSpec::new(filters);
                Ok(LayerSpec::Conv(ConvSpec {
                    filters,
                    kernel: kernel.unwrap_or(defaults.kernel),
                    stride: stride.unwrap_or(defaults.stride),
                    padding: padding.unwrap_or(defaults.padding),
                    bias: bias.unwrap_or(defaults.bias),
                }))
            }
            LayerTable {
                pool: Some(window),
                stride,
                ..
            } => Ok(LayerSpec::Pool {
                window,
                stride: stride.unwrap_or(window),
            }),
            LayerTable {
                avg_pool: Some(window),
                stride,
                ..
            } => Ok(LayerSpec::AvgPool {
                window,
                stride: stride.unwrap_or(window),
            }),
            LayerTable {
                global_pool: Some(pool),
                ..
            } => Ok(LayerSpec::GlobalPool(pool)),
            LayerTable {
                dense: Some(width), ..
            } => Ok(LayerSpec::Dense(width)),
            LayerTable {
                dropout: Some(probability),
                ..
            } => Ok(LayerSpec::Dropout(probability)),
            LayerTable {
                residual: Some(layers),
                shortcut,
                ..
            } => Ok(LayerSpec::Residual(ResidualSpec {
                layers,
                shortcut: shortcut.unwrap_or_default(),
            })),
            LayerTable { relu: Some(on), .. } => enabled(on, LayerSpec::Relu),
            LayerTable { gelu: Some(on), .. } => enabled(on, LayerSpec::Gelu),
            LayerTable { silu: Some(on), .. } => enabled(on, LayerSpec::Silu),
            LayerTable {
                batch_norm,
                momentum,
                eps,
                affine,
                ..
            } => {
                let defaults = NormSpec::new();
                let norm = NormSpec {
                    momentum: momentum.unwrap_or(defaults.momentum),
                    eps: eps.unwrap_or(defaults.eps),
                    affine: affine.unwrap_or(defaults.affine),
                };
                enabled(batch_norm == Some(true), LayerSpec::BatchNorm(norm))
            }
        }
    }
}

impl From<LayerSpec> for LayerTable {
    fn from(spec: LayerSpec) -> Self {
        let on = Some(true);
        match spec {
            LayerSpec::Conv(conv) => LayerTable {
                conv: Some(conv.filters),
                kernel: Some(conv.kernel),
                stride: Some(conv.stride),
                padding: Some(conv.padding),
                bias: Some(conv.bias),
                ..Default::default()
            },
            LayerSpec::Pool { window, stride } => LayerTable {
                pool: Some(window),
                stride: Some(stride),
                ..Default::default()
            },
            LayerSpec::AvgPool { window, stride } => LayerTable {
                avg_pool: Some(window),
                stride: Some(stride),
                ..Default::default()
            },
            LayerSpec::GlobalPool(pool) => LayerTable {
                global_pool: Some(pool),
                ..Default::default()
            },
            LayerSpec::Relu => LayerTable {
                relu: on,
                ..Default::default()
            },
            LayerSpec::Gelu => LayerTable {
                gelu: on,
                ..Default::default()
            },
            LayerSpec::Silu => LayerTable {
                silu: on,
                ..Default::default()
            },
            LayerSpec::Dense(width) => LayerTable {
                dense: Some(width),
                ..Default::default()
            },
            LayerSpec::Dropout(probability) => LayerTable {
                dropout: Some(probability),
                ..Default::default()
            },
            LayerSpec::BatchNorm(norm) => LayerTable {
                batch_norm: on,
                momentum: Some(norm.momentum),
                eps: Some(norm.eps),
                affine: Some(norm.affine),
                ..Default::default()
            },
            LayerSpec::Residual(block) => LayerTable {
                residual: Some(block.layers),
                shortcut: Some(block.shortcut),
                ..Default::default()
            },
        }
    }
}

/// A CNN's layers, input side first. A list of its own so that a bad layer's parse error
/// names its position: serde's lists do not, and a run file read through `toml::Value`
/// loses the line numbers.
/// The most layers a CNN may have, those inside residual blocks counted: more is a mistake
/// (a generated file, a loop), and its table alone would fill the terminal.
pub const MAX_LAYERS: usize = 1000;

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct LayerSpecs(pub Vec<LayerSpec>);

impl Deref for LayerSpecs {
    type Target = [LayerSpec];

    fn deref(&self) -> &[LayerSpec] {
        &self.0
    }
}

impl From<Vec<LayerSpec>> for LayerSpecs {
    fn from(layers: Vec<LayerSpec>) -> Self {
        LayerSpecs(layers)
    }
}

impl<'de> Deserialize<'de> for LayerSpecs {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ListVisitor;

        impl<'de> Visitor<'de> for ListVisitor {
            type Value = LayerSpecs;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of layers such as [{ conv = 32 }, { dense = \"classes\" }]")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<LayerSpecs, A::Error> {
                let mut layers = Vec::new();
                let mut counted = 0;
                loop {
                    let position = layers.len() + 1;
                    match seq.next_element::<LayerSpec>() {
                        Ok(Some(layer)) => {
                            counted += layer.count();
                            if counted > MAX_LAYERS {
                                return Err(de::Error::custom(format_args!(
                                    "more than {MAX_LAYERS} layers, those inside residual blocks \
                                     counted: a CNN has at most that many"
                                )));
                            }
                            layers.push(layer);
                        }
                        Ok(None) => return Ok(LayerSpecs(layers)),
                        Err(err) => {
                            // One line: TOML's errors end with a newline, and name the key
                            // on a line of their own.
                            let err = err.to_string().trim_end().replace('\n', " ");
                            return Err(de::Error::custom(format_args!("layer {position}: {err}")));
                        }
                    }
                }
            }
        }

        deserializer.deserialize_seq(ListVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, Serialize)]
    struct File {
        layers: LayerSpecs,
    }

    fn parse(layers: &str) -> Result<LayerSpecs, String> {
        toml::from_str::<File>(&format!("layers = [{layers}]"))
            .map(|file| file.layers)
            .map_err(|err| err.message().to_string())
    }

    fn parse_err(layers: &str) -> String {
        parse(layers).expect_err(layers)
    }

    #[test]
    fn a_cifar_shaped_layer_list_parses() {
        let layers = parse(
            r#"
            { conv = 32, kernel = 3, padding = 1 }, { relu = true }, { pool = 2 },
            { conv = 64, kernel = 3, padding = 1, stride = 1 }, { relu = true }, { pool = 2 },
            { dense = 128 }, { relu = true }, { dropout = 0.25 }, { batch_norm = true },
            { dense = "classes" },
            "#,
        )
        .unwrap();
        let conv = |filters| LayerSpec::Conv(ConvSpec::new(filters).with_padding(1));
        assert_eq!(
            layers.0,
            vec![
                conv(32),
                LayerSpec::Relu,
                LayerSpec::pool(2),
                conv(64),
                LayerSpec::Relu,
                LayerSpec::pool(2),
                LayerSpec::Dense(Width::Units(128)),
                LayerSpec::Relu,
                LayerSpec::Dropout(0.25),
                LayerSpec::BatchNorm(NormSpec::new()),
                LayerSpec::Dense(Width::Classes),
            ]
        );
    }

    #[test]
    fn options_default() {
        let layers = parse("{ conv = 8 }, { pool = 3, stride = 2 }, { dropout = 0 }").unwrap();
        assert_eq!(
            layers.0,
            vec![
                LayerSpec::Conv(ConvSpec {
                    filters: 8,
                    kernel: 3,
                    stride: 1,
                    padding: 0,
                    bias: true
                }),
                LayerSpec::Pool {
                    window: 3,
                    stride: 2
                },
                LayerSpec::Dropout(0.0),
            ]
        );
    }

    #[test]
    fn serializing_fills_in_the_defaults_and_parses_back() {
        let layers =
            parse(r#"{ conv = 8, stride = 2 }, { pool = 2 }, { dense = "classes" }"#).unwrap();
        let text = toml::to_string(&File {
            layers: layers.clone(),
        })
        .unwrap();
        assert!(
            text.contains("conv = 8")
                && text.contains("kernel = 3")
                && text.contains("padding = 0"),
            "{text}"
        );
        assert_eq!(parse_text(&text), layers);
    }

    fn parse_text(text: &str) -> LayerSpecs {
        toml::from_str::<File>(text).unwrap().layers
    }

    #[test]
    fn bad_layers_are_named_by_position() {
        let cases = [
            (
                "{ relu = true }, { conv = 8, kernal = 3 }",
                "layer 2: unknown field `kernal`, expected one of",
            ),
            (
                "{ relu = true }, {}",
                "layer 2: no layer named: give one of conv, pool",
            ),
            (
                "{ conv = 8, pool = 2 }",
                "layer 1: one layer per table, this one names conv and pool",
            ),
            (
                "{ pool = 2, padding = 1 }",
                "layer 1: `padding` is not an option of a pool layer",
            ),
            (
                "{ dense = 10, stride = 2 }",
                "layer 1: `stride` is not an option of a dense layer",
            ),
            (
                "{ relu = false }",
                "layer 1: `relu = false`: leave the layer out instead",
            ),
            (
                "{ relu = true }, { relu = true }, { batch_norm = false }",
                "layer 3: `batch_norm = false`: leave the layer out instead",
            ),
            (
                r#"{ dense = "all" }"#,
                r#"layer 1: invalid value: string "all", expected a number of outputs or "classes""#,
            ),
            (
                "{ dense = -3 }",
                r#"layer 1: invalid value: integer `-3`, expected a number of outputs or "classes""#,
            ),
            ("{ conv = -3 }", "layer 1: invalid value: integer `-3`"),
            (
                "{ conv = 8 }, 5",
                "layer 2: invalid type: integer `5`, expected a layer such as { conv = 32 }",
            ),
        ];
        for (layers, expected) in cases {
            let err = parse_err(layers);
            assert!(err.starts_with(expected), "{layers}: {err}");
        }
    }

    #[test]
    fn a_bad_layer_is_named_through_toml_value_too() {
        // How the run file reads its sections.
        let value: toml::Value =
            toml::from_str("layers = [{ relu = true }, { pool = 2, kernel = 2 }]").unwrap();
        let err = value.try_into::<File>().unwrap_err();
        assert!(
            err.message()
                .starts_with("layer 2: `kernel` is not an option of a pool layer"),
            "{err}"
        );
    }

    #[test]
    fn display_names_the_layer_briefly() {
        let shown: Vec<String> = parse(
            r#"{ conv = 32, padding = 1 }, { conv = 8, kernel = 5, stride = 2 }, { pool = 2 },
            { pool = 3, stride = 2 }, { dense = 128 }, { dense = "classes" }, { dropout = 0.5 },
            { batch_norm = true }, { relu = true }"#,
        )
        .unwrap()
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(
            shown,
            [
                "conv 32 3x3, padding 1",
                "conv 8 5x5, stride 2",
                "pool 2",
                "pool 3, stride 2",
                "dense 128",
                "dense classes",
                "dropout 0.5",
                "batch_norm",
                "relu"
            ]
        );
    }

    #[test]
    fn todays_layers_parse_with_their_options_and_print_back() {
        let layers = parse(
            r#"{ conv = 8, bias = false }, { batch_norm = true, momentum = 0.6, eps = 1e-3,
               affine = false }, { gelu = true }, { silu = true }, { avg_pool = 3, stride = 2 },
               { global_pool = "max" },
               { residual = [{ conv = 8, padding = 1 }, { relu = true }], shortcut = "option_a" }"#,
        )
        .unwrap();
        assert_eq!(
            layers.0,
            vec![
                LayerSpec::Conv(ConvSpec::new(8).with_bias(false)),
                LayerSpec::BatchNorm(NormSpec {
                    momentum: 0.6,
                    eps: 1e-3,
                    affine: false
                }),
                LayerSpec::Gelu,
                LayerSpec::Silu,
                LayerSpec::AvgPool {
                    window: 3,
                    stride: 2
                },
                LayerSpec::GlobalPool(GlobalPool::Max),
                LayerSpec::Residual(ResidualSpec {
                    layers: vec![
                        LayerSpec::Conv(ConvSpec::new(8).with_padding(1)),
                        LayerSpec::Relu
                    ]
                    .into(),
                    shortcut: Shortcut::OptionA
                }),
            ]
        );
        let text = toml::to_string(&File {
            layers: layers.clone(),
        })
        .unwrap();
        assert_eq!(parse_text(&text), layers);
        let cases = [
            (
                "{ relu = true, bias = false }",
                "layer 1: `bias` is not an option of a relu layer",
            ),
            (
                "{ conv = 3, momentum = 0.5 }",
                "layer 1: `momentum` is not an option of a conv layer",
            ),
            (
                r#"{ global_pool = "mean" }"#,
                "layer 1: unknown variant `mean`, expected `avg` or `max`",
            ),
            (
                r#"{ residual = [{ conv = 4 }], shortcut = "B" }"#,
                "layer 1: unknown variant `B`, expected one of `identity`, `conv`, `option_a`",
            ),
            (
                r#"{ residual = [{ relu = true }, { conv = 4, pool = 2 }] }"#,
                "layer 1: layer 2: one layer per table, this one names conv and pool",
            ),
            (
                r#"{ dense = 4, shortcut = "conv" }"#,
                "layer 1: `shortcut` is not an option of a dense layer",
            ),
        ];
        for (layers, expected) in cases {
            let err = parse_err(layers);
            assert!(err.starts_with(expected), "{layers}: {err}");
        }
    }
}
