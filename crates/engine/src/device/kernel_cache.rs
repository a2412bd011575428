//! Compiled CUDA kernels kept between runs, in a folder of their own for each build.
//!
//! CubeCL compiles every kernel a CUDA run launches (NVRTC), which is most of a short run's
//! first epoch, and by default keeps the result only for the process. Its on-disk cache
//! (`[compilation] cache` in a `cubecl.toml`) keys a kernel by its name and launch settings,
//! not by its code: a cache shared by two builds hands the newer one the older one's PTX for
//! any kernel whose body changed (with a cache in `target/` kept across builds, cubenet's
//! CUDA kernel tests once failed with an illegal memory access). So
//! cubenet gives each build of the running executable (its path, size and modification
//! time) its own folder under the user's cache directory, `cubenet/kernels/`, and removes
//! the folders of that executable's earlier builds there ([`crate::device::cuda_settings`] turns the
//! cache on, unless a `cubecl.toml` chooses one itself).

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

/// This build's folder for CubeCL's compiled-kernel cache (see the module's documentation),
/// made if missing; `None` where it cannot be (see [`this_builds_folder`]).
pub fn this_builds_cache() -> Option<PathBuf> {
    dirs::cache_dir().and_then(|cache| this_builds_folder(&cache.join("cubenet").join("kernels")))
}

/// `<root>/<executable>-<hash of its path>-<hash of its size and modification time>`, made
/// if missing; the executable's folders for other builds are removed. `None` where the
/// executable cannot be examined, the disk is nearly full (then nothing is made) or the
/// folder cannot be made.
fn this_builds_folder(root: &Path) -> Option<PathBuf> {
    let executable = std::env::current_exe().ok()?;
    let metadata = executable.metadata().ok()?;
    let stem = executable.file_stem()?.to_string_lossy();
    let prefix = format!("{stem}-{:016x}-", hash_of(&executable));
    let name = format!(
        "{prefix}{:016x}",
        hash_of(&(metadata.len(), metadata.modified().ok()?))
    );
    remove_earlier_builds(root, &prefix, &name);
    let folder = root.join(&name);
    let existing = folder.ancestors().find(|path| path.exists())?;
    if !has_room(existing) {
        return None;
    }
    std::fs::create_dir_all(&folder).ok()?;
    Some(folder)
}

/// Room for a build's kernels (a few MB) with a wide margin on the disk of `path`: CubeCL
/// panics where a kernel cannot be written to its cache, so a nearly full disk gets no cache
/// at all.
#[cfg(unix)]
#[allow(clippy::useless_conversion)] // statvfs's fields are u64 on Linux, narrower elsewhere
fn has_room(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;

    const ROOM: u64 = 256 << 20;
    let Ok(path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    let mut stats = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `path` is a NUL-terminated string and `stats` is written by a successful call.
    if unsafe { libc::statvfs(path.as_ptr(), stats.as_mut_ptr()) } != 0 {
        return false;
    }
    // SAFETY: the call above succeeded.
    let stats = unsafe { stats.assume_init() };
    u64::from(stats.f_bavail).saturating_mul(u64::from(stats.f_frsize)) >= ROOM
}

#[cfg(not(unix))]
fn has_room(_path: &Path) -> bool {
    true
}

/// Removes the folders in `root` named `prefix` followed by a 16-digit hash, other than
/// `current`: only this module names folders so, each for one build of one executable.
/// A folder that cannot be removed stays.
fn remove_earlier_builds(root: &Path, prefix: &str, current: &str) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        let earlier_build = name != current
            && name.strip_prefix(prefix).is_some_and(|hash| {
                hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit())
            });
        if earlier_build && entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A hash that is the same every time this build computes it (not across Rust releases,
/// which do not matter: another compiler makes another build).
fn hash_of(value: &impl Hash) -> u64 {
    let mut hasher = DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_executables_other_builds_are_removed() {
        let root = tempfile::tempdir().unwrap();
        let folder = this_builds_folder(root.path()).unwrap();
        let name = folder.file_name().unwrap().to_str().unwrap().to_owned();
        let prefix = &name[..name.len() - 16];
        let earlier = root.path().join(format!("{prefix}0123456789abcdef"));
        let kept = [
            format!("{prefix}0123"),
            format!("{prefix}0123456789abcdefg"),
            "other-0000000000000000-0123456789abcdef".to_owned(),
            "user notes".to_owned(),
        ];
        std::fs::create_dir(&earlier).unwrap();
        std::fs::write(earlier.join("chunk0.cbor"), b"ptx").unwrap();
        for name in &kept {
            std::fs::create_dir(root.path().join(name)).unwrap();
        }
        let file_named_like_a_build = root.path().join(format!("{prefix}fedcba9876543210"));
        std::fs::write(&file_named_like_a_build, b"not ours").unwrap();

        assert_eq!(this_builds_folder(root.path()).unwrap(), folder);
        assert!(folder.is_dir());
        assert!(!earlier.exists(), "an earlier build's folder stayed");
        for name in &kept {
            assert!(root.path().join(name).is_dir(), "{name} was removed");
        }
        assert!(file_named_like_a_build.is_file());
    }
}
