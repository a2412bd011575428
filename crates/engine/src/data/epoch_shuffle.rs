//! Shuffling whose order depends only on the seed and the epoch number. burn's own
//! `DataLoaderBuilder::shuffle` draws each epoch's order from one generator that advances
//! (and is forked when the loader moves to a device), so a run resumed at epoch 5 would see
//! epoch 1's order again; this loader gives epoch 5 the order it had in the first run.
//! Split across devices (burn-train slices the loader, one slice per device), every slice
//! reads its own part of the same epoch's order, so together they cover the epoch once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use burn::data::dataloader::{DataLoader, DataLoaderBuilder, DataLoaderIterator};
use burn::data::dataset::Dataset;
use burn::prelude::*;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

/// The items of a dataset in the order of the current epoch.
struct EpochOrder<I> {
    items: Arc<dyn Dataset<I>>,
    order: RwLock<Shuffle>,
}

/// An epoch number and the item order it has.
struct Shuffle {
    epoch: usize,
    order: Vec<usize>,
}

impl<I> EpochOrder<I> {
    /// Puts the items in epoch `epoch`'s order, unless another slice of the loader already
    /// did: the slices of one epoch must not reshuffle under each other's readers.
    fn enter(&self, epoch: usize, seed: u64) {
        let mut shuffle = self.order.write().unwrap_or_else(|p| p.into_inner());
        if shuffle.epoch != epoch {
            *shuffle = Shuffle {
                epoch,
                order: epoch_order(self.items.len(), seed, epoch),
            };
        }
    }
}

impl<I: Send + Sync> Dataset<I> for EpochOrder<I> {
    fn get(&self, index: usize) -> Option<I> {
        let position = *self.order.read().ok()?.order.get(index)?;
        self.items.get(position)
    }

    fn len(&self) -> usize {
        self.items.len()
    }
}

/// A data loader that reshuffles its dataset at every pass, with the order of pass `e`
/// derived from `(seed, e)`.
pub struct EpochShuffled<B: Backend, I, O> {
    loader: Arc<dyn DataLoader<B, O>>,
    order: Arc<EpochOrder<I>>,
    seed: u64,
    next_epoch: Arc<AtomicUsize>,
}

impl<B, I, O> EpochShuffled<B, I, O>
where
    B: Backend,
    I: Send + Sync + Clone + std::fmt::Debug + 'static,
    O: Send + Clone + std::fmt::Debug + 'static,
{
    /// Builds `builder`'s loader (which must not shuffle itself) over `dataset`; its first
    /// pass is epoch `first_epoch` (1 for a fresh run).
    pub fn build<D: Dataset<I> + 'static>(
        builder: DataLoaderBuilder<B, I, O>,
        dataset: D,
        seed: u64,
        first_epoch: usize,
    ) -> Arc<dyn DataLoader<B, O>> {
        let order = Arc::new(EpochOrder {
            order: RwLock::new(Shuffle {
                epoch: 0, // none: epochs count from 1
                order: (0..dataset.len()).collect(),
            }),
            items: Arc::new(dataset),
        });
        Arc::new(Self {
            loader: builder.build(order.clone()),
            order,
            seed,
            next_epoch: Arc::new(AtomicUsize::new(first_epoch)),
        })
    }
}

impl<B, I, O> EpochShuffled<B, I, O>
where
    B: Backend,
    I: Send + Sync + Clone + 'static,
    O: Send + 'static,
{
    /// `loader` in place of this one's, counting epochs with this one (`own_count` false:
    /// the same loader moved to a device) or on its own from the same point (`own_count`
    /// true: a slice, which passes through every epoch beside the other slices).
    fn with_loader(
        &self,
        loader: Arc<dyn DataLoader<B, O>>,
        own_count: bool,
    ) -> Arc<dyn DataLoader<B, O>> {
        let next_epoch = if own_count {
            Arc::new(AtomicUsize::new(self.next_epoch.load(Ordering::SeqCst)))
        } else {
            self.next_epoch.clone()
        };
        Arc::new(Self {
            loader,
            order: self.order.clone(),
            seed: self.seed,
            next_epoch,
        })
    }
}

/// The order of `len` items in epoch `epoch` of a run seeded with `seed`.
pub fn epoch_order(len: usize, seed: u64, epoch: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    let stream = seed ^ (epoch as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    order.shuffle(&mut StdRng::seed_from_u64(stream));
    order
}

impl<B, I, O> DataLoader<B, O> for EpochShuffled<B, I, O>
where
    B: Backend,
    I: Send + Sync + Clone + 'static,
    O: Send + 'static,
{
    fn iter<'a>(&'a self) -> Box<dyn DataLoaderIterator<O> + 'a> {
        let epoch = self.next_epoch.fetch_add(1, Ordering::SeqCst);
        self.order.enter(epoch, self.seed);
        self.loader.iter()
    }

    fn num_items(&self) -> usize {
        self.loader.num_items()
    }

    fn to_device(&self, device: &B::Device) -> Arc<dyn DataLoader<B, O>> {
        self.with_loader(self.loader.to_device(device), false)
    }

    fn slice(&self, start: usize, end: usize) -> Arc<dyn DataLoader<B, O>> {
        self.with_loader(self.loader.slice(start, end), true)
    }
}

#[cfg(test)]
mod tests {
    use burn::backend::NdArray;
    use burn::data::dataloader::batcher::Batcher;
    use burn::data::dataset::InMemDataset;

    use super::*;

    #[derive(Clone)]
    struct Collect;

    impl Batcher<NdArray, usize, Vec<usize>> for Collect {
        fn batch(
            &self,
            items: Vec<usize>,
            _: &burn::backend::ndarray::NdArrayDevice,
        ) -> Vec<usize> {
            items
        }
    }

    fn passes(first_epoch: usize, passes: usize) -> Vec<Vec<usize>> {
        let loader = EpochShuffled::build(
            DataLoaderBuilder::new(Collect).batch_size(4),
            InMemDataset::new((0..10).collect::<Vec<usize>>()),
            7,
            first_epoch,
        )
        .to_device(&Default::default());
        (0..passes)
            .map(|_| loader.iter().flatten().collect())
            .collect()
    }

    #[test]
    fn slices_cover_each_epoch_once_in_that_epochs_order() {
        let whole = passes(1, 3);
        let loader = EpochShuffled::build(
            DataLoaderBuilder::new(Collect).batch_size(4),
            InMemDataset::new((0..10).collect::<Vec<usize>>()),
            7,
            1,
        );
        // As burn-train splits a loader over two devices.
        let slices = [loader.slice(0, 5), loader.slice(5, 10)]
            .map(|slice| slice.to_device(&Default::default()));
        for epoch in &whole {
            let iters: Vec<_> = slices.iter().map(|slice| slice.iter()).collect();
            let read: Vec<usize> = iters.into_iter().flatten().flatten().collect();
            assert_eq!(&read, epoch);
        }
    }

    #[test]
    fn an_epoch_has_the_same_order_whenever_the_run_started() {
        let from_one = passes(1, 3);
        assert_eq!(passes(3, 1)[0], from_one[2]);
        assert_ne!(from_one[0], from_one[1]);
        for pass in &from_one {
            let mut sorted = pass.clone();
            sorted.sort();
            assert_eq!(sorted, (0..10).collect::<Vec<_>>());
        }
    }
}
