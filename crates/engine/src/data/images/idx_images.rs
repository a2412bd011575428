//! Gray images of any size in IDX files, as Fashion-MNIST, KMNIST and EMNIST ship: an
//! image file `[count, height, width]` and a label file `[count]`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::data::{DataError, ImageSet, ImageShape, inferred_classes, read_idx_file};

/// An IDX image file and the IDX label file of the same images (raw or gzip).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdxFiles {
    pub images: PathBuf,
    pub labels: PathBuf,
}

/// Images and labels of one split, before the classes are settled.
pub(crate) struct RawSplit {
    pub shape: ImageShape,
    pub pixels: Vec<u8>,
    pub labels: Vec<u32>,
}

/// The training split in `train` and the test split in `test`, whose images must have the
/// training images' size. `classes` names the labels; without it they are named `0` to
/// `k - 1`, `k` one more than the largest training label, and a test label outside them is
/// refused (a class the network never trained on).
pub fn read_idx_images(
    train: &IdxFiles,
    test: Option<&IdxFiles>,
    classes: Option<&[String]>,
) -> Result<(ImageSet, Option<ImageSet>), DataError> {
    let train_split = read_split(train)?;
    let test_split = test
        .map(|files| {
            let split = read_split(files)?;
            if split.shape != train_split.shape {
                return Err(DataError::Image {
                    path: files.images.clone(),
                    what: format!(
                        "images are {}×{} pixels but the training images in {} are {}×{}",
                        split.shape.width,
                        split.shape.height,
                        train.images.display(),
                        train_split.shape.width,
                        train_split.shape.height
                    ),
                });
            }
            Ok(split)
        })
        .transpose()?;
    let classes = match classes {
        Some(names) => {
            let splits = [Some((&train_split, train)), test_split.as_ref().zip(test)];
            for (split, files) in splits.into_iter().flatten() {
                check_labels(split, &files.labels, names.len())?;
            }
            names.to_vec()
        }
        None => {
            let labels = train_split.labels.iter().map(|&l| u64::from(l));
            let count = inferred_classes(labels, "`classes = [\"name\", …]` in [data]").map_err(
                |what| DataError::Image {
                    path: train.labels.clone(),
                    what,
                },
            )?;
            if let Some((split, files)) = test_split.as_ref().zip(test) {
                check_labels(split, &files.labels, count)?;
            }
            (0..count).map(|label| label.to_string()).collect()
        }
    };
    let into_set =
        |split: RawSplit| ImageSet::new(split.pixels, split.labels, split.shape, classes.clone());
    Ok((into_set(train_split), test_split.map(into_set)))
}

/// One image file and its label file, checked against each other.
pub(crate) fn read_split(files: &IdxFiles) -> Result<RawSplit, DataError> {
    let images = read_idx_file(&files.images)?;
    let labels = read_idx_file(&files.labels)?;
    let invalid = |path: &Path, what: String| DataError::Image {
        path: path.to_path_buf(),
        what,
    };
    let (count, height, width) = match images.dims[..] {
        [0, _, _] => return Err(invalid(&files.images, "holds no images".into())),
        [count, height, width] if height > 0 && width > 0 => (count, height, width),
        _ => {
            return Err(invalid(
                &files.images,
                format!(
                    "image dimensions are {:?}, expected [count, height, width]",
                    images.dims
                ),
            ));
        }
    };
    if labels.dims != [count] {
        return Err(invalid(
            &files.labels,
            format!(
                "label dimensions are {:?}, expected [{count}] for the images of {}",
                labels.dims,
                files.images.display()
            ),
        ));
    }
    Ok(RawSplit {
        shape: ImageShape {
            channels: 1,
            height,
            width,
        },
        pixels: images.data,
        labels: labels.data.into_iter().map(u32::from).collect(),
    })
}

/// Refuses a label of `split` (read from `path`) that is not below `classes`.
pub(crate) fn check_labels(split: &RawSplit, path: &Path, classes: usize) -> Result<(), DataError> {
    match split
        .labels
        .iter()
        .position(|&label| label as usize >= classes)
    {
        Some(index) => Err(DataError::Image {
            path: path.to_path_buf(),
            what: format!(
                "label {} at index {index} is not one of the {classes} classes (0 to {}) that the \
                 training labels hold or the run file names",
                split.labels[index],
                classes - 1
            ),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::idx::idx_bytes;

    /// IDX files of `labels.len()` images of `height`×`width` pixels counting up, in `dir`.
    fn write(dir: &Path, name: &str, height: u32, width: u32, labels: &[u8]) -> IdxFiles {
        let count = labels.len() as u32;
        let pixels: Vec<u8> = (0..count * height * width).map(|i| i as u8).collect();
        let files = IdxFiles {
            images: dir.join(format!("{name}-images")),
            labels: dir.join(format!("{name}-labels")),
        };
        std::fs::write(&files.images, idx_bytes(&[count, height, width], &pixels)).unwrap();
        std::fs::write(&files.labels, idx_bytes(&[count], labels)).unwrap();
        files
    }

    #[test]
    fn images_of_any_size_with_classes_from_the_training_labels() {
        let dir = tempfile::tempdir().unwrap();
        let train = write(dir.path(), "train", 5, 7, &[0, 4, 2, 1, 3]);
        let test = write(dir.path(), "test", 5, 7, &[4, 1]);
        let (train_set, test_set) = read_idx_images(&train, Some(&test), None).unwrap();
        let shape = ImageShape {
            channels: 1,
            height: 5,
            width: 7,
        };
        assert_eq!((train_set.len(), train_set.shape()), (5, shape));
        let second: Vec<u8> = (35..70).collect();
        assert_eq!(train_set.image(1), second);
        assert_eq!(train_set.labels(), [0, 4, 2, 1, 3]);
        assert_eq!(train_set.classes(), ["0", "1", "2", "3", "4"]);
        assert_eq!(test_set.unwrap().classes(), train_set.classes());

        let names: Vec<String> = "abcde".chars().map(String::from).collect();
        let (named, none) = read_idx_images(&train, None, Some(&names[..])).unwrap();
        assert_eq!((named.classes(), none), (&names[..], None));
    }

    #[test]
    fn mismatches_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let error = |train: &IdxFiles, test: Option<&IdxFiles>, classes: Option<&[String]>| {
            let message = read_idx_images(train, test, classes)
                .unwrap_err()
                .to_string();
            assert_eq!(message.lines().count(), 1, "{message}");
            message
        };
        let train = write(dir.path(), "train", 5, 7, &[0, 4, 2]);
        let test = write(dir.path(), "test", 7, 5, &[1]);
        let message = error(&train, Some(&test), None);
        assert!(
            message.contains("test-images: images are 5×7 pixels but the training images"),
            "{message}"
        );

        let names = ["a".to_string(), "b".into()];
        let message = error(&train, None, Some(&names[..]));
        assert!(
            message.contains("train-labels: label 4 at index 1 is not one of the 2 classes"),
            "{message}"
        );

        // Classes the training labels lack: a test label beyond them, and one class only.
        let full = write(dir.path(), "full", 5, 7, &[0, 1, 2, 3, 4]);
        let beyond = write(dir.path(), "beyond", 5, 7, &[0, 9]);
        let message = error(&full, Some(&beyond), None);
        assert!(
            message.contains("beyond-labels: label 9 at index 1 is not one of the 5 classes"),
            "{message}"
        );
        let one_class = write(dir.path(), "one", 5, 7, &[0, 0, 0]);
        let message = error(&one_class, Some(&beyond), None);
        assert!(
            message.contains("one-labels: every label is 0"),
            "{message}"
        );

        let other = write(dir.path(), "other", 5, 7, &[0, 1]);
        let mixed = IdxFiles {
            images: train.images.clone(),
            labels: other.labels,
        };
        let message = error(&mixed, None, None);
        assert!(
            message.contains("other-labels: label dimensions are [2], expected [3]"),
            "{message}"
        );

        std::fs::write(&train.images, idx_bytes(&[3, 35], &[0; 105])).unwrap();
        let message = error(&train, None, None);
        assert!(
            message.contains("train-images: image dimensions are [3, 35]"),
            "{message}"
        );
    }
}
