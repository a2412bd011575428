//! Datasets: labelled images — MNIST from IDX files (or burn-dataset's download), and images
//! of any size from class folders, IDX files or CIFAR-10, with a decoded-image
//! cache, index views for the splits, normalization and on-device batches with
//! augmentation; numeric CSV tables, their splits and standardization, and device-resident row
//! batches.

mod class_count;
mod epoch_shuffle;
mod idx;
mod images;
mod tables;

pub use tables::synthetic;

use std::path::PathBuf;

use crate::atomic_file::WriteError;

pub use class_count::{MAX_INFERRED_CLASSES, inferred_classes};
pub use epoch_shuffle::{EpochShuffled, epoch_order};
pub use idx::{IdxArray, decode_idx, parse_idx, read_idx_file};
pub use images::augment::{Augment, batch_seed};
pub use images::batcher::{ImageBatch, ImageBatcher};
pub use images::cifar::{CIFAR10_CLASSES, read_cifar10};
pub use images::device_images::{DeviceImages, Pass};
pub use images::idx_images::{IdxFiles, read_idx_images};
pub use images::image_folder::{
    Channels, Decoding, Origin, image_files, is_image, read_image_file, read_image_folder,
};
pub use images::image_set::{ChannelStats, ImageSet, ImageShape};
pub use images::image_source::{ImageSource, LoadedImages};
pub use images::image_subset::{ImageItem, ImageSubset};
pub use images::mnist::{
    IMAGE_PIXELS, IMAGE_SIDE, MNIST_SHAPE, MnistSource, MnistSplit, NUM_CLASSES, mnist_classes,
    mnist_normalization,
};
pub use tables::device_rows::{DeviceRows, RowBatch};
pub use tables::split::{SplitRatios, Standardizer};
pub use tables::table::{Table, check_replaceable_csv, write_csv_atomically};
pub use tables::table_source::{Generator, TableSource};

/// What can go wrong while loading data; every variant names the file it concerns.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not valid MNIST data: {what}", path.display())]
    Corrupt { path: PathBuf, what: String },
    #[error("no {name} or {name}.gz in {} (expected the four MNIST IDX files there)", dir.display())]
    Missing { dir: PathBuf, name: String },
    #[error("cannot download MNIST ({cause}): pass --data-dir with the four IDX files")]
    Download { cause: String },
    #[error("{}: {reason}", path.display())]
    Csv { path: PathBuf, reason: String },
    #[error("{}: {what}", path.display())]
    Image { path: PathBuf, what: String },
    #[error("{} has no column `{column}` (its columns: {available})", path.display())]
    CsvColumn {
        path: PathBuf,
        column: String,
        available: String,
    },
    #[error(
        "{}'s header names column `{column}` twice (columns {} and {}): rename one, so that it \
         is clear which is meant",
        path.display(), positions[0], positions[1]
    )]
    CsvColumnTwice {
        path: PathBuf,
        column: String,
        positions: [usize; 2],
    },
    #[error("{} line {line}, column `{column}`: {what}", path.display())]
    CsvValue {
        path: PathBuf,
        line: u64,
        column: String,
        what: String,
    },
    #[error("{} data row {row}, column `{column}`: {what}", path.display())]
    CsvTarget {
        path: PathBuf,
        row: usize,
        column: String,
        what: String,
    },
    #[error("{} has no data rows", path.display())]
    CsvEmpty { path: PathBuf },
    /// A file that could not be written: a cache of decoded images, a CSV.
    #[error(transparent)]
    Write(#[from] WriteError),
}
