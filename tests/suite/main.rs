//! Integration tests, in one crate so that Burn is linked once.

mod bench;
mod cli;
mod common;
mod data_parallel;
mod data_safety;
mod fused_optimizers;
mod hostile_input;
mod images;
mod kernel_paths;
mod layering;
mod mnist_data;
mod models;
mod onnx_export;
mod readme;
mod recipes;
mod refusals;
mod stops;
mod studio;
mod tabular;
mod tensorboard;
mod torch_weights;
mod training;
