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

use super::{TrainError, TrainingWatch};
use crate::quiet_panic::catch_expected;

/// Runs `launch` (burn-train's training loop at `batch_size`, watched by `watch`), turning
/// a GPU allocation failure anywhere in it into [`TrainError::OutOfGpuMemory`]; other
/// panics unwind as usual.
pub(super) fn fail_on_out_of_memory<R>(
    batch_size: usize,
    watch: &TrainingWatch,
    launch: impl FnOnce() -> R,
) -> Result<R, TrainError> {
    let watch = watch.clone();
    catch_expected(launch, is_out_of_memory, move || {
        watch.stop("out of GPU memory")
    })
    .map_err(|_| TrainError::OutOfGpuMemory { batch_size })
}

/// Whether a panic message reports a failed GPU allocation (see the module docs).
fn is_out_of_memory(message: &str) -> bool {
    let words = message.to_lowercase().replace(['_', '-'], " ");
    words.contains("out of memory") || words.contains("can't allocate buffer")
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
        let err = fail_on_out_of_memory(512, &watch, || -> u8 { panic!("{BUFFER_TOO_BIG}") })
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
        let err = fail_on_out_of_memory(64, &watch, || {
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
        assert_eq!(fail_on_out_of_memory(64, &watch, || 7).unwrap(), 7);
        assert!(!interrupter.should_stop(), "a run that fits goes on");
    }

    #[test]
    fn other_panics_still_unwind() {
        let _turn = HOOK.lock().unwrap_or_else(|e| e.into_inner());
        let watch = TrainingWatch::new(Interrupter::new());
        let unwound = std::panic::catch_unwind(|| {
            fail_on_out_of_memory(64, &watch, || -> u8 { panic!("a bug") })
        });
        assert!(unwound.is_err());
    }
}
