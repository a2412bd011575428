//! Labelled images: MNIST, IDX files, CIFAR-10 records and class folders, the decoded-image
//! cache, index views for the splits, normalization, batches and on-device augmentation.

pub(crate) mod augment;
pub(crate) mod batcher;
pub(crate) mod cifar;
pub(crate) mod device_images;
pub(crate) mod idx_images;
pub(crate) mod image_cache;
pub(crate) mod image_folder;
pub(crate) mod image_set;
pub(crate) mod image_source;
pub(crate) mod image_subset;
pub(crate) mod mnist;
