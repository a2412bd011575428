//! Where an image classification run's images come from, as a run file's `[data]`
//! describes it: a folder of image files per class, IDX files, or CIFAR-10's binary files.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::atomic_file::WriteError;
use crate::data::{
    ChannelStats, Channels, DataError, Decoding, IdxFiles, ImageSet, MnistSource, MnistSplit,
    mnist_normalization, read_cifar10, read_idx_images, read_image_folder,
};

/// Cache file names, in the cache directory, of the decoded training and test folders.
const TRAIN_CACHE: &str = "train-images.cache";
const TEST_CACHE: &str = "test-images.cache";

/// Where a run's images come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ImageSource {
    /// `root/<class name>/*.png|jpg|jpeg`, classes in name order; `test_root` laid out the
    /// same way holds the test split.
    ImageFolder {
        root: PathBuf,
        test_root: Option<PathBuf>,
        /// 1 (gray) or 3 (RGB) [default: 3].
        #[serde(default)]
        channels: Channels,
        /// `[height, width]` to resize every image to; without it all must have one size.
        size: Option<[u32; 2]>,
    },
    /// Gray images of any size in IDX files (Fashion-MNIST, EMNIST, …).
    Idx {
        train: IdxFiles,
        test: Option<IdxFiles>,
        /// Class names in label order [default: `0` to the largest label].
        classes: Option<Vec<String>>,
    },
    /// CIFAR-10's binary distribution: `data_batch_1.bin` … `data_batch_5.bin` and
    /// `test_batch.bin` in `dir`.
    Cifar { dir: PathBuf },
    /// MNIST (a run file's `kind = "mnist"`, which has its own keys).
    #[serde(skip)]
    Mnist(MnistSource),
}

/// The images of a source: a training split, which the trainer cuts its validation split
/// from, and the test split where the source has one.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedImages {
    pub train: ImageSet,
    pub test: Option<ImageSet>,
}

impl ImageSource {
    /// Reads both splits. Decoded image folders are cached in `cache_dir` (as
    /// `train-images.cache` and `test-images.cache`), created if absent.
    pub fn load(&self, cache_dir: Option<&Path>) -> Result<LoadedImages, DataError> {
        match self {
            ImageSource::ImageFolder {
                root,
                test_root,
                channels,
                size,
            } => {
                let decoding = Decoding {
                    channels: *channels,
                    size: *size,
                };
                if let Some(dir) = cache_dir {
                    fs::create_dir_all(dir).map_err(|source| WriteError {
                        path: dir.to_path_buf(),
                        source,
                    })?;
                }
                let cache = |name: &str| cache_dir.map(|dir| dir.join(name));
                let (train, _) =
                    read_image_folder(root, decoding, None, cache(TRAIN_CACHE).as_deref())?;
                let test = match test_root {
                    Some(test_root) => {
                        let cache = cache(TEST_CACHE);
                        Some(
                            read_image_folder(test_root, decoding, Some(&train), cache.as_deref())?
                                .0,
                        )
                    }
                    None => None,
                };
                Ok(LoadedImages { train, test })
            }
            ImageSource::Idx {
                train,
                test,
                classes,
            } => {
                let (train, test) = read_idx_images(train, test.as_ref(), classes.as_deref())?;
                Ok(LoadedImages { train, test })
            }
            ImageSource::Mnist(source) => Ok(LoadedImages {
                train: source.load(MnistSplit::Train)?,
                test: Some(source.load(MnistSplit::Test)?),
            }),
            ImageSource::Cifar { dir } => {
                let (train, test) = read_cifar10(dir)?;
                Ok(LoadedImages {
                    train,
                    test: Some(test),
                })
            }
        }
    }
}

impl ImageSource {
    /// The files and folders the source reads.
    pub fn inputs(&self) -> Vec<&Path> {
        match self {
            ImageSource::ImageFolder {
                root, test_root, ..
            } => std::iter::once(root)
                .chain(test_root)
                .map(|p| p.as_path())
                .collect(),
            ImageSource::Idx { train, test, .. } => std::iter::once(train)
                .chain(test)
                .flat_map(|files| [files.images.as_path(), files.labels.as_path()])
                .collect(),
            ImageSource::Cifar { dir } => vec![dir],
            ImageSource::Mnist(MnistSource::Dir(dir)) => vec![dir],
            ImageSource::Mnist(MnistSource::Download) => Vec::new(),
        }
    }

    /// The per-channel statistics a run normalizes with: MNIST's usual constants for
    /// MNIST, else those of the training images (`indices` of `train`).
    pub fn normalization(&self, train: &ImageSet, indices: &[usize]) -> ChannelStats {
        match self {
            ImageSource::Mnist(_) => mnist_normalization(),
            _ => train.channel_stats(indices),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::GrayImage;

    #[test]
    fn run_files_describe_sources() {
        let folder: ImageSource = toml::from_str(
            "kind = \"image_folder\"\nroot = \"photos\"\nchannels = 1\nsize = [28, 32]",
        )
        .unwrap();
        assert_eq!(
            folder,
            ImageSource::ImageFolder {
                root: "photos".into(),
                test_root: None,
                channels: Channels::Gray,
                size: Some([28, 32]),
            }
        );
        let round_trip: ImageSource = toml::from_str(&toml::to_string(&folder).unwrap()).unwrap();
        assert_eq!(round_trip, folder);

        let error =
            toml::from_str::<ImageSource>("kind = \"image_folder\"\nroot = \"p\"\nchannels = 2")
                .unwrap_err()
                .to_string();
        assert!(
            error.contains("channels must be 1 (gray) or 3 (RGB), not 2"),
            "{error}"
        );

        let idx: ImageSource = toml::from_str(
            "kind = \"idx\"\ntrain = { images = \"a\", labels = \"b\" }\nclasses = [\"x\", \"y\"]",
        )
        .unwrap();
        assert!(matches!(idx, ImageSource::Idx { test: None, .. }));
        let cifar: ImageSource = toml::from_str("kind = \"cifar\"\ndir = \"c\"").unwrap();
        assert_eq!(cifar, ImageSource::Cifar { dir: "c".into() });
    }

    #[test]
    fn folders_load_with_their_test_split_and_cache_both() {
        let dir = tempfile::tempdir().unwrap();
        for (split, class, value) in [("train", "a", 10), ("train", "b", 20), ("test", "b", 30)] {
            let folder = dir.path().join(split).join(class);
            fs::create_dir_all(&folder).unwrap();
            GrayImage::from_pixel(2, 2, image::Luma([value]))
                .save(folder.join("1.png"))
                .unwrap();
        }
        let source = ImageSource::ImageFolder {
            root: dir.path().join("train"),
            test_root: Some(dir.path().join("test")),
            channels: Channels::Gray,
            size: None,
        };
        let cache_dir = dir.path().join("artifacts/cache");
        let splits = source.load(Some(&cache_dir)).unwrap();
        assert_eq!(splits.train.labels(), [0, 1]);
        let test = splits.test.as_ref().unwrap();
        assert_eq!((test.labels(), test.image(0)), (&[1][..], &[30; 4][..]));
        assert!(cache_dir.join(TRAIN_CACHE).is_file() && cache_dir.join(TEST_CACHE).is_file());
        assert_eq!(source.load(Some(&cache_dir)).unwrap(), splits);
    }
}
