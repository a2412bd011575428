//! Runs third-party code that reports failures by panicking (GPU runtimes without a device,
//! burn-dataset's downloader without a network) and turns the panic into an error message,
//! without the panic's backtrace reaching the user's terminal.

use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

/// Runs `f`; a panic inside it becomes `Err(message)` and prints nothing.
///
/// GPU runtimes often fail in a worker thread and the caller then panics on a closed
/// channel, so the message kept is that of the first panic in any thread, which names the
/// real cause. Callers only report the message after a panic and never reuse state `f`
/// touched, so unwind safety holds.
pub(crate) fn catch_quietly<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    let first_message = Arc::new(Mutex::new(None::<String>));
    let previous_hook = panic::take_hook();
    let record = first_message.clone();
    panic::set_hook(Box::new(move |info| {
        let mut first = record.lock().unwrap_or_else(|e| e.into_inner());
        if first.is_none() {
            let payload = info.payload();
            let text = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()));
            *first = Some(text.unwrap_or_else(|| "unknown error".into()));
        }
    }));
    let outcome = panic::catch_unwind(AssertUnwindSafe(f));
    panic::set_hook(previous_hook);
    outcome.map_err(|_| {
        let first = first_message
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        first.unwrap_or_else(|| "unknown error".into())
    })
}
