//! Images as files, one folder per class (`root/<class name>/*.png|jpg|jpeg`), decoded in
//! parallel into an [`ImageSet`] and cached as raw pixels for the next run.

use std::fs;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use image::imageops::{self, FilterType};
use image::{DynamicImage, ImageBuffer, ImageDecoder, ImageError, ImageReader, Pixel};
use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::data::images::image_cache::{read_cache, write_cache};
use crate::data::{DataError, ImageSet, ImageShape};
use crate::quiet_panic::first_line;

/// File extensions read as images, compared without case.
const EXTENSIONS: [&str; 3] = ["png", "jpg", "jpeg"];

/// The color channels every image is converted to; a run file writes 1 or 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "u8", into = "u8")]
pub enum Channels {
    /// One channel: luminance.
    Gray,
    /// Red, green, blue; alpha is dropped.
    #[default]
    Rgb,
}

impl Channels {
    /// Channels per pixel: 1 or 3.
    pub fn count(self) -> usize {
        match self {
            Channels::Gray => 1,
            Channels::Rgb => 3,
        }
    }
}

impl TryFrom<u8> for Channels {
    type Error = String;

    fn try_from(count: u8) -> Result<Self, String> {
        match count {
            1 => Ok(Channels::Gray),
            3 => Ok(Channels::Rgb),
            _ => Err(format!("channels must be 1 (gray) or 3 (RGB), not {count}")),
        }
    }
}

impl From<Channels> for u8 {
    fn from(channels: Channels) -> u8 {
        channels.count() as u8
    }
}

/// How the files of a folder become pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Decoding {
    pub channels: Channels,
    /// `[height, width]` every image is resized to; without it all images must have the
    /// size of the first.
    pub size: Option<[u32; 2]>,
}

/// Where the pixels of a folder came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Decoded,
    Cache,
}

/// One image file and its class.
struct Entry {
    path: PathBuf,
    label: u32,
}

/// Decodes the images under `root`, or reads them from the cache file `cache` when that
/// was written from the same files (paths, sizes, modification times) with the same
/// options; a decoded folder is cached there for the next time. Classes are the sorted
/// names of `root`'s folders; for a test folder, `like` is the training set, whose
/// classes and image size it must share.
pub fn read_image_folder(
    root: &Path,
    decoding: Decoding,
    like: Option<&ImageSet>,
    cache: Option<&Path>,
) -> Result<(ImageSet, Origin), DataError> {
    if let Some(size) = decoding.size.filter(|size| size.contains(&0)) {
        return Err(DataError::Image {
            path: root.to_path_buf(),
            what: format!("cannot resize images to size {size:?}: both sides must be at least 1"),
        });
    }
    let Listing {
        classes,
        files,
        skipped,
    } = list_folder(root, like.map(ImageSet::classes))?;
    println!(
        "{}: {} images in {} classes{}",
        root.display(),
        files.len(),
        classes.len(),
        match skipped.as_slice() {
            [] => String::new(),
            [first, ..] => format!(
                "; skipped {} files that are not .png, .jpg or .jpeg (`{}` …)",
                skipped.len(),
                first.display()
            ),
        }
    );
    let Some(cache) = cache else {
        let images = decode_folder(root, decoding, like, classes, &files)?;
        return Ok((images, Origin::Decoded));
    };
    let fingerprint = fingerprint(root, decoding, like.map(ImageSet::shape), &classes, &files)?;
    if let Some(images) = read_cache(cache, &fingerprint) {
        return Ok((images, Origin::Cache));
    }
    let images = decode_folder(root, decoding, like, classes, &files)?;
    write_cache(cache, &fingerprint, &images)?;
    Ok((images, Origin::Decoded))
}

/// What a folder of class folders holds.
struct Listing {
    /// The class names, in name order.
    classes: Vec<String>,
    /// Every image file of each class, in name order.
    files: Vec<Entry>,
    /// The files in the class folders that are not images.
    skipped: Vec<PathBuf>,
}

/// Lists the class folders of `root`. `known` (the training classes) fixes the labels of a
/// test folder, which may lack some of them.
fn list_folder(root: &Path, known: Option<&[String]>) -> Result<Listing, DataError> {
    let mut folders: Vec<(String, PathBuf)> = Vec::new();
    for path in sorted_entries(root)?
        .into_iter()
        .filter(|path| path.is_dir())
    {
        let Some(name) = path.file_name() else {
            continue;
        };
        // A class name goes into config.json and every prediction: it must be text.
        let Some(name) = name.to_str().map(str::to_owned) else {
            return Err(DataError::Image {
                path,
                what: "the class folder's name is not valid UTF-8: rename it".into(),
            });
        };
        if !name.starts_with('.') {
            folders.push((name, path));
        }
    }
    if folders.is_empty() {
        return Err(DataError::Image {
            path: root.to_path_buf(),
            what: "has no class folders (expected <root>/<class name>/<image>.png|jpg|jpeg)".into(),
        });
    }
    let classes = match known {
        Some(known) => known.to_vec(),
        None if folders.len() == 1 => {
            return Err(DataError::Image {
                path: root.to_path_buf(),
                what: format!(
                    "has one class folder (`{}`): a classifier needs at least two",
                    folders[0].0
                ),
            });
        }
        None => folders.iter().map(|(name, _)| name.clone()).collect(),
    };
    let (mut files, mut skipped) = (Vec::new(), Vec::new());
    for (name, folder) in &folders {
        let label = classes
            .iter()
            .position(|class| class == name)
            .ok_or_else(|| DataError::Image {
                path: folder.clone(),
                what: format!(
                    "class `{name}` is not one of the {} training classes",
                    classes.len()
                ),
            })?;
        let before = files.len();
        for path in sorted_entries(folder)?.into_iter().filter(|p| p.is_file()) {
            match is_image(&path) {
                true => files.push(Entry {
                    path,
                    label: label as u32,
                }),
                false => skipped.push(path),
            }
        }
        if files.len() == before {
            return Err(DataError::Image {
                path: folder.clone(),
                what: "class folder holds no .png, .jpg or .jpeg image".into(),
            });
        }
    }
    Ok(Listing {
        classes,
        files,
        skipped,
    })
}

/// The paths in directory `dir`, sorted.
fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>, DataError> {
    let io_err = |source| DataError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut paths = fs::read_dir(dir)
        .map_err(io_err)?
        .map(|entry| entry.map(|entry| entry.path()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(io_err)?;
    paths.sort();
    Ok(paths)
}

/// Whether `path` names a .png, .jpg or .jpeg file (by its extension, in any case).
pub fn is_image(path: &Path) -> bool {
    path.extension().is_some_and(|ext| {
        EXTENSIONS
            .iter()
            .any(|known| ext.eq_ignore_ascii_case(known))
    })
}

/// A digest of everything the decoded pixels depend on: the folder, each file's path,
/// length and modification time, the decoding options and the classes and shape of the
/// training set a test folder follows.
fn fingerprint(
    root: &Path,
    decoding: Decoding,
    like: Option<ImageShape>,
    classes: &[String],
    files: &[Entry],
) -> Result<String, DataError> {
    let root = fs::canonicalize(root).map_err(|source| DataError::Io {
        path: root.to_path_buf(),
        source,
    })?;
    let stamps = files
        .par_iter()
        .map(|file| {
            let metadata = fs::metadata(&file.path).map_err(|source| DataError::Io {
                path: file.path.clone(),
                source,
            })?;
            let modified: Option<Duration> = metadata
                .modified()
                .ok()
                .and_then(|time| time.duration_since(UNIX_EPOCH).ok());
            Ok((file.path.to_string_lossy(), metadata.len(), modified))
        })
        .collect::<Result<Vec<_>, DataError>>()?;
    let listing = serde_json::to_vec(&(root.to_string_lossy(), decoding, like, classes, stamps))
        .expect("the listing is plain data");
    Ok(format!("{:x}", Sha256::digest(&listing)))
}

/// Decodes every file on all cores, with a progress bar on a terminal.
fn decode_folder(
    root: &Path,
    decoding: Decoding,
    like: Option<&ImageSet>,
    classes: Vec<String>,
    files: &[Entry],
) -> Result<ImageSet, DataError> {
    let channels = decoding.channels.count();
    let (shape, reference) = match (like, decoding.size) {
        (Some(train), _) => (train.shape(), "the training images are".to_string()),
        (None, Some([height, width])) => {
            let shape = ImageShape {
                channels,
                height: height as usize,
                width: width as usize,
            };
            (shape, "the size asked for is".into())
        }
        (None, None) => {
            let first = &files[0].path;
            let (shape, _) = decode(first, decoding)?;
            (shape, format!("the first image, {}, is", first.display()))
        }
    };
    let bar = if std::io::stderr().is_terminal() {
        ProgressBar::new(files.len() as u64).with_style(
            ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({eta})")
                .expect("the template is valid"),
        )
    } else {
        ProgressBar::hidden()
    };
    bar.set_message(format!("decoding {}", root.display()));
    let mut pixels = vec![0; files.len() * shape.bytes()];
    let decoded: Vec<Result<(), DataError>> = pixels
        .par_chunks_mut(shape.bytes())
        .zip(files)
        .map(|(out, file)| {
            let (found, interleaved) = decode(&file.path, decoding)?;
            bar.inc(1);
            if found != shape {
                return Err(DataError::Image {
                    path: file.path.clone(),
                    what: format!(
                        "image is {} pixels but {reference} {}: set `size = [{}, {}]` \
                         ([height, width]) in [data] to resize every image to that size",
                        side_text(found),
                        side_text(shape),
                        shape.height,
                        shape.width
                    ),
                });
            }
            to_planes(&interleaved, channels, out);
            Ok(())
        })
        .collect();
    bar.finish_and_clear();
    decoded.into_iter().collect::<Result<(), _>>()?;
    let labels = files.iter().map(|file| file.label).collect();
    Ok(ImageSet::new(pixels, labels, shape, classes))
}

/// One image file as the CHW pixels of `shape`, decoded as `decoding` says (what a model
/// trained on images of `shape` is given to predict).
pub fn read_image_file(
    path: &Path,
    decoding: Decoding,
    shape: ImageShape,
) -> Result<Vec<u8>, DataError> {
    let (found, interleaved) = decode(path, decoding)?;
    if found != shape {
        return Err(DataError::Image {
            path: path.to_path_buf(),
            what: format!(
                "image is {} pixels but the model was trained on {} images",
                side_text(found),
                side_text(shape)
            ),
        });
    }
    let mut pixels = vec![0; shape.bytes()];
    to_planes(&interleaved, shape.channels, &mut pixels);
    Ok(pixels)
}

/// `path` itself when it is a file, else every .png, .jpg and .jpeg file under the folder
/// `path` (its subfolders too), sorted.
pub fn image_files(path: &Path) -> Result<Vec<PathBuf>, DataError> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    let mut folders = vec![path.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in sorted_entries(&folder)? {
            if entry.is_dir() {
                folders.push(entry);
            } else if is_image(&entry) {
                files.push(entry);
            }
        }
    }
    if files.is_empty() {
        return Err(DataError::Image {
            path: path.to_path_buf(),
            what: "holds no .png, .jpg or .jpeg image".into(),
        });
    }
    files.sort();
    Ok(files)
}

/// `width×height`, as image sizes are usually written.
fn side_text(shape: ImageShape) -> String {
    format!("{}×{}", shape.width, shape.height)
}

/// The most pixels an image may declare (8192×8192): a larger one is refused from its header,
/// before a decompression bomb can take the memory its decoding would.
const MAX_IMAGE_PIXELS: u64 = 1 << 26;

/// The pixels of one file, upright (as its EXIF orientation says), converted and resized
/// as `decoding` asks, channels interleaved.
fn decode(path: &Path, decoding: Decoding) -> Result<(ImageShape, Vec<u8>), DataError> {
    let unreadable = |error: ImageError| DataError::Image {
        path: path.to_path_buf(),
        what: format!("not a readable image: {}", first_line(&error.to_string())),
    };
    let reader = ImageReader::open(path)
        .and_then(ImageReader::with_guessed_format)
        .map_err(|source| DataError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    let mut decoder = reader.into_decoder().map_err(unreadable)?;
    let (width, height) = decoder.dimensions();
    if u64::from(width) * u64::from(height) > MAX_IMAGE_PIXELS {
        return Err(DataError::Image {
            path: path.to_path_buf(),
            what: format!(
                "its header declares {width}×{height} pixels, more than the {} megapixels \
                 cubenet decodes: shrink it first",
                MAX_IMAGE_PIXELS >> 20
            ),
        });
    }
    let orientation = decoder.orientation().map_err(unreadable)?;
    let mut image = DynamicImage::from_decoder(decoder).map_err(unreadable)?;
    image.apply_orientation(orientation);
    let (interleaved, width, height) = match decoding.channels {
        Channels::Gray => resized(image.to_luma8(), decoding.size),
        Channels::Rgb => resized(image.to_rgb8(), decoding.size),
    };
    let shape = ImageShape {
        channels: decoding.channels.count(),
        height: height as usize,
        width: width as usize,
    };
    Ok((shape, interleaved))
}

/// The samples, width and height of `image` resized to `size` (`[height, width]`).
fn resized<P: Pixel<Subpixel = u8> + 'static>(
    image: ImageBuffer<P, Vec<u8>>,
    size: Option<[u32; 2]>,
) -> (Vec<u8>, u32, u32) {
    let image = match size {
        Some([height, width]) if image.dimensions() != (width, height) => {
            imageops::resize(&image, width, height, FilterType::Triangle)
        }
        _ => image,
    };
    let (width, height) = image.dimensions();
    (image.into_raw(), width, height)
}

/// Interleaved samples (`RGBRGB…`) as channel planes (`RR…GG…BB…`).
fn to_planes(interleaved: &[u8], channels: usize, out: &mut [u8]) {
    let plane = out.len() / channels;
    for (pixel, samples) in interleaved.chunks_exact(channels).enumerate() {
        for (channel, &sample) in samples.iter().enumerate() {
            out[channel * plane + pixel] = sample;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::{GrayImage, RgbImage};
    use std::fs::File;
    use std::time::SystemTime;

    /// A 3×2 RGB image whose pixels all differ, shifted by `seed`.
    fn rgb(seed: u8) -> RgbImage {
        RgbImage::from_fn(3, 2, |x, y| {
            let base = seed.wrapping_add((10 * x + 40 * y) as u8);
            image::Rgb([base, base.wrapping_add(1), base.wrapping_add(2)])
        })
    }

    /// `rgb(seed)` as the CHW planes the loader should produce.
    fn planes(image: &RgbImage) -> Vec<u8> {
        (0..3)
            .flat_map(|c| image.pixels().map(move |p| p.0[c]))
            .collect()
    }

    fn folder(classes: &[(&str, &[(&str, u8)])]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (class, files) in classes {
            fs::create_dir(dir.path().join(class)).unwrap();
            for (name, seed) in *files {
                rgb(*seed).save(dir.path().join(class).join(name)).unwrap();
            }
        }
        dir
    }

    fn read(root: &Path, decoding: Decoding) -> Result<ImageSet, DataError> {
        read_image_folder(root, decoding, None, None).map(|(images, _)| images)
    }

    fn error(root: &Path, decoding: Decoding) -> String {
        let message = read(root, decoding).unwrap_err().to_string();
        assert_eq!(message.lines().count(), 1, "{message}");
        message
    }

    #[test]
    fn pngs_decode_exactly_with_classes_in_name_order() {
        let dir = folder(&[
            ("zebra", &[("b.png", 1), ("a.PNG", 2)]),
            ("ant", &[("x.png", 3)]),
        ]);
        fs::write(dir.path().join("zebra/notes.txt"), "ignored").unwrap();
        fs::write(dir.path().join("loose.png"), "ignored").unwrap();
        fs::create_dir(dir.path().join(".hidden")).unwrap();
        let images = read(dir.path(), Decoding::default()).unwrap();
        assert_eq!(images.classes(), ["ant", "zebra"]);
        assert_eq!(images.labels(), [0, 1, 1]);
        let shape = ImageShape {
            channels: 3,
            height: 2,
            width: 3,
        };
        assert_eq!(images.shape(), shape);
        for (index, seed) in [3, 2, 1].into_iter().enumerate() {
            assert_eq!(images.image(index), planes(&rgb(seed)), "image {index}");
        }
    }

    #[test]
    fn channels_are_converted() {
        let dir = tempfile::tempdir().unwrap();
        // Class `c` holds the image looked at; `d`, a second class, a copy of it.
        for class in ["c", "d"] {
            fs::create_dir(dir.path().join(class)).unwrap();
        }
        let colors = [[0, 0, 0], [255, 255, 255], [90, 90, 90], [255, 0, 0]];
        let rgb = RgbImage::from_fn(4, 1, |x, _| image::Rgb(colors[x as usize]));
        for class in ["c", "d"] {
            rgb.save(dir.path().join(class).join("rgb.png")).unwrap();
        }
        let gray = Decoding {
            channels: Channels::Gray,
            size: None,
        };
        let luma = read(dir.path(), gray).unwrap();
        assert_eq!(luma.shape().channels, 1);
        assert_eq!(&luma.image(0)[..3], [0, 255, 90]);
        assert!((40..80).contains(&luma.image(0)[3]), "red is a dark gray");

        let gray = GrayImage::from_raw(2, 1, vec![7, 200]).unwrap();
        for class in ["c", "d"] {
            fs::remove_file(dir.path().join(class).join("rgb.png")).unwrap();
            gray.save(dir.path().join(class).join("gray.png")).unwrap();
        }
        let color = read(dir.path(), Decoding::default()).unwrap();
        assert_eq!(color.image(0), [7, 200, 7, 200, 7, 200]);
    }

    #[test]
    fn size_resizes_every_image() {
        let dir = folder(&[("a", &[("one.png", 0)]), ("b", &[("two.png", 1)])]);
        GrayImage::from_pixel(8, 4, image::Luma([100]))
            .save(dir.path().join("a/big.jpg"))
            .unwrap();
        let decoding = Decoding {
            channels: Channels::Gray,
            size: Some([5, 7]),
        };
        let images = read(dir.path(), decoding).unwrap();
        let shape = ImageShape {
            channels: 1,
            height: 5,
            width: 7,
        };
        assert_eq!((images.len(), images.shape()), (3, shape));
        // A flat gray stays flat through JPEG and resizing, give or take rounding.
        assert!(images.image(0).iter().all(|p| p.abs_diff(100) <= 2));
        let zero = Decoding {
            size: Some([0, 7]),
            ..decoding
        };
        assert!(error(dir.path(), zero).contains("at least 1"));
    }

    #[test]
    fn bad_folders_and_files_are_named() {
        let dir = folder(&[("a", &[("one.png", 0)]), ("b", &[("two.png", 0)])]);
        let root = dir.path();
        RgbImage::new(5, 5).save(root.join("b/three.png")).unwrap();
        let message = error(root, Decoding::default());
        assert!(
            message.contains("b/three.png: image is 5×5 pixels but the first image"),
            "{message}"
        );
        assert!(message.contains("a/one.png, is 3×2"), "{message}");

        fs::write(root.join("b/three.png"), b"not a png").unwrap();
        let message = error(root, Decoding::default());
        assert!(
            message.contains("b/three.png: not a readable image"),
            "{message}"
        );

        fs::remove_file(root.join("b/three.png")).unwrap();
        fs::remove_file(root.join("b/two.png")).unwrap();
        let message = error(root, Decoding::default());
        assert!(
            message.ends_with("/b: class folder holds no .png, .jpg or .jpeg image"),
            "{message}"
        );

        let empty = tempfile::tempdir().unwrap();
        assert!(error(empty.path(), Decoding::default()).contains("has no class folders"));
        let message = error(&empty.path().join("absent"), Decoding::default());
        assert!(message.contains("absent: No such file"), "{message}");
    }

    #[cfg(unix)]
    #[test]
    fn a_class_folder_whose_name_is_not_text_is_refused() {
        use std::os::unix::ffi::OsStrExt;
        let dir = folder(&[("a", &[("1.png", 0)])]);
        let odd = dir.path().join(std::ffi::OsStr::from_bytes(b"b\xff"));
        fs::create_dir(&odd).unwrap();
        rgb(1).save(odd.join("2.png")).unwrap();
        let message = error(dir.path(), Decoding::default());
        assert!(message.contains("name is not valid UTF-8"), "{message}");
    }

    #[test]
    fn a_test_folder_follows_the_training_classes_and_size() {
        let train = folder(&[("a", &[("1.png", 0)]), ("b", &[("2.png", 5)])]);
        let test = folder(&[("b", &[("3.png", 9)])]);
        let train_set = read(train.path(), Decoding::default()).unwrap();
        let (test_set, _) =
            read_image_folder(test.path(), Decoding::default(), Some(&train_set), None).unwrap();
        assert_eq!(
            (test_set.classes(), test_set.labels()),
            (train_set.classes(), &[1][..])
        );

        RgbImage::new(4, 4)
            .save(test.path().join("b/4.png"))
            .unwrap();
        let message = read_image_folder(test.path(), Decoding::default(), Some(&train_set), None)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("b/4.png: image is 4×4 pixels but the training images are 3×2"),
            "{message}"
        );

        fs::create_dir(test.path().join("c")).unwrap();
        let message = read_image_folder(test.path(), Decoding::default(), Some(&train_set), None)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("c: class `c` is not one of the 2 training classes"),
            "{message}"
        );
    }

    #[test]
    fn the_cache_is_read_until_a_file_or_option_changes() {
        let dir = folder(&[("a", &[("1.png", 0), ("2.png", 1)]), ("b", &[("3.png", 2)])]);
        let cache_dir = tempfile::tempdir().unwrap();
        let cache = cache_dir.path().join("train.cache");
        let load = |decoding| read_image_folder(dir.path(), decoding, None, Some(&cache)).unwrap();

        let (decoded, origin) = load(Decoding::default());
        assert_eq!(origin, Origin::Decoded);
        let (cached, origin) = load(Decoding::default());
        assert_eq!((origin, &cached), (Origin::Cache, &decoded));

        let gray = Decoding {
            channels: Channels::Gray,
            size: None,
        };
        assert_eq!(load(gray).1, Origin::Decoded);
        assert_eq!(load(Decoding::default()).1, Origin::Decoded);
        assert_eq!(load(Decoding::default()).1, Origin::Cache);

        let changed = dir.path().join("a/2.png");
        rgb(77).save(&changed).unwrap();
        File::options()
            .write(true)
            .open(&changed)
            .unwrap()
            .set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000))
            .unwrap();
        let (reread, origin) = load(Decoding::default());
        assert_eq!(origin, Origin::Decoded);
        assert_eq!(reread.image(1), planes(&rgb(77)));

        fs::write(&cache, b"cnimages garbage").unwrap();
        let (rebuilt, origin) = load(Decoding::default());
        assert_eq!((origin, &rebuilt), (Origin::Decoded, &reread));
        assert_eq!(load(Decoding::default()).1, Origin::Cache);
    }
}
