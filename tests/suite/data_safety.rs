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
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
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
