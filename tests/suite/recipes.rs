//! The training recipes' options end to end: one `cubenet train` of an RGB image folder with
//! SGD (Nesterov's momentum, weight decay), a constant learning rate, label smoothing,
//! flips, crops, cutout and test-time flips; the settings it saved, the learning rate it
//! logged, and `eval` classifying the test images with their mirrors as the run did.

use std::fs;

use crate::cli::{cubenet, run};
use crate::images::{accuracy, write_folder};

#[test]
fn a_run_with_every_recipe_option_learns_and_its_eval_flips_as_it_did() {
    let dir = tempfile::tempdir().unwrap();
    let (train, test) = (dir.path().join("train"), dir.path().join("test"));
    write_folder(&train, 80, 11);
    write_folder(&test, 20, 12);
    let artifacts = dir.path().join("artifacts");
    let run_file = dir.path().join("recipe.toml");
    let text = format!(
        "backend = \"ndarray\"\nartifact_dir = {artifacts:?}\n\
         [data]\nkind = \"image_folder\"\nroot = {train:?}\ntest_root = {test:?}\n\
         channels = 3\nflip = true\npad = 2\ncutout = 8\n\
         [model]\nkind = \"cnn\"\nlayers = [\n\
           {{ conv = 8, kernel = 3, padding = 1 }}, {{ relu = true }}, {{ pool = 2 }},\n\
           {{ conv = 16, kernel = 3, padding = 1 }}, {{ relu = true }}, {{ pool = 2 }},\n\
           {{ dense = \"classes\" }},\n]\n\
         [optimizer]\nkind = \"sgd\"\nlearning_rate = 0.02\nmomentum = 0.9\nnesterov = true\n\
         l2 = 5e-4\n\
         [training]\nepochs = 4\nbatch_size = 16\nschedule = \"constant\"\n\
         label_smoothing = 0.1\ntest_flips = true\n"
    );
    fs::write(&run_file, text).unwrap();
    let (output, stdout, stderr) = run(cubenet().args(["train", "--config"]).arg(&run_file));
    assert!(output.status.success(), "{stderr}");
    let trained = accuracy(&stdout);
    assert!(trained >= 60.0, "five classes, chance is 20%: {stdout}");

    let saved: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(artifacts.join("config.json")).unwrap()).unwrap();
    assert_eq!(
        saved["optimizer"],
        serde_json::json!({ "kind": "sgd", "momentum": 0.9, "nesterov": true })
    );
    assert_eq!(saved["weight_decay"], serde_json::json!(5e-4));
    assert_eq!(saved["schedule"], serde_json::json!("constant"));
    assert_eq!(saved["test_flips"], serde_json::json!(true));
    assert_eq!(saved["augment"]["cutout"], serde_json::json!(8));
    assert!((saved["augment"]["label_smoothing"].as_f64().unwrap() - 0.1).abs() < 1e-6);

    // The constant schedule: every logged step of every epoch at the peak rate.
    for epoch in 1..=4 {
        let log = artifacts.join(format!("train/epoch-{epoch}/Learning_Rate.log"));
        let text = fs::read_to_string(&log).unwrap();
        assert!(text.lines().count() > 0, "{log:?}");
        for line in text.lines() {
            let rate: f64 = line.split(',').next().unwrap().parse().unwrap();
            assert!((rate - 0.02).abs() < 1e-12, "epoch {epoch}: {line}");
        }
    }

    // eval reads the run's settings: the same flipped test, the same accuracy.
    let (output, stdout, stderr) = run(cubenet()
        .args(["eval", "--backend", "ndarray", "--model-dir"])
        .arg(&artifacts));
    assert!(output.status.success(), "{stderr}");
    assert_eq!(accuracy(&stdout), trained, "{stdout}");
}
