//! What cubenet does with files it did not write, damaged checkpoints and model files, a full
//! disk and implausible labels: one line, exit code 2, nothing lost, no partial file.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cli::{assert_user_error, cubenet, run};
use crate::common::configs;

/// `cubenet train` of the XOR run file for `epochs` epochs into `dir`, plus `extra` flags.
pub(crate) fn xor(dir: &Path, epochs: usize, extra: &[&str]) -> Command {
    let mut command = cubenet();
    command
        .args(["train", "--config"])
        .arg(configs().join("xor.toml"))
        .args(["--epochs", &epochs.to_string()])
        .args(extra)
        .arg("--artifact-dir")
        .arg(dir);
    command
}

pub(crate) fn succeeds(command: &mut Command) -> String {
    let (output, stdout, stderr) = run(command);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    stdout
}

/// Every file below `dir` with its bytes, sorted by path.
pub(crate) fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        for entry in fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            match path.is_dir() {
                true => stack.push(path),
                false => files.push((path.clone(), fs::read(&path).unwrap())),
            }
        }
    }
    files.sort();
    files
}

/// A CSV of `x` (0..rows) and `y` as `label(row)`.
pub(crate) fn write_csv(path: &Path, rows: usize, label: impl Fn(usize) -> usize) {
    let mut text = String::from("x,y\n");
    for row in 0..rows {
        text += &format!("{row},{}\n", label(row));
    }
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// `cubenet train` of a multi-class MLP on the CSV at `csv` into `dir`.
pub(crate) fn csv_run(csv: &Path, dir: &Path) -> Command {
    let mut command = cubenet();
    command
        .args(["train", "--backend", "ndarray", "--config"])
        .arg(configs().join("csv_example.toml"))
        .arg("--set")
        .arg(format!("data.path=\"{}\"", csv.display()))
        .args([
            "--set",
            "data.features=[\"x\"]",
            "--set",
            "model.task=\"multiclass\"",
        ])
        .args([
            "--set",
            "model.hidden=[4]",
            "--epochs",
            "1",
            "--artifact-dir",
        ])
        .arg(dir);
    command
}

#[test]
fn a_directory_of_other_files_is_refused_and_left_as_it_was() {
    let root = tempfile::tempdir().unwrap();
    // The user's images in `train/`, where burn-train keeps its training logs.
    let photos = root.path().join("photos");
    for (class, name) in [("cat", "a.png"), ("dog", "b.png"), ("dog", "notes.txt")] {
        fs::create_dir_all(photos.join("train").join(class)).unwrap();
        fs::write(photos.join("train").join(class).join(name), name).unwrap();
    }
    let before = snapshot(&photos);
    assert_user_error(
        &mut xor(&photos, 1, &[]),
        "holds files that no cubenet run wrote",
    );
    assert_eq!(snapshot(&photos), before);

    // An artifact directory that is a file.
    let file = root.path().join("file");
    fs::write(&file, "mine").unwrap();
    assert_user_error(&mut xor(&file, 1, &[]), "it is a file, not a directory");
    assert_eq!(fs::read(&file).unwrap(), b"mine");
}

#[test]
fn a_fresh_run_replaces_only_what_runs_wrote() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("run");
    succeeds(&mut xor(&dir, 2, &[]));
    assert!(dir.join(cubenet::train::MARKER_FILE).is_file());
    // The user's own files beside the run's, also inside the folders runs write.
    let mine = [
        dir.join("notes.txt"),
        dir.join("checkpoint/mine.txt"),
        dir.join("train/keep.txt"),
    ];
    for path in &mine {
        fs::write(path, "mine").unwrap();
    }
    succeeds(&mut xor(&dir, 1, &[]));
    for path in &mine {
        assert_eq!(fs::read(path).unwrap(), b"mine", "{}", path.display());
    }
    // The second run's own files replaced the first's: one epoch of logs and checkpoints.
    assert!(dir.join("train/epoch-1").is_dir() && !dir.join("train/epoch-2").exists());
    assert!(!dir.join("checkpoint/model-2.mpk").exists());
}

/// Only cubenet's mark makes a folder a run's: files that look like a run's (a benchmark's
/// `results.json`, a checkpoint folder's `run-settings.json`) do not, and a run there is
/// refused with nothing written, deleted or replaced.
#[test]
fn a_look_alike_folder_is_not_taken_for_a_runs() {
    let root = tempfile::tempdir().unwrap();
    let results = root.path().join("results");
    fs::create_dir_all(results.join("train/epoch-1")).unwrap();
    fs::write(results.join("results.json"), "{}").unwrap();
    fs::write(results.join("config.json"), "mine").unwrap();
    fs::write(results.join("train/epoch-1/data.csv"), "mine").unwrap();
    let before = snapshot(&results);
    assert_user_error(
        &mut xor(&results, 1, &[]),
        "holds files that no cubenet run wrote",
    );
    assert_eq!(snapshot(&results), before);

    let settings = root.path().join("settings");
    fs::create_dir_all(settings.join("checkpoint")).unwrap();
    fs::create_dir_all(settings.join("valid/epoch-7")).unwrap();
    fs::write(settings.join("checkpoint/run-settings.json"), "{}").unwrap();
    fs::write(settings.join("valid/epoch-7/Loss.log"), "mine").unwrap();
    fs::write(settings.join("model.mpk"), "mine").unwrap();
    let before = snapshot(&settings);
    assert_user_error(
        &mut xor(&settings, 1, &[]),
        "not the mark `.cubenet-run` that makes a folder a cubenet run's; if an older cubenet \
         wrote them, create an empty `.cubenet-run` file there",
    );
    assert_eq!(snapshot(&settings), before);
    // With the mark, as the message says, the folder is a run's again.
    fs::write(settings.join(cubenet::train::MARKER_FILE), "").unwrap();
    succeeds(&mut xor(&settings, 1, &[]));
}

#[test]
fn data_where_runs_write_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("run");
    let csv = dir.join("train/rows.csv");
    write_csv(&csv, 60, |row| row % 3);
    // An earlier run marked the directory; the data still must not lie in `train/`.
    fs::write(dir.join(cubenet::train::MARKER_FILE), "").unwrap();
    assert_user_error(&mut csv_run(&csv, &dir), "lies where runs write");
    assert!(csv.is_file());
    // A folder of its own inside the artifact directory is fine.
    let kept = dir.join("data/rows.csv");
    write_csv(&kept, 60, |row| row % 3);
    succeeds(&mut csv_run(&kept, &dir));
    assert!(csv.is_file() && kept.is_file());
}

#[test]
fn a_damaged_checkpoint_with_no_whole_one_before_it_is_one_line() {
    let root = tempfile::tempdir().unwrap();
    for (file, damage) in [
        ("optim-1.mpk", "truncated"),
        ("scheduler-1.mpk", "empty"),
        ("model-1.mpk", "truncated"),
    ] {
        let dir = root.path().join(file);
        succeeds(&mut xor(&dir, 1, &[]));
        let path = dir.join("checkpoint").join(file);
        let bytes = fs::read(&path).unwrap();
        let kept = match damage {
            "empty" => 0,
            _ => bytes.len() / 2,
        };
        fs::write(&path, &bytes[..kept]).unwrap();
        assert_user_error(
            &mut xor(&dir, 2, &["--resume"]),
            &format!("{file}: the file is damaged or truncated"),
        );
    }
}

#[test]
fn a_truncated_model_file_is_called_damaged() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("run");
    succeeds(&mut xor(&dir, 1, &[]));
    let model = dir.join("model.mpk");
    let bytes = fs::read(&model).unwrap();
    fs::write(&model, &bytes[..bytes.len() - 7]).unwrap();
    let (output, _, stderr) = run(cubenet().args(["eval", "--model-dir"]).arg(&dir));
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("model.mpk: the file is damaged or truncated")
            && !stderr.contains("retrain"),
        "{stderr}"
    );
}

/// Every file a run writes goes through the atomic writer or the metric logs; a disk that
/// fills at any point stops the run with one line naming the file, and leaves no partial or
/// empty file.
#[test]
fn a_full_disk_is_one_line_and_leaves_no_partial_file() {
    let root = tempfile::tempdir().unwrap();
    let mut failed_files = Vec::new();
    for capacity in (0..=6000).step_by(50) {
        let dir = root.path().join(format!("disk-{capacity}"));
        let (output, stdout, stderr) =
            run(xor(&dir, 3, &[]).env("CUBENET_DISK_FULL_AFTER", capacity.to_string()));
        if output.status.success() {
            continue;
        }
        assert_eq!(output.status.code(), Some(2), "{stdout}\n{stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        let line = stderr.trim_end();
        assert!(
            line.starts_with("error: cannot ")
                && line.contains(&*dir.to_string_lossy())
                && line.ends_with("No space left on device (os error 28)"),
            "{line}"
        );
        failed_files.push(line.to_string());
        for (path, bytes) in snapshot(&dir) {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            assert!(!name.starts_with(".partial-"), "{}", path.display());
            assert!(
                !bytes.is_empty() || name == "experiment.log",
                "{} is empty",
                path.display()
            );
        }
    }
    // The capacities reach the run file, the run's settings and a checkpoint. Where the
    // metric logs fail depends on when burn-train's event thread writes them, beside the
    // checkpoints: their failure is tested in the library's metric-log tests.
    for written in ["run.toml", "run-settings.json", ".mpk:"] {
        assert!(
            failed_files.iter().any(|line| line.contains(written)),
            "no failure at {written}: {failed_files:#?}"
        );
    }
}

#[test]
fn implausible_labels_are_refused_unless_the_classes_are_stated() {
    let root = tempfile::tempdir().unwrap();
    let csv = root.path().join("data/rows.csv");
    // One stray label among classes 0 to 2.
    write_csv(&csv, 60, |row| if row == 7 { 1_000_000 } else { row % 3 });
    assert_user_error(
        &mut csv_run(&csv, &root.path().join("a")),
        "the largest label is 1000000",
    );
    write_csv(&csv, 60, |row| if row == 7 { 9 } else { row % 3 });
    assert_user_error(
        &mut csv_run(&csv, &root.path().join("b")),
        "6 of those 10 classes never occur (missing: 3, 4, 5, 6, 7, …)",
    );
    write_csv(&csv, 60, |_| 2);
    assert_user_error(
        &mut csv_run(&csv, &root.path().join("c")),
        "every label is 2",
    );
    // Stated, ten classes are what the user wants.
    write_csv(&csv, 60, |row| if row == 7 { 9 } else { row % 3 });
    succeeds(csv_run(&csv, &root.path().join("d")).args(["--set", "model.classes=10"]));

    // IDX labels: a 200 among digits.
    let idx = root.path().join("idx");
    fs::create_dir_all(&idx).unwrap();
    let header = |kind: u8, dims: &[u32]| -> Vec<u8> {
        let mut bytes = vec![0, 0, 8, kind];
        bytes.extend(dims.iter().flat_map(|d| d.to_be_bytes()));
        bytes
    };
    let mut images = header(3, &[20, 2, 2]);
    images.extend([7u8; 20 * 4]);
    let mut labels = header(1, &[20]);
    labels.extend((0..20).map(|i| if i == 5 { 200 } else { (i % 2) as u8 }));
    let run_file = root.path().join("idx.toml");
    fs::write(
        &run_file,
        format!(
            "backend = \"ndarray\"\n[data]\nkind = \"idx\"\ntrain = {{ images = \"{0}/images.idx\", \
             labels = \"{0}/labels.idx\" }}\n[model]\nkind = \"mlp\"\nhidden = [4]\n\
             [training]\nepochs = 1\n",
            idx.display()
        ),
    )
    .unwrap();
    let no_images = (header(3, &[0, 2, 2]), header(1, &[0]));
    for (run, (images, labels), named) in [
        (
            "e",
            (images, labels),
            "labels.idx: the labels run from 0 to 200",
        ),
        ("f", no_images, "images.idx: holds no images"),
    ] {
        fs::write(idx.join("images.idx"), images).unwrap();
        fs::write(idx.join("labels.idx"), labels).unwrap();
        assert_user_error(
            cubenet()
                .args(["train", "--config"])
                .arg(&run_file)
                .arg("--artifact-dir")
                .arg(root.path().join(run)),
            named,
        );
    }
}

#[test]
fn predictions_never_replace_a_file_cubenet_did_not_write() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("run");
    succeeds(&mut xor(&dir, 1, &[]));
    let input = root.path().join("points.csv");
    fs::write(&input, "x1,x2\n0,1\n1,1\n").unwrap();
    let predict_to = |output: &Path| {
        let mut command = cubenet();
        command
            .args(["predict", "--model-dir"])
            .arg(&dir)
            .arg(&input)
            .arg("--output")
            .arg(output);
        command
    };
    let model = fs::read(dir.join("model.mpk")).unwrap();
    for output in [dir.join("model.mpk"), input.clone()] {
        assert_user_error(&mut predict_to(&output), "is not a predictions file");
    }
    assert_eq!(fs::read(dir.join("model.mpk")).unwrap(), model);
    // Predictions written before are replaced.
    let output = root.path().join("predicted.csv");
    for _ in 0..2 {
        succeeds(&mut predict_to(&output));
    }
}

// Checksummed records, the image cache, and the data a resume continues on.

/// Flips a bit of the last byte where the record files `path` and `other` (the same network
/// with other weights) differ: a byte of a weight, where MessagePack alone sees nothing wrong.
fn flip_a_weight(path: &Path, other: &Path) {
    let mut bytes = fs::read(path).unwrap();
    let other = fs::read(other).unwrap();
    assert_eq!(bytes.len(), other.len(), "{}", path.display());
    let at = (0..bytes.len()).rev().find(|&i| bytes[i] != other[i]);
    bytes[at.expect("the weights differ")] ^= 0x01;
    fs::write(path, bytes).unwrap();
}

#[test]
fn a_flipped_byte_in_the_model_file_is_called_damaged() {
    let root = tempfile::tempdir().unwrap();
    let (dir, other) = (root.path().join("run"), root.path().join("other"));
    succeeds(&mut xor(&dir, 2, &[]));
    succeeds(&mut xor(&other, 1, &[]));
    flip_a_weight(&dir.join("model.mpk"), &other.join("model.mpk"));
    let input = root.path().join("points.csv");
    fs::write(&input, "x1,x2\n0,1\n1,1\n").unwrap();
    let damaged = "model.mpk: the file is damaged or truncated (its checksum does not match";
    assert_user_error(cubenet().args(["eval", "--model-dir"]).arg(&dir), damaged);
    assert_user_error(
        cubenet()
            .args(["predict", "--model-dir"])
            .arg(&dir)
            .arg(&input)
            .arg("--output")
            .arg(root.path().join("predicted.csv")),
        damaged,
    );
    assert_user_error(cubenet().args(["export", "--model-dir"]).arg(&dir), damaged);
    assert!(!dir.join("export").exists() && !root.path().join("predicted.csv").exists());
}

/// A model file without the checksum's frame, as cubenet wrote them before, is refused with
/// what to do, not read unchecked.
#[test]
fn a_model_file_without_a_checksum_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("run");
    succeeds(&mut xor(&dir, 1, &[]));
    let model = dir.join("model.mpk");
    let bytes = fs::read(&model).unwrap();
    // The frame: `cnrecord`, version, length, checksum.
    assert_eq!(&bytes[..8], b"cnrecord");
    fs::write(&model, &bytes[24..]).unwrap();
    assert_user_error(
        cubenet().args(["eval", "--model-dir"]).arg(&dir),
        "model.mpk: it has no checksum, so damage to it could not be found: an earlier cubenet \
         wrote it; retrain",
    );
}

/// A run that stopped after its second epoch with both epochs' records kept (as a killed
/// run leaves them), in `dir`.
fn two_kept_epochs(dir: &Path) {
    succeeds(&mut xor(dir, 1, &[]));
    let checkpoints = dir.join("checkpoint");
    let first: Vec<(PathBuf, Vec<u8>)> = ["model-1.mpk", "optim-1.mpk", "scheduler-1.mpk"]
        .map(|name| checkpoints.join(name))
        .into_iter()
        .map(|path| (path.clone(), fs::read(&path).unwrap()))
        .collect();
    succeeds(&mut xor(dir, 2, &["--resume"]));
    // A finished run keeps only its best and last epochs; during a run every epoch is kept.
    for (path, bytes) in first {
        fs::write(path, bytes).unwrap();
    }
}

#[test]
fn a_checkpoint_with_a_flipped_byte_is_passed_over() {
    let root = tempfile::tempdir().unwrap();
    for part in ["model", "optim"] {
        let dir = root.path().join(part);
        two_kept_epochs(&dir);
        let checkpoints = dir.join("checkpoint");
        flip_a_weight(
            &checkpoints.join(format!("{part}-2.mpk")),
            &checkpoints.join(format!("{part}-1.mpk")),
        );
        let stdout = succeeds(&mut xor(&dir, 3, &["--resume"]));
        assert!(
            stdout.contains(&format!(
                "{part}-2.mpk: the file is damaged or truncated (its checksum does not match"
            )) && stdout.contains("resuming after epoch 1"),
            "{stdout}"
        );
    }
}

/// A gray `size`×`size` PNG per image, `per_class` of each of two classes, under `root`;
/// `seed` varies the pixels.
fn write_png_folder(root: &Path, per_class: usize, seed: u8) {
    for class in ["a", "b"] {
        fs::create_dir_all(root.join(class)).unwrap();
        for i in 0..per_class {
            let image = image::GrayImage::from_fn(6, 6, |x, y| {
                let dark = class == "a";
                let value = (x * 7 + y * 3 + i as u32 * 11 + seed as u32) % 64;
                image::Luma([if dark { value as u8 } else { 190 + value as u8 }])
            });
            image
                .save(root.join(class).join(format!("{i:03}.png")))
                .unwrap();
        }
    }
}

/// A run file that trains a small MLP for `epochs` on the image folder at `root`.
fn image_folder_run(dir: &Path, root: &Path, epochs: usize, extra: &[&str]) -> Command {
    let run_file = dir.with_extension("toml");
    fs::write(
        &run_file,
        format!(
            "backend = \"ndarray\"\n[data]\nkind = \"image_folder\"\nroot = {root:?}\n\
             channels = 1\n[model]\nkind = \"mlp\"\nhidden = [4]\n[training]\nepochs = {epochs}\n"
        ),
    )
    .unwrap();
    let mut command = cubenet();
    command
        .args(["train", "--config"])
        .arg(run_file)
        .args(extra)
        .arg("--artifact-dir")
        .arg(dir);
    command
}

/// A damaged image cache is not used: the images are decoded again and the cache rewritten.
#[test]
fn a_damaged_image_cache_is_rebuilt() {
    let root = tempfile::tempdir().unwrap();
    let images = root.path().join("images");
    write_png_folder(&images, 10, 0);
    let dir = root.path().join("run");
    succeeds(&mut image_folder_run(&dir, &images, 1, &[]));
    let cache = dir.join("cache/train-images.cache");
    let whole = fs::read(&cache).unwrap();
    let mut flipped = whole.clone();
    // A pixel of the last image, before the labels and the checksum.
    let at = whole.len() - 4 - 20 * 4 - 5;
    flipped[at] ^= 0x01;
    fs::write(&cache, &flipped).unwrap();
    succeeds(&mut image_folder_run(&dir, &images, 1, &[]));
    assert!(
        fs::read(&cache).unwrap() == whole,
        "the cache was not rebuilt"
    );
}

/// A run file's data moved elsewhere byte for byte resumes (and says so); other data, of
/// every kind of source, is refused with one line saying what differs.
#[test]
fn a_resume_on_other_data_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let other_data = "its checkpoints were trained on other data";

    // Image folders: 20 images, then 10 of them.
    let (images, fewer) = (root.path().join("images"), root.path().join("fewer"));
    write_png_folder(&images, 10, 0);
    write_png_folder(&fewer, 5, 0);
    let dir = root.path().join("image-run");
    succeeds(&mut image_folder_run(&dir, &images, 1, &[]));
    assert_user_error(
        &mut image_folder_run(&dir, &fewer, 2, &["--resume"]),
        &format!(
            "{other_data}: {} held 20 files",
            fs::canonicalize(&images).unwrap().display()
        ),
    );
    let copied = root.path().join("copied");
    write_png_folder(&copied, 10, 0);
    let stdout = succeeds(&mut image_folder_run(&dir, &copied, 2, &["--resume"]));
    assert!(
        stdout.contains("the data moved from") && stdout.contains("resuming after epoch 1"),
        "{stdout}"
    );

    // CSV files of the same size, other labels.
    let (csv, other_csv) = (root.path().join("a.csv"), root.path().join("b.csv"));
    write_csv(&csv, 60, |row| row % 3);
    write_csv(&other_csv, 60, |row| (row + 1) % 3);
    let dir = root.path().join("csv-run");
    succeeds(&mut csv_run(&csv, &dir));
    let resume_on = |csv: &Path| {
        let mut command = csv_run(csv, &dir);
        command.args(["--set", "training.epochs=2", "--resume"]);
        command
    };
    assert_user_error(&mut resume_on(&other_csv), "with other contents");
    // Settings saved without the data's identity (an earlier cubenet) cannot be checked.
    let settings_path = dir.join("checkpoint/run-settings.json");
    let mut settings: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&settings_path).unwrap()).unwrap();
    settings.as_object_mut().unwrap().remove("data");
    fs::write(&settings_path, settings.to_string()).unwrap();
    assert_user_error(&mut resume_on(&csv), "do not say which data");

    // MNIST's IDX files in `data.dir`: the same count of other images.
    let idx_dir = |name: &str, pixel: u8| {
        let dir = root.path().join(name);
        fs::create_dir_all(&dir).unwrap();
        for (prefix, count) in [("train", 40u32), ("t10k", 10)] {
            let mut images = vec![0, 0, 8, 3];
            images.extend([count, 28, 28].iter().flat_map(|d| d.to_be_bytes()));
            images.extend((0..count * 784).map(|i| pixel.wrapping_add((i % 251) as u8)));
            let mut labels = vec![0, 0, 8, 1];
            labels.extend(count.to_be_bytes());
            labels.extend((0..count).map(|i| (i % 10) as u8));
            fs::write(dir.join(format!("{prefix}-images-idx3-ubyte")), images).unwrap();
            fs::write(dir.join(format!("{prefix}-labels-idx1-ubyte")), labels).unwrap();
        }
        dir
    };
    let (mnist, other_mnist) = (idx_dir("mnist", 0), idx_dir("other-mnist", 1));
    let run_file = root.path().join("mnist.toml");
    fs::write(
        &run_file,
        "backend = \"ndarray\"\n[data]\nkind = \"mnist\"\n[model]\nkind = \"mlp\"\n\
         hidden = [4]\n[training]\nepochs = 1\n",
    )
    .unwrap();
    let dir = root.path().join("mnist-run");
    let mnist_run = |data: &Path, extra: &[&str]| {
        let mut command = cubenet();
        command
            .args(["train", "--config"])
            .arg(&run_file)
            .arg("--data-dir")
            .arg(data)
            .args(extra)
            .arg("--artifact-dir")
            .arg(&dir);
        command
    };
    succeeds(&mut mnist_run(&mnist, &[]));
    assert_user_error(
        &mut mnist_run(&other_mnist, &["--set", "training.epochs=2", "--resume"]),
        &format!(
            "{other_data}: {} held 4 files of {} bytes then",
            fs::canonicalize(&mnist).unwrap().display(),
            2 * 16 + 50 * 784 + 2 * 8 + 50
        ),
    );
}

/// An export read back (`predict --model-dir <export>`) is checked against the SHA-256 that
/// its sidecar records of its weights.
#[test]
fn a_flipped_byte_in_an_export_is_called_damaged() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("run");
    succeeds(&mut xor(&dir, 1, &[]));
    succeeds(cubenet().args(["export", "--model-dir"]).arg(&dir));
    let export = dir.join("export");
    let input = root.path().join("points.csv");
    fs::write(&input, "x1,x2\n0,1\n1,1\n").unwrap();
    let predict = || {
        let mut command = cubenet();
        command
            .args(["predict", "--backend", "ndarray", "--model-dir"])
            .arg(&export)
            .arg(&input)
            .arg("--output")
            .arg(root.path().join("predicted.csv"));
        command
    };
    succeeds(&mut predict());
    let weights = export.join("model.safetensors");
    let whole = fs::read(&weights).unwrap();
    let mut flipped = whole.clone();
    // The last byte of the last tensor's data.
    *flipped.last_mut().unwrap() ^= 0x01;
    fs::write(&weights, &flipped).unwrap();
    assert_user_error(
        &mut predict(),
        "model.safetensors: the file is damaged or truncated (its SHA-256 is not the one its \
         sidecar records)",
    );
    fs::write(&weights, &whole).unwrap();
    let sidecar_path = export.join("model.json");
    let mut sidecar: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&sidecar_path).unwrap()).unwrap();
    sidecar.as_object_mut().unwrap().remove("weights_sha256");
    fs::write(&sidecar_path, sidecar.to_string()).unwrap();
    assert_user_error(&mut predict(), "export the run again");
}
