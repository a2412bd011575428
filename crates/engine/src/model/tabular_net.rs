//! The tabular network: an [`Mlp`] whose output layer and loss follow the task
//! (regression, binary or multi-class classification), as one burn-train step.

use burn::backend::NdArray;
use burn::nn::loss::{MseLoss, Reduction};
use burn::prelude::*;
use burn::tensor::Transaction;
use burn::train::metric::{AccuracyInput, Adaptor, ItemLazy, LossInput};
use burn::train::{InferenceStep, TrainOutput, TrainStep};
use cubenet_kernels::{AutodiffKernelBackend, KernelBackend, cross_entropy};
use serde::{Deserialize, Serialize};

use super::Mlp;
use crate::data::RowBatch;

/// What a tabular run predicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Task {
    /// Real-valued targets (one or more columns): MSE loss.
    Regression,
    /// One 0/1 target column: a sigmoid output and binary cross-entropy.
    Binary,
    /// One column of class indices 0..k: softmax cross-entropy.
    Multiclass,
}

impl Task {
    /// Whether the task has classes (and an accuracy).
    pub fn is_classification(self) -> bool {
        self != Task::Regression
    }
}

/// The network and the task it is trained for.
#[derive(Module, Debug)]
pub struct TabularNet<B: Backend> {
    pub mlp: Mlp<B>,
    #[module(skip)]
    pub task: Task,
}

/// One step's loss and what the metrics need.
#[derive(Debug, Clone)]
pub struct TabularOutput<B: Backend> {
    pub loss: Tensor<B, 1>,
    /// Classification: one score per class, highest for the predicted one (`[n, classes]`).
    /// Regression: the predicted values.
    pub scores: Tensor<B, 2>,
    /// Classification: the true class of each row; regression: none.
    pub classes: Option<Tensor<B, 1, Int>>,
}

impl<B: KernelBackend> TabularNet<B> {
    /// Raw outputs `[n, outputs]`: values (regression) or logits (classification).
    pub fn forward(&self, inputs: Tensor<B, 2>) -> Tensor<B, 2> {
        self.mlp.forward(inputs)
    }

    /// What the user reads: values (regression), the probability of class 1 (binary) or
    /// the probability of each class (multi-class).
    pub fn predict(&self, inputs: Tensor<B, 2>) -> Tensor<B, 2> {
        let raw = self.forward(inputs);
        match self.task {
            Task::Regression => raw,
            Task::Binary => burn::tensor::activation::sigmoid(raw),
            Task::Multiclass => burn::tensor::activation::softmax(raw, 1),
        }
    }

    /// The task's loss on `batch`. Classification takes cubenet's softmax cross-entropy,
    /// not Burn's losses: their backward on NdArray divides through Burn's `recip`, which
    /// approximates the reciprocal on the vectorized elements only, and which elements those
    /// are depends on where the buffer lies in memory, so seeded runs would drift apart.
    pub fn forward_loss(&self, batch: RowBatch<B>) -> TabularOutput<B> {
        let raw = self.forward(batch.inputs);
        match self.task {
            Task::Regression => TabularOutput {
                loss: MseLoss::new().forward(raw.clone(), batch.targets, Reduction::Mean),
                scores: raw,
                classes: None,
            },
            Task::Binary => {
                let labels = batch.targets.int().flatten::<1>(0, 1);
                // Scores (0, logit): the argmax is class 1 exactly when σ(logit) > 0.5, and
                // their softmax cross-entropy is the binary cross-entropy of the logit.
                let scores = Tensor::cat(vec![raw.zeros_like(), raw], 1);
                TabularOutput {
                    loss: cross_entropy(scores.clone(), labels.clone()),
                    scores,
                    classes: Some(labels),
                }
            }
            Task::Multiclass => {
                let labels = batch.targets.int().flatten::<1>(0, 1);
                let loss = cross_entropy(raw.clone(), labels.clone());
                TabularOutput {
                    loss,
                    scores: raw,
                    classes: Some(labels),
                }
            }
        }
    }
}

impl<B: AutodiffKernelBackend> TrainStep for TabularNet<B> {
    type Input = RowBatch<B>;
    type Output = TabularOutput<B>;

    fn step(&self, batch: RowBatch<B>) -> TrainOutput<TabularOutput<B>> {
        let item = self.forward_loss(batch);
        TrainOutput::new(self, item.loss.backward(), item)
    }
}

impl<B: KernelBackend> InferenceStep for TabularNet<B> {
    type Input = RowBatch<B>;
    type Output = TabularOutput<B>;

    fn step(&self, batch: RowBatch<B>) -> TabularOutput<B> {
        self.forward_loss(batch)
    }
}

impl<B: Backend> ItemLazy for TabularOutput<B> {
    type ItemSync = TabularOutput<NdArray>;

    /// One device read for all of the step's tensors.
    fn sync(self) -> TabularOutput<NdArray> {
        let has_classes = self.classes.is_some();
        let mut transaction = Transaction::default()
            .register(self.loss)
            .register(self.scores);
        if let Some(classes) = self.classes {
            transaction = transaction.register(classes);
        }
        let mut data = transaction.execute().into_iter();
        let device = Default::default();
        let mut next = || data.next().expect("one datum per registered tensor");
        TabularOutput {
            loss: Tensor::from_data(next(), &device),
            scores: Tensor::from_data(next(), &device),
            classes: has_classes.then(|| Tensor::from_data(next(), &device)),
        }
    }
}

impl<B: Backend> Adaptor<LossInput<B>> for TabularOutput<B> {
    fn adapt(&self) -> LossInput<B> {
        LossInput::new(self.loss.clone())
    }
}

/// Only registered for classification runs, whose outputs always carry classes.
impl<B: Backend> Adaptor<AccuracyInput<B>> for TabularOutput<B> {
    fn adapt(&self) -> AccuracyInput<B> {
        let classes = self
            .classes
            .clone()
            .expect("accuracy is only measured on classification tasks");
        AccuracyInput::new(self.scores.clone(), classes)
    }
}
