//! Datasets: MNIST from IDX files (or burn-dataset's download) and its batcher.

mod batcher;
mod idx;
mod mnist;

use std::path::PathBuf;

pub use batcher::{MnistBatch, MnistBatcher, normalize_pixel};
pub use idx::{IdxArray, parse_idx, read_idx_file};
pub use mnist::{
    IMAGE_PIXELS, IMAGE_SIDE, MnistData, MnistItem, MnistSource, MnistSubset, NUM_CLASSES, Split,
};

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
    #[error(
        "MNIST download failed: {reason} (pass --data-dir with the IDX files to train offline)"
    )]
    Download { reason: String },
}
