//! Runs third-party code that reports failures by panicking (GPU runtimes without a device
//! or out of memory, burn-dataset's downloader without a network) and turns the panic into
//! an error message, without the panic's backtrace reaching the user's terminal.

use std::panic::{self, AssertUnwindSafe, PanicHookInfo};
use std::sync::{Arc, Mutex};

/// Runs `f`; a panic inside it becomes `Err(message)` and prints nothing.
///
/// GPU runtimes often fail in a worker thread and the caller then panics on a closed
/// channel, so the message kept is that of the first panic in any thread, which names the
/// real cause. Callers only report the message after a panic and never reuse state `f`
/// touched, so unwind safety holds.
pub(crate) fn catch_quietly<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    let (outcome, first) = catch_recording(f, |_| true, || {});
    outcome.map_err(|_| first.unwrap_or_else(unknown))
}

/// Runs `f`, catching only the failures that `expected` recognizes by their panic message:
/// the first such panic in any thread becomes `Err(message)`, and it and every panic after
/// it (its consequences, such as a closed channel) print nothing. Also an expected panic
/// that a thread caught by itself (CubeCL's device thread logs a failed task and goes on)
/// makes the call fail, even if `f` returned. Any other panic prints and unwinds as usual.
/// `on_first` runs when the first expected panic happens, on the panicking thread: it can
/// tell `f` to stop early.
pub(crate) fn catch_expected<R>(
    f: impl FnOnce() -> R,
    expected: fn(&str) -> bool,
    on_first: impl Fn() + Send + Sync + 'static,
) -> Result<R, String> {
    match catch_recording(f, expected, on_first) {
        (_, Some(message)) => Err(message),
        (Ok(value), None) => Ok(value),
        (Err(payload), None) => panic::resume_unwind(payload),
    }
}

type PanicHook = Box<dyn Fn(&PanicHookInfo<'_>) + Sync + Send + 'static>;

/// Runs `f` with a panic hook that keeps the first panic message `quiet` accepts, and every
/// panic after it, silent, calling `on_first` when it keeps that first one; others go to the
/// hook that was installed before.
fn catch_recording<R>(
    f: impl FnOnce() -> R,
    quiet: fn(&str) -> bool,
    on_first: impl Fn() + Send + Sync + 'static,
) -> (std::thread::Result<R>, Option<String>) {
    let first_message = Arc::new(Mutex::new(None::<String>));
    let previous: Arc<PanicHook> = Arc::new(panic::take_hook());
    let (record, outer) = (first_message.clone(), previous.clone());
    panic::set_hook(Box::new(move |info| {
        let mut first = record.lock().unwrap_or_else(|e| e.into_inner());
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(unknown);
        if first.is_none() && quiet(&message) {
            *first = Some(message);
            on_first();
        } else if first.is_none() {
            drop(first);
            outer(info);
        }
    }));
    let outcome = panic::catch_unwind(AssertUnwindSafe(f));
    // Dropping this hook leaves `previous` the only owner of the hook before it.
    drop(panic::take_hook());
    let previous = Arc::try_unwrap(previous)
        .unwrap_or_else(|shared| Box::new(move |info: &PanicHookInfo<'_>| shared(info)));
    panic::set_hook(previous);
    let first = first_message
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    (outcome, first)
}

fn unknown() -> String {
    "unknown error".into()
}

/// The first non-blank line of a panic message, cut to at most 200 characters: enough to
/// name a cause on one terminal line.
pub(crate) fn first_line(message: &str) -> String {
    const MAX_CHARS: usize = 200;
    let line = message
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("unknown error");
    match line.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_string(),
    }
}
