//! A CNN's layers checked in order before a weight is made: each layer's output shape and
//! parameters, the first layer that does not fit named by its position, and the table a run
//! prints first, walking the network's steps (a residual block its fork, its layers and its
//! join) as building it does.

use std::fmt;

use cubenet_kernels::NO_ARGMAX;

use super::cnn_config::{Step, steps};
use super::geometry::{check_nonzero, conv_output, pool_output};
use super::residual::shortcut_stride;
use super::{CnnConfig, ConvSpec, FeatureShape, LayerSpec, ModelError, Shortcut, Width};

/// One step of a checked [`CnnConfig`].
#[derive(Debug, Clone, PartialEq)]
pub struct LayerSummary {
    /// Where the run file lists it: `3`, or `3.2` inside a residual block.
    pub position: String,
    pub step: Step,
    /// Its output for one image.
    pub output: FeatureShape,
    /// Parameters as Burn's `num_params` counts them: weights and biases, and batch
    /// norm's scale, shift, running mean and running variance.
    pub params: usize,
}

/// The checked network, step by step; its `Display` is the table a run prints first.
#[derive(Debug, Clone, PartialEq)]
pub struct CnnSummary {
    pub input: FeatureShape,
    pub layers: Vec<LayerSummary>,
}

impl CnnSummary {
    /// The activations between the steps: the input, then each step's output.
    pub fn shapes(&self) -> Vec<FeatureShape> {
        std::iter::once(self.input)
            .chain(self.layers.iter().map(|layer| layer.output))
            .collect()
    }

    /// Parameters of the whole network.
    pub fn params(&self) -> usize {
        self.layers.iter().map(|layer| layer.params).sum()
    }
}

/// Columns `layer`, `output`, `params`, the layers numbered as error messages number them.
impl fmt::Display for CnnSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digits = self
            .layers
            .iter()
            .map(|layer| layer.position.len())
            .max()
            .unwrap_or(0);
        let mut rows = vec![
            ["layer".to_string(), "output".into(), "params".into()],
            ["input".into(), self.input.to_string(), String::new()],
        ];
        rows.extend(self.layers.iter().map(|layer| {
            [
                format!("{:>digits$} {}", layer.position, layer.step),
                layer.output.to_string(),
                layer.params.to_string(),
            ]
        }));
        rows.push(["total".into(), String::new(), self.params().to_string()]);
        let [name, output, params] =
            [0, 1, 2].map(|column| rows.iter().map(|row| row[column].len()).max().unwrap_or(0));
        for [layer, shape, count] in &rows {
            let line = format!("{layer:<name$}  {shape:<output$}  {count:>params$}");
            writeln!(f, "{}", line.trim_end())?;
        }
        Ok(())
    }
}

/// How errors and summaries name a step: its position, as a run file lists it.
pub(super) fn step_name(position: &str, step: &Step) -> String {
    format!("{position} ({step})")
}

const FLATTENED: &str = "it needs feature maps, and a dense layer before it has flattened them";

impl CnnConfig {
    /// Checks every layer's shape in order, naming the first that does not fit; returns
    /// each step's output and parameters.
    pub fn summary(&self) -> Result<CnnSummary, ModelError> {
        check_nonzero("input", "image size", self.input)?;
        check_nonzero("output", "classes", [self.classes])?;
        let input = FeatureShape::Maps(self.input);
        let steps = steps(&self.layers);
        let mut total = 0usize;
        let mut shape = input;
        // The inputs of the residual blocks entered and not yet joined.
        let mut kept = Vec::new();
        let mut layers = Vec::with_capacity(steps.len());
        for (index, (position, step)) in steps.iter().enumerate() {
            let name = step_name(position, step);
            let refuse = |problem: String| ModelError::Residual {
                layer: name.clone(),
                problem,
            };
            let (output, params) = match step {
                Step::Layer(layer) => {
                    let last = index + 1 == steps.len();
                    let output = self.output(&name, layer, shape, last)?;
                    (output, layer_params(layer, shape, output))
                }
                Step::Fork(_) => {
                    if matches!(steps.get(index + 1), Some((_, Step::Join(_)))) {
                        return Err(refuse("a residual block needs layers".into()));
                    }
                    kept.push(shape);
                    (shape, Some(0))
                }
                &Step::Join(shortcut) => {
                    let from = kept.pop().expect("every join follows its fork");
                    let params = join(shortcut, from, shape).map_err(refuse)?;
                    (shape, Some(params))
                }
            };
            let Some(params) = params.filter(|&p| total.checked_add(p).is_some()) else {
                return Err(ModelError::Layer {
                    layer: name,
                    problem: "it has more weights than can be counted",
                });
            };
            total += params;
            layers.push(LayerSummary {
                position: position.clone(),
                step: step.clone(),
                output,
                params,
            });
            shape = output;
        }
        match steps.last() {
            None => Err(ModelError::NoLayers),
            Some((_, Step::Layer(LayerSpec::Dense(_))))
                if shape == FeatureShape::Flat(self.classes) =>
            {
                Ok(CnnSummary { input, layers })
            }
            Some((position, last)) => Err(ModelError::NoLogits {
                layer: step_name(position, last),
                output: shape,
                classes: self.classes,
            }),
        }
    }

    /// Refuses a pool whose windows do not tile its input exactly, where a remainder would
    /// otherwise be dropped (the presets' `exact_pooling`).
    pub fn check_exact_pooling(&self) -> Result<(), ModelError> {
        let summary = self.summary()?;
        let mut shape = summary.input;
        for layer in &summary.layers {
            if let (
                Step::Layer(
                    LayerSpec::Pool { window, stride } | LayerSpec::AvgPool { window, stride },
                ),
                FeatureShape::Maps([_, h, w]),
            ) = (&layer.step, shape)
            {
                let name = step_name(&layer.position, &layer.step);
                pool_output(&name, [h, w], [*window; 2], [*stride; 2], true)?;
            }
            shape = layer.output;
        }
        Ok(())
    }

    /// The output of `layer` (named `name`) for an `input`-shaped activation.
    fn output(
        &self,
        name: &str,
        layer: &LayerSpec,
        input: FeatureShape,
        last: bool,
    ) -> Result<FeatureShape, ModelError> {
        let refuse = |problem| ModelError::Layer {
            layer: name.into(),
            problem,
        };
        let maps = || match input {
            FeatureShape::Maps(maps) => Ok(maps),
            FeatureShape::Flat(_) => Err(refuse(FLATTENED)),
        };
        match *layer {
            LayerSpec::Conv(ConvSpec {
                filters,
                kernel,
                stride,
                padding,
                ..
            }) => {
                let [_, h, w] = maps()?;
                check_nonzero(name, "filters", [filters])?;
                let [h, w] = conv_output(name, [h, w], [kernel; 2], [stride; 2], [padding; 2])?;
                if filters
                    .checked_mul(h)
                    .and_then(|v| v.checked_mul(w))
                    .is_none()
                {
                    return Err(refuse("its output has more values than can be counted"));
                }
                Ok(FeatureShape::Maps([filters, h, w]))
            }
            LayerSpec::Pool { window, stride } | LayerSpec::AvgPool { window, stride } => {
                let [c, h, w] = maps()?;
                check_nonzero(name, "pool window", [window])?;
                if matches!(layer, LayerSpec::Pool { .. }) && window * window >= NO_ARGMAX as usize
                {
                    return Err(refuse(
                        "pool windows are at most 15x15: the pool stores each output's argmax \
                         in a byte",
                    ));
                }
                let [h, w] = pool_output(name, [h, w], [window; 2], [stride; 2], false)?;
                Ok(FeatureShape::Maps([c, h, w]))
            }
            LayerSpec::GlobalPool(_) => {
                let [c, _, _] = maps()?;
                Ok(FeatureShape::Maps([c, 1, 1]))
            }
            LayerSpec::Dense(width) => {
                let outputs = match width {
                    Width::Units(units) => units,
                    Width::Classes if last => self.classes,
                    Width::Classes => {
                        return Err(refuse(
                            "`dense = \"classes\"` gives the logits, so it must be the last layer",
                        ));
                    }
                };
                check_nonzero(name, "width", [outputs])?;
                Ok(FeatureShape::Flat(outputs))
            }
            LayerSpec::Dropout(probability) if !(0.0..1.0).contains(&probability) => Err(refuse(
                "the dropout probability must be at least 0 and less than 1",
            )),
            LayerSpec::BatchNorm(norm) if !(0.0..=1.0).contains(&norm.momentum) => Err(refuse(
                "batch norm's momentum is the weight of each batch: from 0 to 1",
            )),
            LayerSpec::BatchNorm(norm) if !(norm.eps > 0.0 && norm.eps.is_finite()) => {
                Err(refuse("batch norm's eps must be positive"))
            }
            LayerSpec::Dropout(_)
            | LayerSpec::Relu
            | LayerSpec::Gelu
            | LayerSpec::Silu
            | LayerSpec::BatchNorm(_) => Ok(input),
            LayerSpec::Residual(_) => unreachable!("residual blocks are opened into steps"),
        }
    }
}

/// Weights and biases of `layer` from `input` to `output`; `None` past `usize`.
fn layer_params(layer: &LayerSpec, input: FeatureShape, output: FeatureShape) -> Option<usize> {
    match layer {
        LayerSpec::Conv(conv) => conv.kernel.checked_mul(conv.kernel).and_then(|area| {
            let patch = input
                .features()
                .checked_mul(area)?
                .checked_add(conv.bias as usize)?;
            conv.filters.checked_mul(patch)
        }),
        LayerSpec::Dense(_) => (input.values() + 1).checked_mul(output.values()),
        LayerSpec::BatchNorm(norm) => input
            .features()
            .checked_mul(if norm.affine { 4 } else { 2 }),
        _ => Some(0),
    }
}

/// The parameters of the `shortcut` from a block's input `from` to its layers' output
/// `to`, or why the two cannot be added.
fn join(shortcut: Shortcut, from: FeatureShape, to: FeatureShape) -> Result<usize, String> {
    let (FeatureShape::Maps(from), FeatureShape::Maps(to)) = (from, to) else {
        return Err(
            "a residual block works on feature maps: a dense layer cannot be in one".into(),
        );
    };
    let turns = format!(
        "its layers turn {} into {}",
        FeatureShape::Maps(from),
        FeatureShape::Maps(to)
    );
    match shortcut {
        Shortcut::Identity if from == to => Ok(0),
        Shortcut::Identity => Err(format!(
            "{turns}, and an identity shortcut keeps the shape: use shortcut = \"conv\" or \
             \"option_a\""
        )),
        _ if shortcut_stride(from, to).is_none() => Err(format!(
            "{turns}, which no stride of a shortcut gives: a block may only shrink its maps by \
             a whole stride"
        )),
        Shortcut::OptionA if to[0] < from[0] => Err(format!(
            "{turns}: option_a adds zero channels and cannot remove any; use shortcut = \"conv\""
        )),
        Shortcut::OptionA => Ok(0),
        Shortcut::Conv => Ok(from[0] * to[0] + 4 * to[0]),
    }
}
