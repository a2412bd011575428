//! Integration tests, in one crate so that Burn is linked once.

mod common;
mod mnist_data;
mod models;
mod training;
