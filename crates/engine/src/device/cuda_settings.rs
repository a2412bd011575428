//! The CubeCL settings a CUDA run starts with. What a `cubecl.toml` (or a `burn.toml`'s
//! `[cubecl]` section) in the working directory or above it sets stays as it is; where it
//! leaves CubeCL's defaults, cubenet changes two:
//!
//! - **Compiled kernels are kept between runs**, in a folder of this build's own
//!   ([`crate::device::kernel_cache`] says why a folder per build).
//! - **One CUDA stream a GPU** (`[streaming] max_streams = 1`), where CubeCL gives each host
//!   thread its own, up to 128. burn-train reads the model on threads of its own (each
//!   checkpoint, the metrics), and CubeCL gives each stream its own pools of device memory
//!   and of pinned host memory, pages sized like the GPU's, allocated on the GPU's queue
//!   runner while no kernel runs, so every extra stream stalls the GPU once more; one stream
//!   a GPU keeps that to once a run (docs/perf-log/2026-11-28-one-stream-a-gpu.md). It also
//!   puts the uploads of host-built batches in line with the step's kernels.

use std::path::PathBuf;
use std::sync::Arc;

use cubecl::config::cache::CacheConfig;
use cubecl::config::streaming::StreamingConfig;
use cubecl::config::{CubeClRuntimeConfig, RuntimeConfig};

/// CUDA streams a GPU, where no settings file chooses (see the module's documentation).
const STREAMS_PER_GPU: u8 = 1;

/// Sets CubeCL's settings for this process (see the module's documentation). Call it before
/// the first CUDA device is made: once CubeCL has read its settings they stay as they are.
pub fn apply() {
    let mut settings = CubeClRuntimeConfig::storage().lock();
    if settings.is_some() {
        return;
    }
    let file = CubeClRuntimeConfig::from_current_dir().override_from_env();
    *settings = Some(Arc::new(with_cubenet_defaults(
        file,
        crate::device::kernel_cache::this_builds_cache,
    )));
}

/// `file`'s settings, with cubenet's where it leaves CubeCL's defaults; `kernel_cache` names
/// the compiled kernels' folder (called only where `file` names none).
fn with_cubenet_defaults(
    mut file: CubeClRuntimeConfig,
    kernel_cache: impl FnOnce() -> Option<PathBuf>,
) -> CubeClRuntimeConfig {
    if file.compilation.cache.is_none() {
        file.compilation.cache = kernel_cache().map(CacheConfig::File);
    }
    // A file that names CubeCL's default number cannot be told from one that names none; it
    // gets cubenet's.
    if file.streaming.max_streams == StreamingConfig::default().max_streams {
        file.streaming.max_streams = STREAMS_PER_GPU;
    }
    file
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_the_file_leaves_at_cubecls_defaults_changes() {
        let folder = PathBuf::from("kernels-of-this-build");
        let defaults =
            with_cubenet_defaults(CubeClRuntimeConfig::default(), || Some(folder.clone()));
        assert_eq!(defaults.streaming.max_streams, STREAMS_PER_GPU);
        assert!(
            matches!(defaults.compilation.cache, Some(CacheConfig::File(ref f)) if *f == folder)
        );

        let mut file = CubeClRuntimeConfig::default();
        file.streaming.max_streams = 4;
        file.compilation.cache = Some(CacheConfig::Target);
        let kept = with_cubenet_defaults(file, || panic!("the file names a cache"));
        assert_eq!(kept.streaming.max_streams, 4);
        assert!(matches!(kept.compilation.cache, Some(CacheConfig::Target)));

        // Where the cache folder cannot be made, the run keeps compiled kernels in memory.
        let without = with_cubenet_defaults(CubeClRuntimeConfig::default(), || None);
        assert!(without.compilation.cache.is_none());
    }
}
