//! docs/SAFETY.md at its edges: an export never writes through a link, a refused run leaves
//! the folder as it found it, and only a process that holds a run's lock file is that run's.

use std::fs;
use std::path::{Path, PathBuf};
#[cfg(target_os = "linux")]
use std::process::Command;

use cubenet::train::RunDir;

use crate::cli::{assert_user_error, cubenet};
use crate::data_safety::{snapshot, succeeds, xor};

/// Every file below `dir` with its bytes ([`snapshot`]), but the lock file, which each claim
/// rewrites with its own process id.
fn files_but_the_lock(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = snapshot(dir);
    files.retain(|(path, _)| !path.ends_with(".cubenet-lock"));
    files
}

#[cfg(unix)]
#[test]
fn an_export_folder_that_is_a_link_is_refused_and_what_it_points_to_kept() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("run");
    succeeds(&mut xor(&dir, 1, &[]));
    let elsewhere = root.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    fs::write(elsewhere.join("model.safetensors"), b"the user's").unwrap();
    fs::write(elsewhere.join("model.json"), b"{}").unwrap();
    let kept = files_but_the_lock(&elsewhere);
    let export = |format: &str| {
        let mut command = cubenet();
        command
            .args(["export", "--format", format, "--model-dir"])
            .arg(&dir);
        command
    };

    std::os::unix::fs::symlink(&elsewhere, dir.join("export")).unwrap();
    for format in ["safetensors", "onnx"] {
        assert_user_error(&mut export(format), "export is a symbolic link");
    }
    // A link inside the folder is refused too.
    fs::remove_file(dir.join("export")).unwrap();
    fs::create_dir(dir.join("export")).unwrap();
    let inner = dir.join("export/model.onnx");
    std::os::unix::fs::symlink(elsewhere.join("model.safetensors"), &inner).unwrap();
    assert_user_error(&mut export("onnx"), "model.onnx is a symbolic link");
    assert_eq!(files_but_the_lock(&elsewhere), kept);

    fs::remove_file(&inner).unwrap();
    succeeds(&mut export("onnx"));
    assert!(dir.join("export/model.onnx").is_file());
}

#[test]
fn a_refused_resume_leaves_the_run_as_it_was() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("run");
    succeeds(&mut xor(&dir, 1, &[]));
    let before = files_but_the_lock(&dir);
    assert_user_error(
        &mut xor(&dir, 2, &["--resume", "--set", "model.hidden=[3]"]),
        "its checkpoints were trained with other settings",
    );
    assert_eq!(files_but_the_lock(&dir), before);
}

#[test]
fn a_run_refused_after_its_claim_leaves_no_folder() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("new/runs/run");
    // Refused by the memory check, once the directory is claimed.
    let too_big = ["--set", "model.hidden=[100000,100000]"];
    assert_user_error(&mut xor(&dir, 1, &too_big), "make the network smaller");
    assert!(!root.path().join("new").exists());

    // A folder that was there stays, empty as it was.
    let existing = root.path().join("existing");
    fs::create_dir(&existing).unwrap();
    assert_user_error(&mut xor(&existing, 1, &too_big), "make the network smaller");
    assert!(existing.is_dir());
    assert_eq!(fs::read_dir(&existing).unwrap().count(), 0);
}

#[test]
fn a_withdrawn_claim_keeps_what_others_wrote() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("a/b");
    let claimed = RunDir::claim(&dir, &[]).unwrap();
    fs::write(dir.join("notes.txt"), b"kept").unwrap();
    claimed.withdraw();
    assert_eq!(fs::read(dir.join("notes.txt")).unwrap(), b"kept");
    fs::remove_file(dir.join("notes.txt")).unwrap();
    claimed.withdraw();
    assert!(!root.path().join("a").exists());
}

/// The studio's Stop signals [`RunDir::holder`]: a link to another run's lock file must not
/// make that run's process this folder's.
#[cfg(target_os = "linux")]
#[test]
fn only_the_process_holding_a_runs_lock_file_is_its_holder() {
    let root = tempfile::tempdir().unwrap();
    let real = root.path().join("real");
    let claimed = RunDir::claim(&real, &[]).unwrap();
    assert!(RunDir::open(&real).is_running());
    assert_eq!(RunDir::open(&real).holder(), Some(std::process::id()));

    let lock = real.join(".cubenet-lock");
    let symlinked = root.path().join("symlinked");
    fs::create_dir(&symlinked).unwrap();
    fs::write(symlinked.join(".cubenet-run"), b"").unwrap();
    std::os::unix::fs::symlink(&lock, symlinked.join(".cubenet-lock")).unwrap();
    assert!(!RunDir::open(&symlinked).is_running());
    assert_eq!(RunDir::open(&symlinked).holder(), None);

    let hard_linked = root.path().join("hard-linked");
    fs::create_dir(&hard_linked).unwrap();
    fs::write(hard_linked.join(".cubenet-run"), b"").unwrap();
    fs::hard_link(&lock, hard_linked.join(".cubenet-lock")).unwrap();
    assert_eq!(RunDir::open(&hard_linked).holder(), None);
    assert_eq!(RunDir::open(&real).holder(), Some(std::process::id()));
    drop(claimed);
    assert_eq!(RunDir::open(&real).holder(), None);
}

/// `xor`'s MLP with two hidden layers of 10,000: about 3 GB to train, less than a machine
/// that runs the suite has free, more than the limits below.
#[cfg(target_os = "linux")]
const LARGE: [&str; 2] = ["--set", "model.hidden=[10000,10000]"];

/// `command` run by `wrapper` (its program and arguments first), with `command`'s
/// environment.
#[cfg(target_os = "linux")]
fn wrapped(wrapper: &[&str], command: &Command) -> Command {
    let mut outer = Command::new(wrapper[0]);
    outer.args(&wrapper[1..]).arg(command.get_program());
    outer.args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => outer.env(key, value),
            None => outer.env_remove(key),
        };
    }
    outer
}

#[cfg(target_os = "linux")]
#[test]
fn a_network_over_the_process_memory_limits_is_refused_naming_the_limit() {
    let root = tempfile::tempdir().unwrap();
    for (limit, named) in [
        ("--data=600000000", "RLIMIT_DATA"),
        ("--as=2000000000", "RLIMIT_AS"),
    ] {
        let dir = root.path().join(named);
        let train = xor(&dir, 1, &LARGE);
        assert_user_error(&mut wrapped(&["prlimit", limit, "--"], &train), named);
        assert!(!dir.exists());
    }
}

/// A memory control group made for the test, removed when dropped.
#[cfg(target_os = "linux")]
struct MemoryGroup(PathBuf);

#[cfg(target_os = "linux")]
impl MemoryGroup {
    /// A group limited to `bytes` inside this process's memory control group (cgroup v1's
    /// memory hierarchy, or v2's where this process's group may have children with a memory
    /// controller), or why none can be made here.
    fn make(bytes: u64) -> Result<Self, String> {
        let own = fs::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
        let v1 = Path::new("/sys/fs/cgroup/memory");
        let (mount, path, limit_file) = match own.lines().find_map(|line| {
            let mut fields = line.splitn(3, ':');
            let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
            controllers
                .split(',')
                .any(|c| c == "memory")
                .then_some(path)
        }) {
            Some(path) => (v1.to_path_buf(), path, "memory.limit_in_bytes"),
            None => {
                let path = own.lines().find_map(|line| line.strip_prefix("0::"));
                let path = path.ok_or("this process is in no memory control group")?;
                (PathBuf::from("/sys/fs/cgroup"), path, "memory.max")
            }
        };
        let parent = mount.join(path.trim_start_matches('/'));
        let parent = if parent.is_dir() { parent } else { mount };
        let group = parent.join(format!("cubenet-test-{}", std::process::id()));
        fs::create_dir(&group)
            .map_err(|e| format!("cannot make a control group in {}: {e}", parent.display()))?;
        let group = MemoryGroup(group);
        fs::write(group.0.join(limit_file), bytes.to_string())
            .map_err(|e| format!("cannot set {limit_file} in {}: {e}", group.0.display()))?;
        Ok(group)
    }
}

#[cfg(target_os = "linux")]
impl Drop for MemoryGroup {
    fn drop(&mut self) {
        let _ = fs::remove_dir(&self.0);
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_network_over_a_control_groups_memory_limit_is_refused_naming_it() {
    let group = match MemoryGroup::make(800_000_000) {
        Ok(group) => group,
        Err(reason) => {
            eprintln!(
                "skipped: this kernel or container allows no memory control group here: {reason}"
            );
            return;
        }
    };
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("run");
    let train = xor(&dir, 1, &LARGE);
    // The shell moves itself into the group, then becomes cubenet.
    let join_then_run = r#"echo $$ > "$1/cgroup.procs" && shift && exec "$@""#;
    let group_dir = group.0.to_str().unwrap();
    let mut command = wrapped(&["sh", "-c", join_then_run, "sh", group_dir], &train);
    assert_user_error(&mut command, "control group");
    assert!(!dir.exists());
}

#[test]
fn a_settings_file_longer_than_any_cubenet_writes_is_refused_unread() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("run");
    succeeds(&mut xor(&dir, 1, &[]));
    let config = dir.join("config.json");
    let mut text = fs::read_to_string(&config).unwrap();
    text.push_str(&" ".repeat(5 << 20));
    fs::write(&config, text).unwrap();
    let mut eval = cubenet();
    eval.args(["eval", "--model-dir"]).arg(&dir);
    assert_user_error(&mut eval, "config.json: it is longer than 4 MiB");
}

#[test]
fn a_command_line_clap_refuses_is_one_line() {
    let config = crate::common::configs().join("xor.toml");
    let mut repeated = cubenet();
    repeated.args(["train", "--epochs", "1", "--epochs", "2", "--config"]);
    repeated.arg(&config);
    assert_user_error(
        &mut repeated,
        "'--epochs <EPOCHS>' cannot be used multiple times",
    );
    let mut unknown = cubenet();
    unknown.args(["eval", "--model-dri", "x"]);
    assert_user_error(&mut unknown, "unexpected argument '--model-dri'");
    let (output, stdout, _) = crate::cli::run(cubenet().args(["train", "--help"]));
    assert!(
        output.status.success() && stdout.contains("Usage: "),
        "{stdout}"
    );
}

#[test]
fn a_tabular_run_refuses_devices_it_would_not_train_on() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("run");
    for devices in ["[99999999999]", "[1]", "[0, 1]"] {
        let devices = format!("training.devices={devices}");
        assert_user_error(
            &mut xor(&dir, 1, &["--set", &devices]),
            "tabular runs train on the backend's first device",
        );
    }
    assert!(!dir.exists());
    succeeds(&mut xor(&dir, 1, &["--set", "training.devices=[0]"]));
}
