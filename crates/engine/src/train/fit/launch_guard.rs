//! Failures that burn-train's loop and the GPU runtimes report by panicking, turned into one
//! line each.
//!
//! A run that does not fit in GPU memory ends with one line naming its batch size. CubeCL
//! 0.10 and wgpu report a failed allocation by panicking, on the training thread or on
//! CubeCL's device thread (which logs the failed task and goes on, so that the training
//! thread fails later, or not at all): CUDA's `CUDA_ERROR_OUT_OF_MEMORY` and a buffer larger
//! than the memory pool's pages become `IoError::BufferTooBig` ("can't allocate buffer of
//! size: …"), a launch that runs out `LaunchError::OutOfMemory` ("an out-of-memory error"),
//! wgpu's allocations "wgpu error: Out of Memory". Since the steps after a failed
//! allocation compute garbage, the first one stops training through the [`TrainingWatch`]:
//! the epoch it hit is neither validated nor checkpointed, and checkpoints are written
//! atomically, so the last one on disk is whole and from before the failure.
//!
//! Third-party code that writes files during training panics when a write fails (CubeCL's
//! kernel cache: `Os { code: 28, … }` on a full disk); the panics that follow (closed
//! channels, a joined thread) are its consequences. The first such panic becomes one line
//! naming the artifact directory and the OS's reason. cubenet's own writes (checkpoints,
//! metric logs) report their failures through the [`TrainingWatch`] instead.
//!
//! burn-train's dashboard stops a run "immediately" (its `q` then `k`) by panicking on its
//! drawing thread and then on its event thread; the training thread then fails on their
//! closed channel. That is a stop the user asked for: it ends like any other
//! ([`crate::train::fit::stops`]), naming the checkpoint `--resume` continues after.

use std::io;
use std::path::Path;

use crate::quiet_panic::catch_expected;
use crate::train::fit::stops;
use crate::train::{TrainError, TrainingWatch};

/// Runs `launch` (burn-train's training loop at `batch_size`, writing into `dir`, watched by
/// `watch`), turning a GPU allocation failure anywhere in it into
/// [`TrainError::OutOfGpuMemory`], a failed log write into [`TrainError::Io`] and the
/// dashboard's kill key into [`TrainError::Stopped`]; other panics unwind as usual.
pub(crate) fn guard_launch<R>(
    batch_size: usize,
    dir: &Path,
    watch: &TrainingWatch,
    launch: impl FnOnce() -> R,
) -> Result<R, TrainError> {
    let watch = watch.clone();
    catch_expected(launch, is_expected, move || watch.stop("training failed")).map_err(|message| {
        if message == DASHBOARD_KILL {
            return stops::stopped();
        }
        match os_error(&message) {
            Some(source) => TrainError::Io {
                path: dir.to_path_buf(),
                source,
            },
            None => TrainError::OutOfGpuMemory { batch_size },
        }
    })
}

/// The panic message of the dashboard's kill key.
const DASHBOARD_KILL: &str = "Killing training from user input.";

/// Whether a panic message reports one of the failures above.
fn is_expected(message: &str) -> bool {
    message == DASHBOARD_KILL || is_out_of_memory(message) || os_error(message).is_some()
}

/// Whether a panic message reports a failed GPU allocation (see the module docs).
fn is_out_of_memory(message: &str) -> bool {
    let words = message.to_lowercase().replace(['_', '-'], " ");
    words.contains("out of memory") || words.contains("can't allocate buffer")
}

/// The OS error in a panic message of a failed file write, which prints it as `Os { code:
/// 28, kind: StorageFull, message: "No space left on device" }`.
fn os_error(message: &str) -> Option<io::Error> {
    let (_, rest) = message.split_once("Os { code: ")?;
    let code: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some(io::Error::from_raw_os_error(code.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use burn::train::Interrupter;

    use super::*;

    /// The panic hook is one per process: tests that replace it take turns.
    static HOOK: Mutex<()> = Mutex::new(());

    const BUFFER_TOO_BIG: &str =
        "called `Result::unwrap()` on an `Err` value: can't allocate buffer of size: 8589934592";

    #[test]
    fn allocation_failures_are_recognized_by_their_messages() {
        for message in [
            BUFFER_TOO_BIG,
            "An out-of-memory error happened during launch\nCaused by:\n  CUDA_ERROR_OUT_OF_MEMORY",
            "wgpu error: Out of Memory\n",
        ] {
            assert!(is_out_of_memory(message), "{message}");
        }
        for message in [
            "Can't have an error when submitting a task",
            "index out of bounds: the len is 3 but the index is 5",
            "A compilation error happened during launch",
        ] {
            assert!(!is_out_of_memory(message), "{message}");
        }
    }

    #[test]
    fn an_allocation_failure_becomes_one_line_naming_the_batch_size() {
        let _turn = HOOK.lock().unwrap_or_else(|e| e.into_inner());
        let interrupter = Interrupter::new();
        let watch = TrainingWatch::new(interrupter.clone());
        let err = guard_launch(512, Path::new("run"), &watch, || -> u8 {
            panic!("{BUFFER_TOO_BIG}")
        })
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "out of GPU memory at batch size 512: lower --batch-size (or training.batch_size \
             in the run file)"
        );
        assert!(
            interrupter.should_stop(),
            "the first failure stops training"
        );
        // The allocation failed on another thread, which went on; the loop itself returned.
        let interrupter = Interrupter::new();
        let watch = TrainingWatch::new(interrupter.clone());
        let err = guard_launch(64, Path::new("run"), &watch, || {
            std::thread::spawn(|| {
                std::panic::catch_unwind(|| -> u8 { panic!("wgpu error: Out of Memory") })
            })
            .join()
            .expect("the thread caught its panic")
            .expect_err("the allocation failed");
        })
        .unwrap_err();
        assert!(matches!(err, TrainError::OutOfGpuMemory { batch_size: 64 }));
        assert!(interrupter.should_stop());
        let interrupter = Interrupter::new();
        let watch = TrainingWatch::new(interrupter.clone());
        assert_eq!(guard_launch(64, Path::new("run"), &watch, || 7).unwrap(), 7);
        assert!(!interrupter.should_stop(), "a run that fits goes on");
    }

    #[test]
    fn a_failed_log_write_becomes_one_line_naming_the_directory() {
        let _turn = HOOK.lock().unwrap_or_else(|e| e.into_inner());
        let interrupter = Interrupter::new();
        let watch = TrainingWatch::new(interrupter.clone());
        let full = "Can log an item.: Os { code: 28, kind: StorageFull, message: \"No space \
                    left on device\" }";
        let err = guard_launch(64, Path::new("artifacts/run"), &watch, || {
            // A writer's thread fails; the loop then fails on its closed channel.
            let _ = std::thread::spawn(move || -> u8 { panic!("{full}") }).join();
            panic!("Can log using the logger thread.: SendError {{ .. }}")
        })
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot write artifacts/run: No space left on device (os error 28)"
        );
        assert!(interrupter.should_stop());
        assert!(os_error("index out of bounds").is_none());
    }

    #[test]
    fn other_panics_still_unwind() {
        let _turn = HOOK.lock().unwrap_or_else(|e| e.into_inner());
        let watch = TrainingWatch::new(Interrupter::new());
        let unwound = std::panic::catch_unwind(|| {
            guard_launch(64, Path::new("run"), &watch, || -> u8 { panic!("a bug") })
        });
        assert!(unwound.is_err());
    }
}
