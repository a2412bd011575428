//! An image run's data cut into its three sets: the training images limited, shuffled and
//! split into train and valid, the test images limited, all normalized with the training
//! set's statistics.

use std::path::Path;
use std::sync::Arc;

use crate::data::{ChannelStats, DataError, ImageShape, ImageSource, ImageSubset, LoadedImages};
use crate::train::ImageTrainingConfig;

/// The three sets of one run, normalized with the statistics of the training set.
#[derive(Debug, Clone)]
pub struct ImageSplits {
    pub train: ImageSubset,
    pub valid: ImageSubset,
    pub test: ImageSubset,
    /// The source has no test split: `test` is the validation set.
    pub test_is_valid: bool,
}

impl ImageSplits {
    /// Loads `source` (decoded image folders cached in `cache_dir`) and cuts it as
    /// [`ImageSplits::cut`] does.
    pub fn load(
        source: &ImageSource,
        config: &ImageTrainingConfig,
        cache_dir: Option<&Path>,
    ) -> Result<Self, DataError> {
        Ok(Self::cut(source, source.load(cache_dir)?, config))
    }

    /// Cuts the images of `source` as `config` says: the training split is limited,
    /// shuffled with the seed and split into train and valid; the test split is limited
    /// (the validation set stands in for a source without one). Every set is normalized
    /// with the source's statistics of the training set.
    pub fn cut(source: &ImageSource, images: LoadedImages, config: &ImageTrainingConfig) -> Self {
        let set = Arc::new(images.train);
        let unit = ChannelStats::unit(set.shape().channels);
        let (train, valid) = ImageSubset::all(set.clone(), unit.clone())
            .limit(config.limit_train)
            .split_off(config.valid_fraction, config.seed);
        let normalization = Arc::new(source.normalization(&set, train.indices()));
        let train = train.with_normalization(normalization.clone());
        let valid = valid.with_normalization(normalization.clone());
        let (test, test_is_valid) = match images.test {
            Some(test) => (ImageSubset::all(Arc::new(test), unit), false),
            None => (valid.clone(), true),
        };
        let test = test
            .limit(config.limit_test)
            .with_normalization(normalization);
        Self {
            train,
            valid,
            test,
            test_is_valid,
        }
    }

    /// The class names, in label order.
    pub fn classes(&self) -> &[String] {
        self.train.set().classes()
    }

    /// The size of every image.
    pub fn shape(&self) -> ImageShape {
        self.train.set().shape()
    }
}
