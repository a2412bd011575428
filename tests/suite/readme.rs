//! The README's tour runs as written: every `cubenet …` line of its `sh` blocks that needs
//! no GPU, in order, in a scratch copy of `configs/` with MNIST at `$MNIST_DIR` and a
//! generated `photos/` folder, on a small data limit (one epoch; 600 training images).

use std::path::Path;
use std::process::Command;

use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::cli::{cubenet, run};
use crate::common::{configs, mnist_source};
use crate::images::shape_image;
use crate::studio::Studio;
use cubenet::data::MnistSource;

/// Lines naming these need a GPU (or a build with one) and are left out.
const NEEDS_A_GPU: [&str; 4] = [
    "--backend cuda",
    "--backend wgpu",
    "--features cuda",
    "--devices",
];

/// The `cubenet` command lines of the README's `sh` blocks, without trailing comments.
fn readme_commands() -> Vec<String> {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let mut in_sh = false;
    let mut commands = Vec::new();
    for line in readme.lines() {
        match line.trim_end() {
            "```sh" => in_sh = true,
            "```" => in_sh = false,
            line if in_sh && line.starts_with("cubenet ") => {
                let command = line.split(" # ").next().unwrap().trim_end();
                commands.push(command.to_string());
            }
            _ => {}
        }
    }
    commands
}

/// `photos/train` and `photos/test` with a folder per class, and `photos/new` to classify.
fn write_photos(root: &Path) {
    let mut rng = StdRng::seed_from_u64(5);
    for (split, count) in [("train", 40), ("test", 8)] {
        for (class, name) in ["bar", "disc", "square"].iter().enumerate() {
            let dir = root.join("photos").join(split).join(name);
            std::fs::create_dir_all(&dir).unwrap();
            for i in 0..count {
                shape_image(class, &mut rng)
                    .save(dir.join(format!("{i}.png")))
                    .unwrap();
            }
        }
    }
    let new = root.join("photos/new");
    std::fs::create_dir_all(&new).unwrap();
    for i in 0..3 {
        shape_image(i, &mut rng)
            .save(new.join(format!("{i}.png")))
            .unwrap();
    }
}

/// The flags that keep a command short here: one epoch, and few images for image runs.
fn small_limits(command: &str, root: &Path) -> Vec<String> {
    let words: Vec<&str> = command.split_whitespace().collect();
    match words.get(1) {
        Some(&"train") => {
            let config = words
                .iter()
                .position(|&w| w == "--config")
                .map(|i| root.join(words[i + 1]));
            let images = config.is_some_and(|path| {
                let text = std::fs::read_to_string(path).unwrap();
                !text.contains("kind = \"generated\"") && !text.contains("kind = \"csv\"")
            });
            let mut extra = vec!["--epochs".to_string(), "1".to_string()];
            if images {
                for set in ["data.limit_train=600", "data.limit_test=200"] {
                    extra.extend(["--set".to_string(), set.to_string()]);
                }
            }
            extra
        }
        Some(&"bench") => ["--cpu-warmup", "0", "--cpu-repeats", "1", "--no-phases"]
            .map(String::from)
            .to_vec(),
        _ => Vec::new(),
    }
}

#[test]
fn the_readme_tour_runs_as_written() {
    let commands = readme_commands();
    assert!(
        commands.iter().any(|c| c.starts_with("cubenet train"))
            && commands.iter().any(|c| c.starts_with("cubenet predict")),
        "the README's tour lost its commands: {commands:?}"
    );
    let root = tempfile::tempdir().unwrap();
    let copied = Command::new("cp")
        .arg("-r")
        .arg(configs())
        .arg(root.path())
        .status()
        .unwrap();
    assert!(copied.success());
    write_photos(root.path());
    let mnist_dir = match mnist_source() {
        MnistSource::Dir(dir) => Some(dir),
        MnistSource::Download => None,
    };
    for command in commands
        .iter()
        .filter(|c| !NEEDS_A_GPU.iter().any(|gpu| c.contains(gpu)))
    {
        let mut words: Vec<String> = Vec::new();
        let mut given = command.split_whitespace().skip(1).peekable();
        while let Some(word) = given.next() {
            match (word, &mnist_dir) {
                // Without MNIST on disk the run downloads it, as the README says.
                ("--data-dir", None) if given.peek() == Some(&"$MNIST_DIR") => {
                    given.next();
                }
                ("$MNIST_DIR", Some(dir)) => words.push(dir.display().to_string()),
                _ => words.push(word.to_string()),
            }
        }
        words.extend(small_limits(command, root.path()));
        if words[0] == "studio" {
            // It serves until stopped: it must list the runs the tour made so far.
            words.extend(["--port".to_string(), "0".to_string()]);
            let studio = Studio::start_with(cubenet().current_dir(root.path()).args(&words));
            let runs = studio.get(&studio.cookie(), "/api/runs");
            assert!(
                runs.body.contains("\"mnist_cnn\""),
                "`{command}`: {}",
                runs.body
            );
            println!("ran `{command}`");
            continue;
        }
        let (output, stdout, stderr) = run(cubenet().current_dir(root.path()).args(&words));
        assert!(
            output.status.success(),
            "`{command}` failed:\n{stdout}\n{stderr}"
        );
        println!("ran `{command}`");
    }
    assert!(root.path().join("photos/new-predictions.csv").is_file());
}
