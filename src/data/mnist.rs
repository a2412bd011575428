//! MNIST held in memory as raw bytes, read from a directory of IDX files or downloaded
//! through burn-dataset, plus index views of it for the train/valid/test splits.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use burn::data::dataset::Dataset;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

use super::DataError;
use super::idx::read_idx_file;
use crate::quiet_panic::{catch_quietly, first_line};

/// Side of an MNIST image in pixels.
pub const IMAGE_SIDE: usize = 28;
/// Pixels in one MNIST image.
pub const IMAGE_PIXELS: usize = IMAGE_SIDE * IMAGE_SIDE;
/// Digit classes.
pub const NUM_CLASSES: usize = 10;

/// The two halves MNIST is distributed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// 60,000 training images.
    Train,
    /// 10,000 test images.
    Test,
}

impl Split {
    /// The IDX file names (without `.gz`) of this split's images and labels.
    fn file_names(self) -> (&'static str, &'static str) {
        match self {
            Split::Train => ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
            Split::Test => ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
        }
    }
}

/// Where MNIST comes from.
#[derive(Debug, Clone)]
pub enum MnistSource {
    /// A directory holding the four IDX files, raw or gzip-compressed.
    Dir(PathBuf),
    /// burn-dataset's downloader (needs a network; cached after the first run).
    Download,
}

/// One split of MNIST: `len()` images of 28×28 bytes and their labels.
#[derive(Debug, Clone)]
pub struct MnistData {
    images: Vec<u8>,
    labels: Vec<u8>,
}

impl MnistData {
    /// Loads one split from `source`, validating every file.
    pub fn load(source: &MnistSource, split: Split) -> Result<Self, DataError> {
        match source {
            MnistSource::Dir(dir) => Self::from_dir(dir, split),
            MnistSource::Download => Self::download(split),
        }
    }

    /// Reads and validates one split from a directory of IDX files.
    pub fn from_dir(dir: &Path, split: Split) -> Result<Self, DataError> {
        let (images_name, labels_name) = split.file_names();
        let images_path = find_idx(dir, images_name)?;
        let labels_path = find_idx(dir, labels_name)?;
        let images = read_idx_file(&images_path)?;
        let labels = read_idx_file(&labels_path)?;
        let corrupt = |path: &Path, what: String| DataError::Corrupt {
            path: path.to_path_buf(),
            what,
        };
        if images.dims.len() != 3 || images.dims[1..] != [IMAGE_SIDE, IMAGE_SIDE] {
            return Err(corrupt(
                &images_path,
                format!(
                    "image dimensions are {:?}, expected [N, 28, 28]",
                    images.dims
                ),
            ));
        }
        if labels.dims.len() != 1 {
            return Err(corrupt(
                &labels_path,
                format!("label dimensions are {:?}, expected [N]", labels.dims),
            ));
        }
        if images.dims[0] != labels.dims[0] {
            return Err(corrupt(
                &labels_path,
                format!(
                    "holds {} labels but {} holds {} images",
                    labels.dims[0],
                    images_path.display(),
                    images.dims[0]
                ),
            ));
        }
        if let Some(pos) = labels
            .data
            .iter()
            .position(|&l| usize::from(l) >= NUM_CLASSES)
        {
            return Err(corrupt(
                &labels_path,
                format!(
                    "label {} at index {pos} is not a digit 0-9",
                    labels.data[pos]
                ),
            ));
        }
        Ok(Self {
            images: images.data,
            labels: labels.data,
        })
    }

    /// Downloads one split with burn-dataset (which caches it) and copies it in.
    fn download(split: Split) -> Result<Self, DataError> {
        use burn_dataset::vision::MnistDataset;
        // burn-dataset's downloader panics on network errors; turn that into an error value.
        let dataset = catch_quietly(|| match split {
            Split::Train => MnistDataset::train(),
            Split::Test => MnistDataset::test(),
        })
        .map_err(|message| DataError::Download {
            cause: download_failure_cause(&message),
        })?;
        let mut images = Vec::with_capacity(dataset.len() * IMAGE_PIXELS);
        let mut labels = Vec::with_capacity(dataset.len());
        for item in dataset.iter() {
            images.extend(item.image.iter().flatten().map(|&p| p as u8));
            labels.push(item.label);
        }
        Ok(Self { images, labels })
    }

    /// Number of images.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether the split holds no image.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// The 784 pixels of image `index`, row-major.
    pub fn image(&self, index: usize) -> &[u8] {
        &self.images[index * IMAGE_PIXELS..(index + 1) * IMAGE_PIXELS]
    }

    /// The digit shown in image `index`.
    pub fn label(&self, index: usize) -> u8 {
        self.labels[index]
    }
}

/// The cause, in words, of a failed download from the panic message of burn-dataset's
/// downloader: it unwraps reqwest's error, whose debug print nests the cause as the last
/// quoted string (`… ConnectError("dns error", Custom { …, error: "failed to lookup address
/// information: …" }) }`). A message without one (an HTTP error) is kept, cut to one line.
fn download_failure_cause(panic_message: &str) -> String {
    quoted_strings(panic_message)
        .into_iter()
        .rfind(|quoted| !quoted.contains("://"))
        .unwrap_or_else(|| first_line(panic_message))
}

/// The contents of the double-quoted strings in a debug print, unescaped.
fn quoted_strings(debug: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut chars = debug.chars();
    while chars.any(|c| c == '"') {
        let mut quoted = String::new();
        while let Some(c) = chars.next() {
            match c {
                '"' => break,
                '\\' => quoted.extend(chars.next()),
                c => quoted.push(c),
            }
        }
        found.push(quoted);
    }
    found
}

fn find_idx(dir: &Path, name: &str) -> Result<PathBuf, DataError> {
    if !dir.is_dir() {
        return Err(DataError::Io {
            path: dir.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory"),
        });
    }
    [dir.join(name), dir.join(format!("{name}.gz"))]
        .into_iter()
        .find(|p| p.is_file())
        .ok_or_else(|| DataError::Missing {
            dir: dir.to_path_buf(),
            name: name.to_string(),
        })
}

/// One MNIST example as the batcher receives it.
#[derive(Debug, Clone)]
pub struct MnistItem {
    /// Row-major pixels, 0 (background) to 255 (ink).
    pub pixels: [u8; IMAGE_PIXELS],
    /// The digit, 0-9.
    pub label: u8,
}

/// A view of some images of one [`MnistData`], in a chosen order; cheap to clone and split.
#[derive(Debug, Clone)]
pub struct MnistSubset {
    data: Arc<MnistData>,
    indices: Vec<usize>,
}

impl MnistSubset {
    /// Every image of `data`, in file order.
    pub fn all(data: Arc<MnistData>) -> Self {
        let indices = (0..data.len()).collect();
        Self { data, indices }
    }

    /// Shuffles with `seed`, then cuts off the last `fraction` as a second subset
    /// (train/valid split). A fraction of 0 leaves the second subset empty.
    pub fn split_off(mut self, fraction: f64, seed: u64) -> (Self, Self) {
        self.indices.shuffle(&mut StdRng::seed_from_u64(seed));
        let cut = self.indices.len() - (self.indices.len() as f64 * fraction).round() as usize;
        let tail = self.indices.split_off(cut);
        let rest = Self {
            data: self.data.clone(),
            indices: tail,
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
}

impl Dataset<MnistItem> for MnistSubset {
    fn get(&self, index: usize) -> Option<MnistItem> {
        let &image = self.indices.get(index)?;
        let mut pixels = [0; IMAGE_PIXELS];
        pixels.copy_from_slice(self.data.image(image));
        Some(MnistItem {
            pixels,
            label: self.data.label(image),
        })
    }

    fn len(&self) -> usize {
        self.indices.len()
    }
}

#[cfg(test)]
mod tests {
    use super::download_failure_cause;

    #[test]
    fn a_failed_download_names_its_cause_in_words() {
        // burn-dataset's panic without a network (captured on a machine without DNS).
        let no_dns = "called `Result::unwrap()` on an `Err` value: reqwest::Error { kind: \
            Request, url: \"https://storage.googleapis.com/cvdf-datasets/mnist/train-images-\
            idx3-ubyte.gz\", source: hyper_util::client::legacy::Error(Connect, ConnectError(\
            \"dns error\", Custom { kind: Uncategorized, error: \"failed to lookup address \
            information: Name or service not known\" })) }";
        assert_eq!(
            download_failure_cause(no_dns),
            "failed to lookup address information: Name or service not known"
        );
        let escaped = r#"reqwest::Error { source: Os { message: "a \"quoted\" word" } }"#;
        assert_eq!(download_failure_cause(escaped), r#"a "quoted" word"#);
        // No quoted cause (a reply without a length): the message's first line.
        assert_eq!(
            download_failure_cause("called `Option::unwrap()` on a `None` value\nmore"),
            "called `Option::unwrap()` on a `None` value"
        );
    }
}
