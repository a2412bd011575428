//! A training or validation set that lives on the device: its images are normalized once on
//! the host and uploaded once per device, and each batch is one gather by an index tensor (plus
//! the augmentation, also on the device). The host then only draws the epoch's order and
//! uploads a batch's indices, so the training step does not wait for batches assembled
//! image by image. Batches equal [`crate::data::ImageBatcher`]'s for the same images: the same
//! normalization, and the same augmentation draws (seeded by the run's seed and the images).
//!
//! The order of epoch `e` is [`epoch_order`]`(len, seed, e)` as for [`crate::data::EpochShuffled`],
//! so a resumed run sees the batches of the uninterrupted one; a slice (one per device under
//! burn-train's multi-device strategy) reads its part of that order.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use burn::data::dataloader::{DataLoader, DataLoaderIterator, Progress};
use burn::data::dataset::Dataset;
use burn::prelude::*;
use burn::tensor::ops::IntElem;
use rayon::prelude::*;

use crate::data::images::augment::batch_seed;
use crate::data::{Augment, ImageBatch, ImageSubset, epoch_order};

/// How a loader walks its images.
#[derive(Debug, Clone, Copy)]
pub enum Pass {
    /// Training: reshuffled every epoch with the seed, augmented as `augment` says.
    Training { seed: u64, augment: Augment },
    /// Validation: in subset order, as they are.
    InOrder,
}

/// A subset's images `[n, c, h, w]`, normalized, and labels `[n]`, in subset order.
type Uploaded<B> = (Tensor<B, 4>, Tensor<B, 1, Int>);

/// A subset's images and labels on one device (see the module docs).
pub struct DeviceImages<B: Backend> {
    subset: ImageSubset,
    pass: Pass,
    batch_size: usize,
    device: B::Device,
    /// Uploaded at the first pass, once for every loader on this device.
    tensors: Arc<OnceLock<Uploaded<B>>>,
    /// The positions of the epoch's order this loader reads (all of them, or a slice).
    positions: Range<usize>,
    next_epoch: Arc<AtomicUsize>,
}

impl<B: Backend> DeviceImages<B> {
    /// A loader of `subset` on `device` whose first pass is epoch `first_epoch`.
    pub fn new(
        subset: ImageSubset,
        pass: Pass,
        batch_size: usize,
        device: &B::Device,
        first_epoch: usize,
    ) -> Self {
        Self {
            positions: 0..subset.len(),
            subset,
            pass,
            batch_size,
            device: device.clone(),
            tensors: Arc::new(OnceLock::new()),
            next_epoch: Arc::new(AtomicUsize::new(first_epoch)),
        }
    }

    /// Bytes the images take on the device: one f32 a pixel value.
    pub fn device_bytes(subset: &ImageSubset) -> usize {
        subset.len() * subset.set().shape().bytes() * std::mem::size_of::<f32>()
    }

    fn tensors(&self) -> &Uploaded<B> {
        self.tensors.get_or_init(|| {
            let subset = &self.subset;
            let shape = subset.set().shape();
            let normalization = subset.normalization();
            // Image by image on every core: on one thread a set of MNIST's size would hold up
            // the first step.
            let mut pixels = vec![0.0f32; subset.len() * shape.bytes()];
            pixels
                .par_chunks_mut(shape.bytes())
                .zip(subset.indices().par_iter())
                .for_each(|(normalized, &index)| {
                    let values = normalization.normalize(subset.set().image(index));
                    for (out, value) in normalized.iter_mut().zip(values) {
                        *out = value;
                    }
                });
            let labels: Vec<i64> = subset
                .indices()
                .iter()
                .map(|&index| i64::from(subset.set().label(index)))
                .collect();
            let dims = [subset.len(), shape.channels, shape.height, shape.width];
            let images = Tensor::from_data(TensorData::new(pixels, dims), &self.device);
            let labels = TensorData::new(labels, [subset.len()]).convert::<IntElem<B>>();
            (images, Tensor::from_data(labels, &self.device))
        })
    }

    /// The batch of the subset positions `batch`.
    fn batch(&self, batch: &[usize]) -> ImageBatch<B> {
        let (images, labels) = self.tensors();
        let index = batch.iter().map(|&p| p as i64).collect::<Vec<_>>();
        let index = Tensor::<B, 1, Int>::from_data(
            TensorData::new(index, [batch.len()]).convert::<IntElem<B>>(),
            &self.device,
        );
        let batch_images = images.clone().select(0, index.clone());
        let batch_images = match self.pass {
            Pass::Training { seed, augment } if augment.changes_images() => {
                // Seeded by the images' positions in their set, as the host batcher does.
                let in_set = batch.iter().map(|&p| self.subset.indices()[p]);
                augment.apply(batch_images, batch_seed(seed, in_set))
            }
            _ => batch_images,
        };
        let label_smoothing = match self.pass {
            Pass::Training { augment, .. } => augment.label_smoothing,
            Pass::InOrder => 0.0,
        };
        ImageBatch {
            images: batch_images,
            targets: labels.clone().select(0, index),
            label_smoothing,
        }
    }

    /// The same loader reading `positions` of each epoch's order on `device`, counting
    /// epochs with this one (`own_count` false) or on its own from the same point.
    fn derived(&self, device: &B::Device, positions: Range<usize>, own_count: bool) -> Self {
        let same_device = device == &self.device;
        Self {
            subset: self.subset.clone(),
            pass: self.pass,
            batch_size: self.batch_size,
            device: device.clone(),
            tensors: match same_device {
                true => self.tensors.clone(),
                false => Arc::new(OnceLock::new()),
            },
            positions,
            next_epoch: match own_count {
                true => Arc::new(AtomicUsize::new(self.next_epoch.load(Ordering::SeqCst))),
                false => self.next_epoch.clone(),
            },
        }
    }
}

/// One pass: the batches of positions, in the pass's order.
struct DeviceBatches<'a, B: Backend> {
    loader: &'a DeviceImages<B>,
    order: Vec<usize>,
    done: usize,
}

impl<B: Backend> Iterator for DeviceBatches<'_, B> {
    type Item = ImageBatch<B>;

    fn next(&mut self) -> Option<ImageBatch<B>> {
        if self.done >= self.order.len() {
            return None;
        }
        let end = (self.done + self.loader.batch_size).min(self.order.len());
        let batch = self.loader.batch(&self.order[self.done..end]);
        self.done = end;
        Some(batch)
    }
}

impl<B: Backend> DataLoaderIterator<ImageBatch<B>> for DeviceBatches<'_, B> {
    fn progress(&self) -> Progress {
        Progress::new(self.done, self.order.len())
    }
}

impl<B: Backend> DataLoader<B, ImageBatch<B>> for DeviceImages<B> {
    fn iter<'a>(&'a self) -> Box<dyn DataLoaderIterator<ImageBatch<B>> + 'a> {
        let epoch = self.next_epoch.fetch_add(1, Ordering::SeqCst);
        let order = match self.pass {
            Pass::Training { seed, .. } => epoch_order(self.subset.len(), seed, epoch),
            Pass::InOrder => (0..self.subset.len()).collect(),
        };
        Box::new(DeviceBatches {
            loader: self,
            order: order[self.positions.clone()].to_vec(),
            done: 0,
        })
    }

    fn num_items(&self) -> usize {
        self.positions.len()
    }

    fn to_device(&self, device: &B::Device) -> Arc<dyn DataLoader<B, ImageBatch<B>>> {
        Arc::new(self.derived(device, self.positions.clone(), false))
    }

    fn slice(&self, start: usize, end: usize) -> Arc<dyn DataLoader<B, ImageBatch<B>>> {
        let positions = self.positions.start + start..self.positions.start + end;
        Arc::new(self.derived(&self.device, positions, true))
    }
}

#[cfg(test)]
mod tests {
    use burn::backend::NdArray;
    use burn::data::dataloader::DataLoaderBuilder;

    use super::*;
    use crate::data::{ChannelStats, EpochShuffled, ImageBatcher, ImageSet, ImageShape};

    fn subset() -> ImageSubset {
        let shape = ImageShape {
            channels: 2,
            height: 3,
            width: 5,
        };
        let count = 23;
        let pixels = (0..count * shape.bytes())
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        let labels = (0..count).map(|i| (i % 3) as u32).collect();
        let classes = vec!["a".into(), "b".into(), "c".into()];
        let set = Arc::new(ImageSet::new(pixels, labels, shape, classes));
        let normalization = ChannelStats {
            mean: vec![0.4, 0.6],
            std: vec![0.2, 0.3],
        };
        // A subset in another order than the set's, without some images.
        ImageSubset::all(set, normalization).split_off(0.2, 9).0
    }

    /// Each batch's pixels, labels and label smoothing.
    type Read = (Vec<f32>, Vec<i64>, f32);

    fn batches(loader: &dyn DataLoader<NdArray, ImageBatch<NdArray>>) -> Vec<Read> {
        loader
            .iter()
            .map(|batch| {
                (
                    batch.images.into_data().to_vec().unwrap(),
                    batch.targets.into_data().convert::<i64>().to_vec().unwrap(),
                    batch.label_smoothing,
                )
            })
            .collect()
    }

    #[test]
    fn batches_equal_the_host_batchers_epoch_by_epoch() {
        let device = Default::default();
        let every = Augment {
            flip: true,
            pad: 2,
            cutout: 3,
            label_smoothing: 0.1,
        };
        for augment in [Augment::default(), every] {
            let pass = Pass::Training { seed: 5, augment };
            let on_device = DeviceImages::<NdArray>::new(subset(), pass, 4, &device, 2);
            let on_host = EpochShuffled::build(
                DataLoaderBuilder::new(ImageBatcher::augmenting(augment, 5)).batch_size(4),
                subset(),
                5,
                2,
            );
            for _epoch in 2..5 {
                assert_eq!(
                    batches(&on_device),
                    batches(on_host.as_ref()),
                    "{augment:?}"
                );
            }
        }
        let in_order = DeviceImages::<NdArray>::new(subset(), Pass::InOrder, 7, &device, 1);
        let host = DataLoaderBuilder::new(ImageBatcher::default())
            .batch_size(7)
            .build(subset());
        assert_eq!(batches(&in_order), batches(host.as_ref()));
    }

    #[test]
    fn slices_read_their_part_of_each_epochs_order() {
        let device = Default::default();
        let pass = Pass::Training {
            seed: 1,
            augment: Augment::default(),
        };
        let whole = DeviceImages::<NdArray>::new(subset(), pass, 3, &device, 1);
        let slices = [whole.slice(0, 9), whole.slice(9, 18)].map(|s| s.to_device(&device));
        for _epoch in 0..3 {
            let read: Vec<_> = slices
                .iter()
                .flat_map(|slice| batches(slice.as_ref()))
                .collect();
            assert_eq!(read, batches(&whole));
        }
    }
}
