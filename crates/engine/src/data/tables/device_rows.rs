//! A split of a tabular dataset held on the training device. Batches are gathered there by
//! row index, so an epoch moves only the indices from the host, never the data.

use burn::data::dataloader::batcher::Batcher;
use burn::prelude::*;
use burn::tensor::ops::IntElem;

use crate::data::Table;

/// Inputs `[rows, features]` and targets `[rows, targets]` on one device.
#[derive(Debug, Clone)]
pub struct DeviceRows<B: Backend> {
    inputs: Tensor<B, 2>,
    targets: Tensor<B, 2>,
}

/// One batch of rows.
#[derive(Debug, Clone)]
pub struct RowBatch<B: Backend> {
    pub inputs: Tensor<B, 2>,
    pub targets: Tensor<B, 2>,
}

impl<B: Backend> DeviceRows<B> {
    /// Copies `inputs` and `targets` (same row count) to `device`.
    pub fn new(inputs: &Table, targets: &Table, device: &B::Device) -> Self {
        let upload = |t: &Table| {
            Tensor::from_data(
                TensorData::new(t.values.clone(), [t.rows(), t.width()]),
                device,
            )
        };
        Self {
            inputs: upload(inputs),
            targets: upload(targets),
        }
    }
}

impl<B: Backend> Batcher<B, usize, RowBatch<B>> for DeviceRows<B> {
    fn batch(&self, rows: Vec<usize>, device: &B::Device) -> RowBatch<B> {
        let n = rows.len();
        let rows: Vec<i64> = rows.into_iter().map(|r| r as i64).collect();
        let indices = Tensor::<B, 1, Int>::from_data(
            TensorData::new(rows, [n]).convert::<IntElem<B>>(),
            device,
        );
        RowBatch {
            inputs: self.inputs.clone().select(0, indices.clone()),
            targets: self.targets.clone().select(0, indices),
        }
    }
}
