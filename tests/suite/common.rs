//! Helpers shared by the integration tests.

use std::path::{Path, PathBuf};

use cubenet::data::MnistSource;

/// Real MNIST for tests: `$CUBENET_MNIST_DIR`, else the IDX files at `../shared/datasets/mnist`
/// beside the checkout (CI has them), else burn-dataset's download (a fresh machine online).
pub fn mnist_source() -> MnistSource {
    if let Some(dir) = std::env::var_os("CUBENET_MNIST_DIR") {
        return MnistSource::Dir(PathBuf::from(dir));
    }
    // `cargo test` sets the variable at run time too; prefer it, the checkout may have moved.
    let root = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or(PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    let shared = root.join("../shared/datasets/mnist");
    if shared.is_dir() {
        MnistSource::Dir(shared)
    } else {
        MnistSource::Download
    }
}

/// An example binary built by `cargo test` next to the test binaries.
pub fn example_binary(name: &str) -> PathBuf {
    let deps = std::env::current_exe().expect("test binary path");
    let profile_dir = deps
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    profile_dir.join("examples").join(name)
}
