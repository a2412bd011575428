//! Image runs beyond MNIST: an RGB image folder trained from a run file with augmentation,
//! evaluated and predicted through the `cubenet` binary; bad image folders as one-line
//! errors; a run-file CNN with LeNet's layers.

use std::fs;
use std::path::{Path, PathBuf};

use cubenet::data::{Channels, ImageSet, ImageShape, ImageSource};
use cubenet::device::BackendKind;
use cubenet::model::{ImageModelConfig, LeNetConfig};
use cubenet::run_file::{Job, RunConfig};
use cubenet::train::{
    CONFUSION_MATRIX_FILE, ImageJob, PER_CLASS_ACCURACY_FILE, Run, RunDir, RunJob,
};
use image::{GrayImage, Rgb, RgbImage};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::cli::{assert_user_error, cubenet, run};

/// The colour and shape of each of the five classes.
const CLASSES: [&str; 5] = [
    "blue-bar",
    "green-disc",
    "red-square",
    "white-cross",
    "yellow-ring",
];
const COLORS: [[u8; 3]; 5] = [
    [40, 60, 230],
    [40, 210, 60],
    [220, 40, 40],
    [230, 230, 230],
    [230, 210, 40],
];

/// A 32×32 image of class `class`: its shape in its colour (both jittered) at a random
/// place on a dark, noisy background.
pub(crate) fn shape_image(class: usize, rng: &mut StdRng) -> RgbImage {
    let (cx, cy): (i32, i32) = (rng.random_range(10..22), rng.random_range(10..22));
    let radius: i32 = rng.random_range(5..9);
    let color = COLORS[class].map(|c| c.saturating_add(rng.random_range(0..20)));
    let mut image = RgbImage::from_fn(32, 32, |_, _| {
        let gray = rng.random_range(0..50);
        Rgb([gray, gray, gray])
    });
    for y in 0..32i32 {
        for x in 0..32i32 {
            let (dx, dy) = (x - cx, y - cy);
            let inside = match class {
                0 => dy.abs() <= 2 && dx.abs() <= radius,
                1 => dx * dx + dy * dy <= radius * radius,
                2 => dx.abs() <= radius && dy.abs() <= radius,
                3 => (dx.abs() <= 1 || dy.abs() <= 1) && dx.abs().max(dy.abs()) <= radius,
                _ => {
                    let d = dx * dx + dy * dy;
                    d <= radius * radius && d >= (radius - 3) * (radius - 3)
                }
            };
            if inside {
                image.put_pixel(x as u32, y as u32, Rgb(color));
            }
        }
    }
    image
}

/// `per_class` PNGs of every class under `root/<class>/`.
pub(crate) fn write_folder(root: &Path, per_class: usize, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    for (class, name) in CLASSES.iter().enumerate() {
        let folder = root.join(name);
        fs::create_dir_all(&folder).unwrap();
        for i in 0..per_class {
            shape_image(class, &mut rng)
                .save(folder.join(format!("{i:03}.png")))
                .unwrap();
        }
    }
}

/// A run file for an image folder at `root` (and `test_root`), with a small CNN.
fn run_file(dir: &Path, root: &Path, test_root: Option<&Path>, extra_data: &str) -> PathBuf {
    let test = test_root.map_or(String::new(), |t| format!("test_root = {:?}\n", t));
    let text = format!(
        "backend = \"ndarray\"\nartifact_dir = {:?}\n\
         [data]\nkind = \"image_folder\"\nroot = {:?}\n{test}channels = 3\n{extra_data}\n\
         [model]\nkind = \"cnn\"\nlayers = [\n\
           {{ conv = 8, kernel = 3, padding = 1 }}, {{ relu = true }}, {{ pool = 2 }},\n\
           {{ conv = 16, kernel = 3, padding = 1 }}, {{ relu = true }}, {{ pool = 2 }},\n\
           {{ dense = \"classes\" }},\n]\n\
         [optimizer]\nkind = \"adam\"\nlearning_rate = 0.005\n\
         [training]\nepochs = 2\nbatch_size = 16\n",
        dir.join("artifacts"),
        root,
    );
    let path = dir.join("run.toml");
    fs::write(&path, text).unwrap();
    path
}

/// The accuracy in `test accuracy: NN.NN%`.
pub(crate) fn accuracy(stdout: &str) -> f64 {
    stdout
        .lines()
        .find_map(|line| line.strip_prefix("test accuracy: "))
        .and_then(|s| s.strip_suffix('%'))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no test accuracy in {stdout}"))
}

#[test]
fn an_rgb_image_folder_trains_evaluates_and_predicts() {
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = (dir.path().join("train"), dir.path().join("test"));
    write_folder(&train, 80, 1);
    write_folder(&test, 20, 2);
    fs::write(train.join("red-square/notes.txt"), "not an image").unwrap();
    let config = run_file(
        dir.path(),
        &train,
        Some(&test),
        "size = [32, 32]\nflip = true\npad = 2",
    );
    let (output, stdout, stderr) = run(cubenet().args(["train", "--config"]).arg(&config));
    assert!(output.status.success(), "{stderr}");
    // The layer table comes first.
    assert!(
        stdout.contains("8x32x32") && stdout.contains("total"),
        "{stdout}"
    );
    assert!(
        stdout.contains("400 images in 5 classes; skipped 1 files that are not .png"),
        "{stdout}"
    );
    let trained = accuracy(&stdout);
    assert!(trained >= 60.0, "five classes, chance is 20%: {stdout}");

    let artifacts = dir.path().join("artifacts");
    let saved: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(artifacts.join("config.json")).unwrap()).unwrap();
    assert_eq!(saved["classes"], serde_json::json!(CLASSES));
    assert_eq!(saved["normalization"]["mean"].as_array().unwrap().len(), 3);
    assert_eq!(
        saved["augment"],
        serde_json::json!({ "flip": true, "pad": 2, "cutout": 0, "label_smoothing": 0.0 })
    );
    assert!(artifacts.join("cache/train-images.cache").is_file());

    // eval re-creates the test split: the same accuracy as training's.
    let (output, stdout, stderr) = run(cubenet()
        .args(["eval", "--backend", "ndarray", "--model-dir"])
        .arg(&artifacts));
    assert!(output.status.success(), "{stderr}");
    assert_eq!(accuracy(&stdout), trained, "{stdout}");

    // A folder: a CSV of (path, class, probability), one row an image.
    let csv = dir.path().join("predictions.csv");
    let (output, stdout, stderr) = run(cubenet()
        .args(["predict", "--backend", "ndarray", "--model-dir"])
        .arg(&artifacts)
        .arg(&test)
        .arg("--output")
        .arg(&csv));
    assert!(output.status.success(), "{stderr}");
    assert!(stdout.contains("wrote 100 predictions"), "{stdout}");
    let text = fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("path,class,probability"));
    let mut correct = 0;
    for line in lines {
        let [path, class, p] = line.split(',').collect::<Vec<_>>()[..] else {
            panic!("{line}");
        };
        assert!(CLASSES.contains(&class), "{line}");
        assert!((0.0..=1.0).contains(&p.parse::<f64>().unwrap()), "{line}");
        correct += usize::from(Path::new(path).parent().unwrap().ends_with(class));
    }
    assert!(correct >= 50, "{correct} of 100 right");

    // A corrupt image among them: one line saying so, the earlier predictions kept.
    let written = fs::read(&csv).unwrap();
    fs::write(
        test.join("red-square/013.png"),
        b"\x89PNG\r\n\x1a\nnot a png",
    )
    .unwrap();
    assert_user_error(
        cubenet()
            .args(["predict", "--backend", "ndarray", "--model-dir"])
            .arg(&artifacts)
            .arg(&test)
            .arg("--output")
            .arg(&csv),
        "red-square/013.png",
    );
    let (_, _, stderr) = run(cubenet()
        .args(["predict", "--backend", "ndarray", "--model-dir"])
        .arg(&artifacts)
        .arg(&test));
    assert!(stderr.contains("(no predictions were written)"), "{stderr}");
    assert_eq!(fs::read(&csv).unwrap(), written);
    fs::remove_file(test.join("red-square/013.png")).unwrap();

    // One image: a line on stdout.
    let (output, stdout, stderr) = run(cubenet()
        .args(["predict", "--backend", "ndarray", "--model-dir"])
        .arg(&artifacts)
        .arg(test.join("red-square/000.png")));
    assert!(output.status.success(), "{stderr}");
    assert!(
        regex_lite::Regex::new(r"^class [a-z-]+ \(probability [01]\.\d{4}\)$")
            .unwrap()
            .is_match(stdout.trim()),
        "{stdout}"
    );
}

/// `cubenet train` on a folder with one broken thing: exit 2, one line naming `named`.
fn assert_bad_folder(break_it: impl FnOnce(&Path), named: &str) {
    let dir = tempfile::tempdir().unwrap();
    let train = dir.path().join("train");
    write_folder(&train, 3, 3);
    break_it(&train);
    let config = run_file(dir.path(), &train, None, "");
    assert_user_error(cubenet().args(["train", "--config"]).arg(&config), named);
}

#[test]
fn a_corrupt_png_is_one_line_naming_the_file() {
    assert_bad_folder(
        |train| {
            fs::write(
                train.join("green-disc/001.png"),
                b"\x89PNG\r\n\x1a\nnot a png",
            )
            .unwrap()
        },
        "green-disc/001.png",
    );
}

#[test]
fn an_image_of_another_size_is_one_line_naming_the_file() {
    assert_bad_folder(
        |train| {
            RgbImage::new(16, 16)
                .save(train.join("red-square/002.png"))
                .unwrap()
        },
        "red-square/002.png",
    );
}

#[test]
fn a_single_class_folder_is_refused() {
    assert_bad_folder(
        |train| {
            for class in &CLASSES[1..] {
                fs::remove_dir_all(train.join(class)).unwrap();
            }
        },
        "has one class folder",
    );
}

#[test]
fn an_empty_class_folder_is_one_line_naming_the_folder() {
    assert_bad_folder(
        |train| fs::create_dir(train.join("zz-empty")).unwrap(),
        "zz-empty",
    );
}

#[test]
fn a_run_file_cnn_with_lenets_layers_trains_on_mnist() {
    let text = r#"
        [data]
        kind = "mnist"
        limit_train = 1500
        limit_test = 500
        [model]
        kind = "cnn"
        kernels = "burn"
        layers = [
          { conv = 6, kernel = 5, padding = 2 }, { relu = true }, { pool = 2 },
          { conv = 16, kernel = 5 }, { relu = true }, { pool = 2 },
          { dense = 32 }, { relu = true }, { dense = "classes" },
        ]
        [optimizer]
        kind = "adam"
        learning_rate = 0.005
        [training]
        epochs = 2
        batch_size = 32
    "#;
    let (_, job) = RunConfig::load_str(text, &[]).unwrap().resolve().unwrap();
    let Job::Image(ImageJob { config, source }) = job else {
        panic!("an image job")
    };
    let ImageModelConfig::Cnn(cnn) = &config.model else {
        panic!("a CNN")
    };
    let preset = LeNetConfig::new()
        .with_channels([6, 16])
        .with_hidden(32)
        .cnn()
        .unwrap();
    assert_eq!(cnn.layers, preset.layers);
    let source = match source {
        ImageSource::Mnist(_) => ImageSource::Mnist(crate::common::mnist_source()),
        other => other,
    };
    let dir = tempfile::tempdir().unwrap();
    let job = ImageJob { config, source };
    let run = Run::fresh(RunDir::claim(dir.path(), &job.inputs()).unwrap());
    let confusion = job.launch(run, BackendKind::Ndarray).unwrap();
    assert_eq!(confusion.total(), 500);
    assert!(
        confusion.accuracy() >= 0.7,
        "test accuracy {}",
        confusion.accuracy()
    );
    // The test set's confusion matrix and per-class accuracy are in the artifacts.
    let csv = fs::read_to_string(dir.path().join(PER_CLASS_ACCURACY_FILE)).unwrap();
    assert_eq!(csv.lines().count(), 11, "{csv}");
    assert!(csv.starts_with("class,images,accuracy\n0,"), "{csv}");
    assert!(dir.path().join(CONFUSION_MATRIX_FILE).is_file());
}

/// The first `count` images of `set` as gray PNGs under `root/<class>/<index>.png`.
fn write_pngs(set: &ImageSet, count: usize, root: &Path) {
    let ImageShape { height, width, .. } = set.shape();
    for index in 0..count {
        let folder = root.join(&set.classes()[set.label(index) as usize]);
        fs::create_dir_all(&folder).unwrap();
        GrayImage::from_raw(width as u32, height as u32, set.image(index).to_vec())
            .unwrap()
            .save(folder.join(format!("{index:05}.png")))
            .unwrap();
    }
}

/// MNIST exported to PNG folders reads back as the IDX files' pixels and labels, in class
/// order (the folders' order), so that both sources train on the same images.
#[test]
fn mnist_exported_to_png_folders_reads_back_as_the_idx_images() {
    const TRAIN: usize = 400;
    const TEST: usize = 150;
    let idx = ImageSource::Mnist(crate::common::mnist_source())
        .load(None)
        .unwrap();
    let idx_test = idx.test.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (train_root, test_root) = (dir.path().join("train"), dir.path().join("test"));
    write_pngs(&idx.train, TRAIN, &train_root);
    write_pngs(&idx_test, TEST, &test_root);
    let folder = ImageSource::ImageFolder {
        root: train_root,
        test_root: Some(test_root),
        channels: Channels::Gray,
        size: None,
    }
    .load(Some(&dir.path().join("cache")))
    .unwrap();
    for (idx, png, count) in [
        (&idx.train, &folder.train, TRAIN),
        (&idx_test, folder.test.as_ref().unwrap(), TEST),
    ] {
        assert_eq!(png.classes(), idx.classes());
        assert_eq!(png.shape(), idx.shape());
        // Files are read class by class, each class in index order.
        let mut order: Vec<usize> = (0..count).collect();
        order.sort_by_key(|&i| idx.label(i));
        assert_eq!(png.len(), count);
        for (read, &index) in order.iter().enumerate() {
            assert_eq!(png.label(read), idx.label(index), "image {index}");
            assert_eq!(png.image(read), idx.image(index), "image {index}");
        }
    }
}
