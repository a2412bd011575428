//! MNIST as an [`ImageSet`] of 28×28 gray digits, read from a directory of IDX files or
//! downloaded through burn-dataset.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use burn::data::dataset::Dataset;

use crate::data::images::idx_images::{IdxFiles, check_labels, read_split};
use crate::data::{ChannelStats, DataError, ImageSet, ImageShape, ImageSubset};
use crate::quiet_panic::{catch_quietly, first_line};

/// Side of an MNIST image in pixels.
pub const IMAGE_SIDE: usize = 28;
/// Pixels in one MNIST image.
pub const IMAGE_PIXELS: usize = IMAGE_SIDE * IMAGE_SIDE;
/// Digit classes.
pub const NUM_CLASSES: usize = 10;

/// The two halves MNIST is distributed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MnistSplit {
    /// 60,000 training images.
    Train,
    /// 10,000 test images.
    Test,
}

impl MnistSplit {
    /// The IDX file names (without `.gz`) of this split's images and labels.
    fn file_names(self) -> (&'static str, &'static str) {
        match self {
            MnistSplit::Train => ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
            MnistSplit::Test => ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
        }
    }
}

/// Where MNIST comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum MnistSource {
    /// A directory holding the four IDX files, raw or gzip-compressed.
    Dir(PathBuf),
    /// burn-dataset's downloader (needs a network; cached after the first run).
    Download,
}

impl MnistSource {
    /// Loads and validates one split: 28×28 gray images labelled with the classes `0` to
    /// `9`.
    pub fn load(&self, split: MnistSplit) -> Result<ImageSet, DataError> {
        let (pixels, labels) = match self {
            MnistSource::Dir(dir) => read_dir(dir, split)?,
            MnistSource::Download => download(split)?,
        };
        Ok(ImageSet::new(pixels, labels, MNIST_SHAPE, mnist_classes()))
    }

    /// Every image of one split, with MNIST's usual normalization.
    pub fn subset(&self, split: MnistSplit) -> Result<ImageSubset, DataError> {
        Ok(ImageSubset::all(
            Arc::new(self.load(split)?),
            mnist_normalization(),
        ))
    }
}

/// The shape of an MNIST image: one channel, 28×28.
pub const MNIST_SHAPE: ImageShape = ImageShape {
    channels: 1,
    height: IMAGE_SIDE,
    width: IMAGE_SIDE,
};

/// MNIST's class names: the digits `0` to `9`.
pub fn mnist_classes() -> Vec<String> {
    (0..NUM_CLASSES).map(|digit| digit.to_string()).collect()
}

/// The usual MNIST normalization (mean 0.1307, standard deviation 0.3081 of the pixels
/// scaled to 0..1), which MNIST runs keep rather than measuring their training split.
pub fn mnist_normalization() -> ChannelStats {
    ChannelStats {
        mean: vec![0.1307],
        std: vec![0.3081],
    }
}

/// Reads one split from a directory of IDX files through the IDX image reader, then
/// checks what makes it MNIST: 28×28 images, digit labels.
fn read_dir(dir: &Path, split: MnistSplit) -> Result<(Vec<u8>, Vec<u32>), DataError> {
    let (images_name, labels_name) = split.file_names();
    let files = IdxFiles {
        images: find_idx(dir, images_name)?,
        labels: find_idx(dir, labels_name)?,
    };
    let split = read_split(&files)?;
    if split.shape != MNIST_SHAPE {
        return Err(DataError::Image {
            path: files.images,
            what: format!(
                "images are {}×{} pixels, expected MNIST's {IMAGE_SIDE}×{IMAGE_SIDE}",
                split.shape.width, split.shape.height
            ),
        });
    }
    check_labels(&split, &files.labels, NUM_CLASSES)?;
    Ok((split.pixels, split.labels))
}

/// Downloads one split with burn-dataset (which caches it) and copies it in.
fn download(split: MnistSplit) -> Result<(Vec<u8>, Vec<u32>), DataError> {
    use burn_dataset::vision::MnistDataset;
    // burn-dataset's downloader panics on network errors; turn that into an error value.
    let dataset = catch_quietly(|| match split {
        MnistSplit::Train => MnistDataset::train(),
        MnistSplit::Test => MnistDataset::test(),
    })
    .map_err(|message| DataError::Download {
        cause: download_failure_cause(&message),
    })?;
    let mut images = Vec::with_capacity(dataset.len() * IMAGE_PIXELS);
    let mut labels = Vec::with_capacity(dataset.len());
    for item in dataset.iter() {
        images.extend(item.image.iter().flatten().map(|&p| p as u8));
        labels.push(item.label as u32);
    }
    Ok((images, labels))
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
