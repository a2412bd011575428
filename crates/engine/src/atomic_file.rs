//! Writing a file so that readers, and a crash, only ever see it whole: the bytes go to
//! `.partial-<name>` beside the target, are flushed to the disk, the file is renamed into
//! place, and the directory is flushed so that the rename itself survives a power loss.
//! Every file cubenet writes goes through [`write_atomically_with`]: configs, run files,
//! model records and checkpoints, CSV predictions, plots, benchmark reports. A `.partial-*`
//! file left by a killed process is never taken for the real one (resuming a run clears
//! those in its checkpoint directory).
//!
//! A process about to exit at a user's request ([`freeze_writes`]) first lets the writes in
//! flight finish and starts no new one, so that it leaves no `.partial-*` file and the newest
//! checkpoint it names stays the newest.
//!
//! For tests of what a full disk does, `CUBENET_DISK_FULL_AFTER=N` makes this writer (and
//! the metric logs, which grow line by line) fail with ENOSPC once the bytes written through
//! them in this process exceed `N`.

use std::ffi::OsString;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{OnceLock, RwLock};

/// Prefix of a file still being written.
pub const PARTIAL_PREFIX: &str = ".partial-";

/// A file that could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {}: {source}", path.display())]
pub struct WriteError {
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

/// Writes `bytes` to `path`, whole or not at all.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    write_atomically_with(path, |partial| fs::write(partial, bytes))
}

/// Creates `path` whole or not at all: `write` creates and fills the file at the temporary
/// path it is given (for writers that open files themselves: Burn's recorders, CSV
/// writers, plotters). That path is in the same directory, since a rename is atomic only
/// within one file system, and keeps the extension, from which plotters picks the image
/// format. On failure the temporary file is removed.
pub fn write_atomically_with(
    path: &Path,
    write: impl FnOnce(&Path) -> io::Result<()>,
) -> Result<(), WriteError> {
    let fail = |source| WriteError {
        path: path.to_path_buf(),
        source,
    };
    let Some(name) = path.file_name() else {
        return Err(fail(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a file name",
        )));
    };
    let mut partial_name = OsString::from(PARTIAL_PREFIX);
    partial_name.push(name);
    let partial = path.with_file_name(partial_name);
    let _writing = WRITES
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    // A stale partial file, or a link put in its place, goes first, so that the bytes never
    // reach a file through a link.
    match fs::remove_file(&partial) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(fail(e)),
        _ => {}
    }
    let written = write(&partial)
        .and_then(|()| simulated_disk().take(fs::metadata(&partial)?.len()))
        .and_then(|()| File::open(&partial)?.sync_all())
        .and_then(|()| fs::rename(&partial, path))
        .and_then(|()| sync_parent(path));
    if written.is_err() {
        // Best effort: the error to report is the one above.
        let _ = fs::remove_file(&partial);
    }
    written.map_err(fail)
}

/// Held shared by every write, exclusively (and for good) by [`freeze_writes`].
static WRITES: RwLock<()> = RwLock::new(());

/// Waits for the writes in flight to finish and blocks every later one, for the rest of the
/// process: for a process that exits next.
pub(crate) fn freeze_writes() {
    let frozen = WRITES
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    std::mem::forget(frozen);
}

/// The disk of `CUBENET_DISK_FULL_AFTER` (see the module docs): bytes written so far, and
/// the most it holds.
struct SimulatedDisk {
    written: AtomicU64,
    capacity: Option<u64>,
}

impl SimulatedDisk {
    /// Counts a file of `bytes`; ENOSPC, as a real disk says it, once past the capacity.
    fn take(&self, bytes: u64) -> io::Result<()> {
        let Some(capacity) = self.capacity else {
            return Ok(());
        };
        match self.written.fetch_add(bytes, Ordering::Relaxed) + bytes > capacity {
            true => Err(io::Error::from_raw_os_error(28)),
            false => Ok(()),
        }
    }
}

fn simulated_disk() -> &'static SimulatedDisk {
    static DISK: OnceLock<SimulatedDisk> = OnceLock::new();
    DISK.get_or_init(|| SimulatedDisk {
        written: AtomicU64::new(0),
        capacity: std::env::var("CUBENET_DISK_FULL_AFTER")
            .ok()
            .and_then(|bytes| bytes.parse().ok()),
    })
}

/// Counts `bytes` about to be written against the disk of `CUBENET_DISK_FULL_AFTER`; ENOSPC
/// once past its capacity, always `Ok` without it.
pub(crate) fn take_from_simulated_disk(bytes: u64) -> io::Result<()> {
    simulated_disk().take(bytes)
}

/// Flushes the directory holding `path`, which records a rename into it.
fn sync_parent(path: &Path) -> io::Result<()> {
    if cfg!(unix) {
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
        File::open(parent.unwrap_or(Path::new(".")))?.sync_all()
    } else {
        // Directories cannot be opened as files elsewhere; the rename is what is atomic.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_appears_whole_and_nothing_else_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        write_atomically(&path, b"{}").unwrap();
        write_atomically(&path, b"{\"a\": 1}").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"{\"a\": 1}");
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["config.json"]);
    }

    #[test]
    fn a_full_simulated_disk_fails_with_enospc() {
        let disk = SimulatedDisk {
            written: AtomicU64::new(0),
            capacity: Some(10),
        };
        disk.take(6).unwrap();
        let full = disk.take(6).unwrap_err();
        assert_eq!(full.raw_os_error(), Some(28));
        assert!(
            full.to_string().contains("No space left on device"),
            "{full}"
        );
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_partial() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("curves.png");
        write_atomically(&path, b"old").unwrap();
        let err = write_atomically_with(&path, |partial| {
            assert_eq!(partial, dir.path().join(".partial-curves.png"));
            fs::write(partial, b"half")?;
            Err(io::Error::other("disk full"))
        })
        .unwrap_err();
        assert!(err.to_string().contains("curves.png: disk full"), "{err}");
        assert_eq!(fs::read(&path).unwrap(), b"old");
        assert!(!dir.path().join(".partial-curves.png").exists());
    }
}
