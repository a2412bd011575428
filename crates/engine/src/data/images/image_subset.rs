//! Index views of an [`ImageSet`] for the train/valid/test splits, with the normalization
//! their batches are built with.

use std::fmt;
use std::sync::Arc;

use burn::data::dataset::Dataset;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

use crate::data::{ChannelStats, ImageSet};

/// One image as the batcher receives it: a reference into its set, not a copy.
#[derive(Clone)]
pub struct ImageItem {
    set: Arc<ImageSet>,
    index: usize,
    normalization: Arc<ChannelStats>,
}

impl ImageItem {
    /// The image's pixels, channel by channel (CHW), 0 to 255.
    pub fn pixels(&self) -> &[u8] {
        self.set.image(self.index)
    }

    /// The class, an index into the set's classes.
    pub fn label(&self) -> u32 {
        self.set.label(self.index)
    }

    /// Its position in the set: what seeds per-batch augmentation.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The statistics its pixels are normalized with.
    pub fn normalization(&self) -> &ChannelStats {
        &self.normalization
    }

    /// The set it belongs to.
    pub fn set(&self) -> &ImageSet {
        &self.set
    }
}

impl fmt::Debug for ImageItem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ImageItem")
            .field("index", &self.index)
            .field("label", &self.label())
            .finish()
    }
}

/// Some images of one [`ImageSet`], in a chosen order, and the normalization their batches
/// use; cheap to clone and split.
#[derive(Clone)]
pub struct ImageSubset {
    set: Arc<ImageSet>,
    indices: Vec<usize>,
    normalization: Arc<ChannelStats>,
}

impl fmt::Debug for ImageSubset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ImageSubset")
            .field("images", &self.indices.len())
            .field("shape", &self.set.shape())
            .field("normalization", &self.normalization)
            .finish()
    }
}

impl ImageSubset {
    /// Every image of `set`, in set order, normalized with `normalization`.
    pub fn all(set: Arc<ImageSet>, normalization: ChannelStats) -> Self {
        let indices = (0..set.len()).collect();
        Self {
            set,
            indices,
            normalization: Arc::new(normalization),
        }
    }

    /// Shuffles with `seed`, then cuts off the last `fraction` as a second subset
    /// (train/valid split). A fraction of 0 leaves the second subset empty.
    pub fn split_off(mut self, fraction: f64, seed: u64) -> (Self, Self) {
        self.indices.shuffle(&mut StdRng::seed_from_u64(seed));
        let cut = self.indices.len() - (self.indices.len() as f64 * fraction).round() as usize;
        let tail = self.indices.split_off(cut);
        let rest = Self {
            indices: tail,
            ..self.clone()
        };
        (self, rest)
    }

    /// Keeps at most the first `limit` images.
    pub fn limit(mut self, limit: Option<usize>) -> Self {
        if let Some(limit) = limit {
            self.indices.truncate(limit);
        }
        self
    }

    /// The same images, normalized with `normalization`.
    pub fn with_normalization(self, normalization: Arc<ChannelStats>) -> Self {
        Self {
            normalization,
            ..self
        }
    }

    /// The set the images come from.
    pub fn set(&self) -> &Arc<ImageSet> {
        &self.set
    }

    /// Positions of the images in the set, in subset order.
    pub fn indices(&self) -> &[usize] {
        &self.indices
    }

    pub fn normalization(&self) -> &Arc<ChannelStats> {
        &self.normalization
    }
}

impl Dataset<ImageItem> for ImageSubset {
    fn get(&self, index: usize) -> Option<ImageItem> {
        Some(ImageItem {
            set: self.set.clone(),
            index: *self.indices.get(index)?,
            normalization: self.normalization.clone(),
        })
    }

    fn len(&self) -> usize {
        self.indices.len()
    }
}
