//! Input built to hurt: links where runs write, a second run in a busy directory, networks
//! and images too large for the machine, decompression bombs, NaN weights, duplicated
//! columns, labels that cannot train. Each is one line and exit code 2; the oversized ones
//! run under a 200 MB data limit, so that a refusal that allocates first aborts instead.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use flate2::Compression;
use flate2::write::{GzEncoder, ZlibEncoder};

use crate::cli::{assert_user_error, cubenet};
use crate::data_safety::{csv_run, succeeds, write_csv, xor};

/// The most heap a refused input may take: `prlimit --data`, in bytes.
const REFUSAL_MEMORY: u64 = 200_000_000;

/// `command` with its data segment (heap and anonymous maps) limited to
/// [`REFUSAL_MEMORY`]: an allocation past it fails, which aborts the process.
fn within_refusal_memory(command: &Command) -> Command {
    let mut limited = Command::new("prlimit");
    limited
        .arg(format!("--data={REFUSAL_MEMORY}"))
        .arg("--")
        .arg(command.get_program())
        .args(command.get_args());
    limited
}

/// An IDX file of unsigned bytes.
fn idx(dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut bytes = vec![0, 0, 8, dims.len() as u8];
    bytes.extend(dims.iter().flat_map(|d| d.to_be_bytes()));
    bytes.extend_from_slice(data);
    bytes
}

/// 40 gray 8×8 images of classes 0 and 1 as IDX files in `dir`, and a run file training
/// `layers` (a TOML array) on them into `artifacts`.
fn idx_run(dir: &Path, layers: &str, artifacts: &Path) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    let labels: Vec<u8> = (0..40).map(|i| (i % 2) as u8).collect();
    let pixels: Vec<u8> = (0..40 * 64).map(|i| (i * 7 % 251) as u8).collect();
    fs::write(dir.join("images.idx"), idx(&[40, 8, 8], &pixels)).unwrap();
    fs::write(dir.join("labels.idx"), idx(&[40], &labels)).unwrap();
    let run_file = dir.join("run.toml");
    fs::write(
        &run_file,
        format!(
            "backend = \"ndarray\"\nartifact_dir = \"{}\"\n[data]\nkind = \"idx\"\n\
             train = {{ images = \"{1}/images.idx\", labels = \"{1}/labels.idx\" }}\n\
             [model]\nkind = \"cnn\"\nlayers = {layers}\n[training]\nepochs = 1\n\
             batch_size = 8\n",
            artifacts.display(),
            dir.display()
        ),
    )
    .unwrap();
    run_file
}

fn train(run_file: &Path) -> Command {
    let mut command = cubenet();
    command.args(["train", "--config"]).arg(run_file);
    command
}

/// A PNG whose header declares a `side`×`side` gray image, followed by `rows` rows of it.
fn png_declaring(side: u32, rows: u32) -> Vec<u8> {
    fn chunk(png: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
        png.extend((data.len() as u32).to_be_bytes());
        let mut crc = flate2::Crc::new();
        crc.update(kind);
        crc.update(data);
        png.extend(kind);
        png.extend(data);
        png.extend(crc.sum().to_be_bytes());
    }
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut header = side.to_be_bytes().to_vec();
    header.extend(side.to_be_bytes());
    header.extend([8, 0, 0, 0, 0]); // 8-bit gray, no interlacing
    chunk(&mut png, b"IHDR", &header);
    let mut row = ZlibEncoder::new(Vec::new(), Compression::fast());
    row.write_all(&vec![0; (side as usize + 1) * rows as usize])
        .unwrap();
    chunk(&mut png, b"IDAT", &row.finish().unwrap());
    chunk(&mut png, b"IEND", &[]);
    png
}

#[test]
fn oversized_networks_and_decompression_bombs_are_refused_within_200_mb() {
    let root = tempfile::tempdir().unwrap();
    let refused = |name: &str, layers: &str, named: &str| {
        let run_file = idx_run(
            &root.path().join(name),
            layers,
            &root.path().join(name).join("run"),
        );
        assert_user_error(&mut within_refusal_memory(&train(&run_file)), named);
    };
    // The layer table says each needs far more memory than any machine has free.
    refused(
        "dense",
        "[{ dense = 1000000000 }, { dense = \"classes\" }]",
        "needs about",
    );
    refused(
        "filters",
        "[{ conv = 1000000000, kernel = 3 }, { dense = \"classes\" }]",
        "needs about",
    );
    refused(
        "padding",
        "[{ conv = 2, kernel = 3, padding = 100000 }, { dense = \"classes\" }]",
        "needs about",
    );
    let relus = |count: usize| {
        let relus = vec!["{ relu = true }"; count].join(", ");
        format!("[{relus}, {{ dense = \"classes\" }}]")
    };
    refused("relus", &relus(1000), "more than 1000 layers");
    // 90 blocks of 12: 90 entries in the list, 1170 layers.
    let block = format!(
        "{{ residual = [{}], shortcut = \"identity\" }}",
        ["{ relu = true }"; 12].join(", ")
    );
    let blocks = format!(
        "[{}, {{ dense = \"classes\" }}]",
        vec![block; 90].join(", ")
    );
    refused("blocks", &blocks, "those inside residual blocks counted");
    refused(
        "many-relus",
        &relus(2_000_000),
        "a run file is a few lines of settings",
    );

    // A 20000×20000 PNG among small ones: refused from its header.
    let photos = root.path().join("photos");
    for class in ["a", "b"] {
        fs::create_dir_all(photos.join(class)).unwrap();
        fs::write(photos.join(class).join("small.png"), png_declaring(4, 4)).unwrap();
    }
    fs::write(photos.join("b/bomb.png"), png_declaring(20_000, 1)).unwrap();
    let folder_run = root.path().join("photos.toml");
    fs::write(
        &folder_run,
        format!(
            "backend = \"ndarray\"\nartifact_dir = \"{}\"\n[data]\nkind = \"image_folder\"\n\
             root = \"{}\"\nchannels = 1\n[model]\nkind = \"cnn\"\n\
             layers = [{{ dense = \"classes\" }}]\n[training]\nepochs = 1\n",
            root.path().join("photos-run").display(),
            photos.display()
        ),
    )
    .unwrap();
    assert_user_error(
        &mut within_refusal_memory(&train(&folder_run)),
        "bomb.png: its header declares 20000×20000 pixels",
    );

    // A gzip IDX file whose header declares 40 images but that inflates to 300 MB.
    let bomb = root.path().join("bomb");
    idx_run(&bomb, "[{ dense = \"classes\" }]", &bomb.join("run"));
    let mut gzip = GzEncoder::new(Vec::new(), Compression::fast());
    gzip.write_all(&idx(&[40, 8, 8], &[])).unwrap();
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..300 {
        gzip.write_all(&zeros).unwrap();
    }
    fs::write(bomb.join("images.idx"), gzip.finish().unwrap()).unwrap();
    assert_user_error(
        &mut within_refusal_memory(&train(&bomb.join("run.toml"))),
        "inflates past the 2560 data bytes",
    );
}

#[test]
fn a_saved_network_edited_to_an_oversized_one_is_refused_before_it_is_built() {
    let root = tempfile::tempdir().unwrap();
    let artifacts = root.path().join("run");
    let run_file = idx_run(
        &root.path().join("data"),
        "[{ conv = 2, kernel = 3 }, { relu = true }, { dense = \"classes\" }]",
        &artifacts,
    );
    succeeds(&mut train(&run_file));
    let predict = |input: &Path| {
        let mut command = cubenet();
        command
            .args(["predict", "--model-dir"])
            .arg(&artifacts)
            .arg(input);
        command
    };
    // A text file is neither an image nor IDX images.
    let notes = root.path().join("notes.txt");
    fs::write(&notes, "not pixels").unwrap();
    assert_user_error(
        &mut predict(&notes),
        "notes.txt: is neither a .png, .jpg or .jpeg image nor an IDX image file",
    );
    // A file whose name is not text cannot be named in the predictions.
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let photos = root.path().join("photos");
        fs::create_dir(&photos).unwrap();
        let odd = photos.join(std::ffi::OsStr::from_bytes(b"digit-\xff.png"));
        fs::write(&odd, png_declaring(8, 8)).unwrap();
        assert_user_error(&mut predict(&photos), "its name is not valid UTF-8");
    }

    let config = artifacts.join("config.json");
    let text = fs::read_to_string(&config).unwrap();
    let edited = regex_lite::Regex::new(r#""conv":\s*2\b"#)
        .unwrap()
        .replace(&text, "\"conv\": 8000000000");
    assert_ne!(edited, text, "{text}");
    fs::write(&config, edited.as_ref()).unwrap();
    let mut eval = cubenet();
    eval.args(["eval", "--model-dir"]).arg(&artifacts);
    assert_user_error(&mut within_refusal_memory(&eval), "needs about");
}

#[cfg(unix)]
#[test]
fn a_path_that_is_not_text_is_refused_instead_of_written_lossily() {
    use std::os::unix::ffi::OsStrExt;
    let root = tempfile::tempdir().unwrap();
    let odd = root.path().join(std::ffi::OsStr::from_bytes(b"run-\xff"));
    assert_user_error(&mut xor(&odd, 1, &[]), "the path is not valid UTF-8");
    assert!(!odd.exists());
}

#[cfg(unix)]
#[test]
fn a_link_where_runs_write_is_refused_and_what_it_points_to_kept() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("run");
    succeeds(&mut xor(&dir, 1, &[]));
    let elsewhere = root.path().join("elsewhere");
    fs::create_dir_all(elsewhere.join("epoch-3")).unwrap();
    fs::write(elsewhere.join("model-5.mpk"), b"someone's").unwrap();
    fs::write(elsewhere.join("epoch-3/user.log"), b"kept").unwrap();
    for link in ["checkpoint", "train", "valid"] {
        fs::remove_dir_all(dir.join(link)).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.join(link)).unwrap();
        assert_user_error(&mut xor(&dir, 1, &[]), "is a symbolic link");
        fs::remove_file(dir.join(link)).unwrap();
        fs::create_dir(dir.join(link)).unwrap();
    }
    assert_eq!(
        fs::read(elsewhere.join("model-5.mpk")).unwrap(),
        b"someone's"
    );
    assert_eq!(
        fs::read(elsewhere.join("epoch-3/user.log")).unwrap(),
        b"kept"
    );
}

#[test]
fn a_second_run_in_a_directory_in_use_is_refused_naming_the_first() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("run");
    let held = cubenet::train::RunDir::claim(&dir, &[]).unwrap();
    let pid = std::process::id().to_string();
    assert_user_error(
        &mut xor(&dir, 1, &[]),
        &format!("another cubenet run (process {pid}) is writing there"),
    );
    drop(held);
    succeeds(&mut xor(&dir, 1, &[]));
}

#[test]
fn nan_weights_duplicated_columns_and_a_negative_rate_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("run");
    succeeds(&mut xor(&dir, 1, &[]));
    succeeds(cubenet().args(["export", "--model-dir"]).arg(&dir));
    let weights = dir.join("export/model.safetensors");
    let mut bytes = fs::read(&weights).unwrap();
    // safetensors: an 8-byte header length, the JSON header, then the tensors.
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + header_len]).unwrap();
    let start = header["0.weight"]["data_offsets"][0].as_u64().unwrap() as usize;
    let at = 8 + header_len + start;
    bytes[at..at + 4].copy_from_slice(&f32::NAN.to_le_bytes());
    let poisoned = root.path().join("poisoned.safetensors");
    fs::write(&poisoned, bytes).unwrap();
    let init_from = |path: &Path| {
        xor(
            &root.path().join("from"),
            1,
            &["--init-from", path.to_str().unwrap()],
        )
    };
    assert_user_error(
        &mut init_from(&poisoned),
        "`0.weight` holds 1 NaN or infinite values",
    );
    assert_user_error(
        &mut init_from(&dir),
        "it is a folder; name the weights file",
    );
    assert_user_error(
        &mut xor(&root.path().join("lr"), 1, &["--lr", "-0.1"]),
        "learning rate",
    );

    let csv = root.path().join("rows.csv");
    fs::write(&csv, "x,x2,x,y\n1,2,3,0\n2,3,4,1\n3,4,5,0\n4,5,6,1\n").unwrap();
    assert_user_error(
        &mut csv_run(&csv, &root.path().join("twice")),
        "names column `x` twice",
    );
    write_csv(&csv, 40, |row| row % 2);
    assert_user_error(
        csv_run(&csv, &root.path().join("features"))
            .args(["--set", "data.features=[\"x\", \"x\"]"]),
        "the feature column `x` is named twice",
    );
}

#[test]
fn labels_the_network_cannot_learn_are_blamed_on_their_own_file() {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    let run_file = idx_run(&data, "[{ dense = \"classes\" }]", &root.path().join("run"));
    let pixels = vec![9u8; 20 * 64];
    fs::write(data.join("test-images.idx"), idx(&[20, 8, 8], &pixels)).unwrap();
    let test_labels: Vec<u8> = (0..20).map(|i| (i % 10) as u8).collect();
    fs::write(data.join("test-labels.idx"), idx(&[20], &test_labels)).unwrap();
    let with_test = format!(
        "data.test={{ images = \"{0}/test-images.idx\", labels = \"{0}/test-labels.idx\" }}",
        data.display()
    );
    // Training labels 0 and 1, test labels 0 to 9: the test file is named.
    assert_user_error(
        train(&run_file).args(["--set", &with_test]),
        "test-labels.idx: label 2 at index 2 is not one of the 2 classes",
    );
    // Training labels all 0: a network trained on one class.
    fs::write(data.join("labels.idx"), idx(&[40], &[0; 40])).unwrap();
    assert_user_error(
        train(&run_file).args(["--set", &with_test]),
        "labels.idx: every label is 0",
    );
}

#[test]
fn a_tilde_in_a_run_files_paths_is_the_home_folder() {
    let home = tempfile::tempdir().unwrap();
    let mut command = cubenet();
    command
        .env("HOME", home.path())
        .args(["train", "--config"])
        .arg(crate::common::configs().join("xor.toml"))
        .args(["--epochs", "1", "--set", "artifact_dir=\"~/runs/a\""]);
    succeeds(&mut command);
    assert!(home.path().join("runs/a/model.mpk").is_file());
    assert!(!Path::new("~").exists());
}

#[test]
fn predicting_a_predictions_file_replaces_its_predictions() {
    let root = tempfile::tempdir().unwrap();
    let csv = root.path().join("rows.csv");
    write_csv(&csv, 40, |row| row % 2);
    let dir = root.path().join("run");
    succeeds(&mut csv_run(&csv, &dir));
    let predicted = root.path().join("rows-predictions.csv");
    let predict = |input: &Path| {
        let mut command = cubenet();
        command
            .args(["predict", "--model-dir"])
            .arg(&dir)
            .arg(input)
            .arg("--output")
            .arg(&predicted);
        command
    };
    succeeds(&mut predict(&csv));
    let first = fs::read_to_string(&predicted).unwrap();
    succeeds(&mut predict(&predicted));
    assert_eq!(fs::read_to_string(&predicted).unwrap(), first);
}
