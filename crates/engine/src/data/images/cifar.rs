//! CIFAR-10 in its binary distribution: `data_batch_1.bin` to `data_batch_5.bin` (training)
//! and `test_batch.bin`, each a sequence of records of one label byte then a 32×32 image
//! as three planes (red, green, blue), rows top to bottom — already the CHW layout of an
//! [`ImageSet`].

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::data::{DataError, ImageSet, ImageShape};

/// CIFAR-10's classes, in label order, for a directory without `batches.meta.txt`.
pub const CIFAR10_CLASSES: [&str; 10] = [
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
];

const SHAPE: ImageShape = ImageShape {
    channels: 3,
    height: 32,
    width: 32,
};
/// A label byte and an image.
const RECORD_BYTES: usize = 1 + 3 * 32 * 32;
const TRAIN_FILES: [&str; 5] = [
    "data_batch_1.bin",
    "data_batch_2.bin",
    "data_batch_3.bin",
    "data_batch_4.bin",
    "data_batch_5.bin",
];
const TEST_FILE: &str = "test_batch.bin";
/// The class names, one a line, as the distribution ships them.
const META_FILE: &str = "batches.meta.txt";

/// The training and test splits of the CIFAR-10 binary distribution in `dir`.
pub fn read_cifar10(dir: &Path) -> Result<(ImageSet, ImageSet), DataError> {
    let classes = class_names(dir)?;
    let train = read_batches(&TRAIN_FILES.map(|name| dir.join(name)), &classes)?;
    let test = read_batches(&[dir.join(TEST_FILE)], &classes)?;
    Ok((train, test))
}

/// The names in `batches.meta.txt`, or CIFAR-10's own where that file is absent.
fn class_names(dir: &Path) -> Result<Vec<String>, DataError> {
    let path = dir.join(META_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == ErrorKind::NotFound => {
            return Ok(CIFAR10_CLASSES.map(String::from).to_vec());
        }
        Err(source) => return Err(DataError::Io { path, source }),
    };
    let names: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .map(String::from)
        .collect();
    if names.len() != CIFAR10_CLASSES.len() {
        return Err(DataError::Image {
            path,
            what: format!("lists {} class names, CIFAR-10 has 10", names.len()),
        });
    }
    Ok(names)
}

/// The records of `paths`, one file after another.
fn read_batches(paths: &[PathBuf], classes: &[String]) -> Result<ImageSet, DataError> {
    let mut pixels = Vec::new();
    let mut labels = Vec::new();
    for path in paths {
        let invalid = |what: String| DataError::Image {
            path: path.clone(),
            what,
        };
        let bytes = fs::read(path).map_err(|source| DataError::Io {
            path: path.clone(),
            source,
        })?;
        if bytes.is_empty() || !bytes.len().is_multiple_of(RECORD_BYTES) {
            return Err(invalid(format!(
                "is {} bytes, not a whole number of CIFAR-10 records ({RECORD_BYTES} bytes each)",
                bytes.len()
            )));
        }
        for (index, record) in bytes.chunks_exact(RECORD_BYTES).enumerate() {
            let label = record[0];
            if usize::from(label) >= classes.len() {
                return Err(invalid(format!(
                    "record {index} has label {label}; CIFAR-10 labels are 0 to 9"
                )));
            }
            labels.push(u32::from(label));
            pixels.extend_from_slice(&record[1..]);
        }
    }
    Ok(ImageSet::new(pixels, labels, SHAPE, classes.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record whose pixels count up from `seed`.
    fn record(label: u8, seed: u8) -> Vec<u8> {
        let pixels = (0..RECORD_BYTES - 1).map(|i| seed.wrapping_add(i as u8));
        std::iter::once(label).chain(pixels).collect()
    }

    /// A CIFAR-10 directory of one record per training batch (labels 0, 2, 4, 6, 8) and
    /// two test records (labels 9, 1).
    fn cifar_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (batch, name) in TRAIN_FILES.iter().enumerate() {
            let batch = batch as u8;
            fs::write(dir.path().join(name), record(2 * batch, batch)).unwrap();
        }
        let test = [record(9, 100), record(1, 200)].concat();
        fs::write(dir.path().join(TEST_FILE), test).unwrap();
        dir
    }

    #[test]
    fn records_become_chw_images() {
        let dir = cifar_dir();
        let (train, test) = read_cifar10(dir.path()).unwrap();
        assert_eq!((train.len(), train.labels()), (5, &[0, 2, 4, 6, 8][..]));
        assert_eq!(train.shape(), SHAPE);
        assert_eq!(train.image(3), &record(6, 3)[1..]);
        assert_eq!(test.labels(), [9, 1]);
        assert_eq!(test.image(1), &record(1, 200)[1..]);
        assert_eq!(train.classes()[9], "truck");

        let names: Vec<String> = (0..10).map(|i| format!("class {i}")).collect();
        fs::write(dir.path().join(META_FILE), names.join("\n") + "\n\n").unwrap();
        let (train, _) = read_cifar10(dir.path()).unwrap();
        assert_eq!(train.classes(), names);
    }

    #[test]
    fn bad_files_are_named() {
        let error = |dir: &Path| {
            let message = read_cifar10(dir).unwrap_err().to_string();
            assert_eq!(message.lines().count(), 1, "{message}");
            message
        };
        let dir = cifar_dir();
        let path = dir.path().join("data_batch_3.bin");
        fs::write(&path, &record(0, 0)[1..]).unwrap();
        let message = error(dir.path());
        assert!(
            message.contains("data_batch_3.bin: is 3072 bytes, not a whole number"),
            "{message}"
        );

        fs::write(&path, [record(0, 0), record(10, 0)].concat()).unwrap();
        let message = error(dir.path());
        assert!(
            message.contains("data_batch_3.bin: record 1 has label 10"),
            "{message}"
        );

        fs::write(&path, record(0, 0)).unwrap();
        fs::remove_file(dir.path().join(TEST_FILE)).unwrap();
        let message = error(dir.path());
        assert!(
            message.contains("test_batch.bin: No such file"),
            "{message}"
        );

        fs::write(dir.path().join(META_FILE), "cat\ndog\n").unwrap();
        let message = error(dir.path());
        assert!(
            message.contains("batches.meta.txt: lists 2 class names"),
            "{message}"
        );
    }
}
