//! Stopping a run: SIGINT, SIGTERM and SIGHUP stop `cubenet train` at the next step with exit
//! code 130 and one line naming the epoch `--resume` continues after, which it then does; a
//! second signal stops it at once; on the dashboard (under a pseudo-terminal) Ctrl-C and its
//! stop and kill keys do the same, and the terminal is always given back.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::cli::{cubenet, run};
use crate::common::configs;

/// A regression run long enough to signal between its checkpoints.
fn regression_run(dir: &Path, epochs: usize) -> Command {
    let mut command = cubenet();
    command
        .args(["train", "--config"])
        .arg(configs().join("linear_regression.toml"))
        .args(["--set", "data.rows=40000", "--batch-size", "16"])
        .args(["--epochs", &epochs.to_string()])
        .arg("--artifact-dir")
        .arg(dir);
    command
}

/// Sends `signal` (`INT`, `TERM`, `HUP`) to `child`.
fn signal(child: &Child, signal: &str) {
    let sent = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(sent.success());
}

/// Waits until `path` exists, while `child` runs.
fn wait_for(path: &Path, child: &mut Child) {
    let start = Instant::now();
    while !path.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "no {}",
            path.display()
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before {} appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits for `child` to exit, at most `limit`; its status and stderr.
fn wait_at_most(mut child: Child, limit: Duration) -> (ExitStatus, String) {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut stderr = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut stderr)
                .unwrap();
            return (status, stderr);
        }
        if start.elapsed() > limit {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("the run did not stop within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The epoch a stopped run's last stderr line says `--resume` continues after, checked
/// against the newest complete checkpoint in `dir` (and nothing newer, no partial file, no
/// final model).
fn stopped_after(status: ExitStatus, stderr: &str, dir: &Path, epochs: usize) -> usize {
    assert_eq!(status.code(), Some(130), "{stderr}");
    let line = stderr.trim_end().lines().next_back().unwrap_or_default();
    let pattern = regex_lite::Regex::new(&format!(
        "^stopped after epoch ([0-9]+) of {epochs}; continue with --resume$"
    ))
    .unwrap();
    let epoch: usize = pattern
        .captures(line)
        .unwrap_or_else(|| panic!("no stop line: {stderr}"))[1]
        .parse()
        .unwrap();
    let checkpoint = |part: &str, epoch: usize| dir.join(format!("checkpoint/{part}-{epoch}.mpk"));
    for part in ["model", "optim", "scheduler"] {
        assert!(checkpoint(part, epoch).exists(), "{stderr}");
        assert!(!checkpoint(part, epoch + 1).exists(), "{stderr}");
    }
    for entry in std::fs::read_dir(dir.join("checkpoint")).unwrap() {
        let name = entry.unwrap().file_name();
        assert!(!name.to_string_lossy().starts_with(".partial"), "{name:?}");
    }
    assert!(
        !dir.join("model.mpk").exists(),
        "a stopped run saved a model"
    );
    epoch
}

/// Spawns `command` with stderr captured, sends `signals` once checkpoint `epoch` is on
/// disk, and waits for the exit.
fn stop_after_checkpoint(
    mut command: Command,
    dir: &Path,
    epoch: usize,
    signals: &[&str],
) -> (ExitStatus, String) {
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(
        &dir.join(format!("checkpoint/scheduler-{epoch}.mpk")),
        &mut child,
    );
    for name in signals {
        signal(&child, name);
    }
    wait_at_most(child, Duration::from_secs(60))
}

/// The test metrics line of a tabular run's output.
fn test_line(stdout: &str) -> String {
    stdout
        .lines()
        .find(|l| l.starts_with("test "))
        .unwrap_or_else(|| panic!("no test line in {stdout}"))
        .to_string()
}

/// Whether this process ignores SIGHUP (bit 0 of the `SigIgn` mask Linux shows).
fn hup_ignored_here() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("SigIgn:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & 1 == 1)
}

#[test]
fn sigint_sigterm_and_sighup_stop_at_a_checkpoint_that_resume_continues() {
    let dir = tempfile::tempdir().unwrap();
    let epochs = 8;
    let whole = dir.path().join("whole");
    let (output, whole_out, stderr) = run(&mut regression_run(&whole, epochs));
    assert!(output.status.success(), "{stderr}");

    let stopped = dir.path().join("stopped");
    let mut after = 0;
    // Under `nohup` the run inherits an ignored SIGHUP and keeps ignoring it.
    let hup: &[&str] = match hup_ignored_here() {
        true => &["HUP", "INT"],
        false => &["HUP"],
    };
    let stops: [(bool, &str, &[&str]); 3] = [
        (false, "INT", &["INT"]),
        (true, "TERM", &["TERM"]),
        (true, "HUP", hup),
    ];
    for (resume, name, signals) in stops {
        let mut command = regression_run(&stopped, epochs);
        if resume {
            command.arg("--resume");
        }
        let (status, stderr) = stop_after_checkpoint(command, &stopped, after + 1, signals);
        let epoch = stopped_after(status, &stderr, &stopped, epochs);
        assert!(epoch > after && epoch < epochs, "SIG{name}: {stderr}");
        after = epoch;
    }
    let (output, resumed_out, stderr) = run(regression_run(&stopped, epochs).arg("--resume"));
    assert!(output.status.success(), "{stderr}");
    assert!(
        resumed_out.contains(&format!("resuming after epoch {after}")),
        "{resumed_out}"
    );
    // Stopped three times, it ends where the uninterrupted run did.
    assert_eq!(test_line(&resumed_out), test_line(&whole_out));
}

/// A regression run whose every step takes seconds on a CPU: one wide hidden layer, the whole
/// training split in one batch.
fn slow_step_run(dir: &Path, epochs: usize) -> Command {
    let mut command = cubenet();
    command
        .args(["train", "--config"])
        .arg(configs().join("linear_regression.toml"))
        .args([
            "--set",
            "data.rows=4000",
            "--set",
            "model.hidden=[4096,4096]",
        ])
        .args(["--batch-size", "4000", "--epochs", &epochs.to_string()])
        .arg("--artifact-dir")
        .arg(dir);
    command
}

#[test]
fn a_second_sigint_stops_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = slow_step_run(dir.path(), 50)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    for part in ["model", "optim", "scheduler"] {
        wait_for(
            &dir.path().join(format!("checkpoint/{part}-1.mpk")),
            &mut child,
        );
    }
    let epoch_one = Instant::now();
    // Inside epoch 2's only step.
    std::thread::sleep(Duration::from_millis(300));
    signal(&child, "INT");
    std::thread::sleep(Duration::from_millis(50));
    signal(&child, "INT");
    let signalled = Instant::now();
    let (status, stderr) = wait_at_most(child, Duration::from_secs(60));
    let took = signalled.elapsed();
    let epoch = stopped_after(status, &stderr, dir.path(), 50);
    assert_eq!(epoch, 1, "{stderr}");
    assert!(
        !dir.path().join("checkpoint/model-2.mpk").exists(),
        "epoch 2 finished: {:?} after checkpoint 1",
        epoch_one.elapsed()
    );
    // One step of this run takes seconds; stopping at once does not wait for it.
    assert!(took < Duration::from_secs(1), "took {took:?}: {stderr}");
    let (output, resumed, stderr) = run(slow_step_run(dir.path(), 2).arg("--resume"));
    assert!(output.status.success(), "{stderr}");
    assert!(resumed.contains("resuming after epoch 1"), "{resumed}");
}

/// Bytes a run's dashboard wrote to its terminal, read as they come.
#[derive(Clone, Default)]
struct Screen(Arc<Mutex<Vec<u8>>>);

impl Screen {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    fn wait_for(&self, needle: &str, child: &mut Child) {
        let start = Instant::now();
        while !self.text().contains(needle) {
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "no {needle:?} in {}",
                self.text()
            );
            assert!(
                child.try_wait().unwrap().is_none(),
                "ended early: {}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// `cubenet train` of the XOR run for many epochs on the dashboard, in a pseudo-terminal of
/// its own (util-linux `script`), followed by the command's exit code and the terminal's
/// settings; `keys` are typed once the dashboard shows, each after `pause`. Returns what the
/// terminal showed.
fn on_the_dashboard(dir: &Path, keys: &[&str], pause: Duration) -> String {
    let command = format!(
        "stty cols 120 rows 40; '{}' train --config '{}' --epochs 100000 --set \
         training.patience=100000 --artifact-dir '{}'; echo \"exit code $?\"; stty -a",
        env!("CARGO_BIN_EXE_cubenet"),
        configs().join("xor.toml").display(),
        dir.display()
    );
    let mut child = Command::new("script")
        .args(["-qfec", &command, "/dev/null"])
        .env("TERM", "xterm")
        // bash, unlike dash, goes on after a command that handled the SIGINT both got.
        .env("SHELL", "/bin/bash")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("util-linux `script` runs");
    let screen = Screen::default();
    let mut stdout = child.stdout.take().unwrap();
    let reader = {
        let screen = screen.clone();
        std::thread::spawn(move || {
            let mut buffer = [0; 4096];
            while let Ok(read @ 1..) = stdout.read(&mut buffer) {
                screen.0.lock().unwrap().extend_from_slice(&buffer[..read]);
            }
        })
    };
    screen.wait_for("\x1b[?1049h", &mut child);
    let mut stdin = child.stdin.take().unwrap();
    for key in keys {
        std::thread::sleep(pause);
        stdin.write_all(key.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }
    let start = Instant::now();
    // `stty -a` begins with the line speed.
    while !screen.text().contains("speed ") && child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("the run did not stop: {}", screen.text());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(stdin);
    child.wait().unwrap();
    reader.join().unwrap();
    screen.text()
}

/// A dashboard run that stopped as a stop should: exit code 130, the line, no panic, and the
/// terminal given back (the main screen, the cursor, cooked mode).
fn assert_stopped_cleanly(screen: &str, dir: &Path) {
    assert!(screen.contains("exit code 130"), "{screen}");
    assert!(!screen.contains("panicked"), "{screen}");
    let line =
        regex_lite::Regex::new("stopped after epoch ([0-9]+) of 100000; continue with --resume")
            .unwrap();
    let epoch: usize = line
        .captures(screen)
        .unwrap_or_else(|| panic!("no stop line: {screen}"))[1]
        .parse()
        .unwrap();
    assert!(
        dir.join(format!("checkpoint/model-{epoch}.mpk")).exists(),
        "{screen}"
    );
    let after = |needle: &str| screen.rfind(needle).map_or(0, |at| at + 1);
    assert!(after("\x1b[?1049l") > after("\x1b[?1049h"), "{screen:?}");
    assert!(after("\x1b[?25h") > after("\x1b[?25l"), "{screen:?}");
    let settings: Vec<&str> = screen[screen.rfind("exit code").unwrap()..]
        .split_whitespace()
        .collect();
    for mode in ["icanon", "echo", "isig"] {
        assert!(settings.contains(&mode), "raw mode left on: {settings:?}");
    }
}

#[test]
fn the_dashboard_stops_cleanly_on_ctrl_c_and_on_its_keys() {
    let pause = Duration::from_millis(1500);
    let dir = tempfile::tempdir().unwrap();
    // Ctrl-C: in raw mode a key, which the dashboard turns back into SIGINT.
    let ctrl_c = dir.path().join("ctrl-c");
    assert_stopped_cleanly(&on_the_dashboard(&ctrl_c, &["\x03"], pause), &ctrl_c);
    // The plot keys, the quit menu cancelled, then "stop the training".
    let keys = dir.path().join("q-s");
    let screen = on_the_dashboard(
        &keys,
        &["\x1b[C\x1b[D\x1b[A\x1b[B", "q", "c", "q", "s"],
        Duration::from_millis(300),
    );
    assert_stopped_cleanly(&screen, &keys);
    // "Stop the training immediately", which panics inside burn-train.
    let kill = dir.path().join("q-k");
    assert_stopped_cleanly(&on_the_dashboard(&kill, &["q", "k"], pause), &kill);
}
