//! burn-train's application log, `experiment.log` in the artifact directory: what Burn and
//! its runtimes log at INFO and above (wgpu's INFO lines left out), as burn-train's own
//! installer writes it, but with a filter that tells `tracing` its most verbose level.
//!
//! burn-train's installer filters with a closure, which declares no level: every trace-level
//! span CubeCL opens around each launch, allocation and copy on a GPU's device thread was
//! then created, entered and closed in the subscriber's registry before being dropped, about
//! a fifth of that thread's time in a host-bound step (a sampling profile of LeNet's
//! training on an H200; docs/perf-log/2026-11-28-device-thread-profile.md). A target filter
//! declares INFO, so those spans are disabled where they are written.

use std::path::Path;

use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, Registry};

/// The targets logged and their levels: INFO and above; from WARN for the targets that start
/// with `wgpu` (`wgpu_core`, `wgpu_hal`: they log too much at INFO).
fn targets() -> Targets {
    Targets::new()
        .with_default(LevelFilter::INFO)
        .with_target("wgpu", LevelFilter::WARN)
}

/// The subscriber that writes `path`.
fn subscriber(path: &Path) -> impl tracing_core::Subscriber + Send + Sync {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let file = path.file_name().unwrap_or(path.as_os_str());
    let writer = tracing_appender::rolling::never(dir, file);
    let layer = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .with_writer(writer)
        .with_filter(targets());
    Registry::default().with(layer)
}

/// Installs the log as the process's global subscriber. `false` when one is already
/// installed: `tracing` has one per process, so only a process's first run writes its log.
pub fn install(path: &Path) -> bool {
    subscriber(path).try_init().is_ok()
}

#[cfg(test)]
mod tests {
    use tracing_core::Subscriber;
    use tracing_subscriber::filter::LevelFilter;

    /// The level `tracing` reads before it creates a span or an event: trace- and
    /// debug-level ones are then never built.
    #[test]
    fn the_log_declares_info_as_its_most_verbose_level() {
        let dir = tempfile::tempdir().unwrap();
        let subscriber = super::subscriber(&dir.path().join("experiment.log"));
        assert_eq!(subscriber.max_level_hint(), Some(LevelFilter::INFO));
    }
}
