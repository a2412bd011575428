//! Claiming an artifact directory, and the rule that keeps a user's files safe in it:
//! cubenet deletes or overwrites only what it wrote. A run takes a directory only when it is
//! new, empty, or already marked as a cubenet run's by [`MARKER_FILE`] (written first, before
//! anything else); a non-empty directory without the mark is refused, never cleared, whatever
//! else it holds: a user's `results.json` or `checkpoint/run-settings.json` look like a run's
//! files, and only the mark tells them apart. What a fresh run then clears there is only what
//! runs write: the checkpoint records and the metric logs' epoch folders (see
//! [`super::resume::begin_run`]). The run's own inputs must not lie where runs write, nor may
//! the directory lie inside an image folder it trains on. Nothing is written or cleared
//! through a symbolic link: a directory where an entry a run writes is one is refused, and so
//! is an `export/` folder that is one. One run at a time: the run holds [`super::LOCK_FILE`]'s
//! lock while it writes, and only a process that provably holds that very file is named as the
//! run's. A run refused before it wrote anything leaves a directory it took as it found it:
//! absent, or empty ([`RunDir::withdraw`]).

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{ErrorKind, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Claimed, EXPORT_DIR, LOCK_FILE, MARKER_FILE, RUN_FILES, RUN_FOLDERS, RunDir};
use crate::atomic_file::write_atomically;
use crate::train::TrainError;

/// What the marker says to someone who opens it.
const MARKER_TEXT: &str = "This directory holds the artifacts of a cubenet run. A new run here \
                           replaces them: its checkpoints, metric logs, model and plots.\n";
impl RunDir {
    /// Takes `root` as the artifact directory of a run reading `inputs` (its data files and
    /// folders): creates it if absent, refuses it if it holds files but no cubenet run, a
    /// symbolic link where a run writes, or an input where runs write, or if another run
    /// holds it; then marks and locks it. Taking a directory again once it is released
    /// (every clone of the claimed handle dropped) is harmless.
    pub fn claim(root: impl Into<PathBuf>, inputs: &[&Path]) -> Result<Self, TrainError> {
        let mut run_dir = RunDir::open(root);
        run_dir.claimed = claim(&run_dir, inputs)?;
        run_dir.lock = Some(Arc::new(lock(&run_dir)?));
        run_dir.inputs = inputs.iter().map(|input| input.to_path_buf()).collect();
        Ok(run_dir)
    }

    /// Undoes the claim of a run that was refused before it wrote anything: when the claim
    /// created the directory, or marked an empty one, and it still holds only the mark and
    /// the lock file, removes them, and the directory and the folders above it that the claim
    /// created. Anything else is left as it is, and so is an earlier run's directory.
    pub fn withdraw(&self) {
        let topmost = match &self.claimed {
            Claimed::Nothing => return,
            Claimed::Marked => None,
            Claimed::Created { topmost } => Some(topmost),
        };
        let Ok(entries) = fs::read_dir(&self.root) else {
            return;
        };
        let only_claimed = entries.into_iter().all(|entry| {
            entry.is_ok_and(|entry| {
                let name = entry.file_name();
                name.to_str()
                    .is_some_and(|name| [MARKER_FILE, LOCK_FILE].contains(&name))
            })
        });
        if !only_claimed {
            return;
        }
        let _ = fs::remove_file(self.lock_file());
        let _ = fs::remove_file(self.marker());
        let Some(topmost) = topmost else {
            return;
        };
        let mut folder = Some(self.root.as_path());
        while let Some(dir) = folder {
            if fs::remove_dir(dir).is_err() || dir == topmost.as_path() {
                break;
            }
            folder = dir.parent();
        }
    }

    /// The folder `cubenet export` writes by default, refused like a run's own folders when
    /// it, or anything in it, is a symbolic link: an export replaces files there.
    pub fn export_folder(&self) -> Result<PathBuf, TrainError> {
        let folder = self.export();
        if let Some(link) = first_link([folder.clone()]).map_err(TrainError::read(&folder))? {
            return Err(TrainError::ArtifactDir {
                dir: self.root.clone(),
                reason: link_refusal(&link),
            });
        }
        Ok(folder)
    }
}

impl RunDir {
    /// Whether a process holds the directory's lock: a run is writing there. It tries a
    /// shared lock for an instant, so a run that claims the directory in that instant is
    /// told another holds it.
    /// A symbolic link to another run's lock file does not count: it would report that run
    /// as this one's.
    pub fn is_running(&self) -> bool {
        let path = self.lock_file();
        own_file(&path)
            && File::open(&path)
                .is_ok_and(|file| matches!(file.try_lock_shared(), Err(TryLockError::WouldBlock)))
    }

    /// The process id the lock's holder wrote, while a run holds it, when that process
    /// provably has this very lock file open (where the system shows a process's open files,
    /// as Linux's `/proc` does): a lock file, or a hard link to another run's, may name any
    /// process, and this is the process the studio's Stop signals.
    pub fn holder(&self) -> Option<u32> {
        let path = self.lock_file();
        let pid = fs::read_to_string(&path).ok()?.trim().parse().ok()?;
        (self.is_running() && holds_open(pid, &path)).then_some(pid)
    }

    /// When a process last claimed the directory: the lock file is rewritten at each claim.
    pub fn last_claimed(&self) -> Option<std::time::SystemTime> {
        fs::symlink_metadata(self.lock_file()).ok()?.modified().ok()
    }
}

/// Whether `path` is a regular file, not a symbolic link (to another run's lock file).
fn own_file(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|meta| meta.is_file())
}

/// Whether process `pid` has the file at `path` open.
#[cfg(target_os = "linux")]
fn holds_open(pid: u32, path: &Path) -> bool {
    let (Ok(path), Ok(open_files)) = (
        fs::canonicalize(path),
        fs::read_dir(format!("/proc/{pid}/fd")),
    ) else {
        return false;
    };
    open_files
        .filter_map(Result::ok)
        .any(|fd| fs::read_link(fd.path()).is_ok_and(|target| target == path))
}

/// Elsewhere a process's open files are not shown; the lock's holder is taken at its word.
#[cfg(not(target_os = "linux"))]
fn holds_open(_: u32, _: &Path) -> bool {
    true
}

/// Checks `run_dir` for a run reading `inputs`, creating it if absent; then marks it. Returns
/// what it added.
fn claim(run_dir: &RunDir, inputs: &[&Path]) -> Result<Claimed, TrainError> {
    let dir = run_dir.root();
    let refuse = |reason: String| TrainError::ArtifactDir {
        dir: dir.to_path_buf(),
        reason,
    };
    // Checked before anything is created, so that a refused directory leaves no trace.
    let artifacts = resolved(dir).map_err(TrainError::read(dir))?;
    for input in inputs {
        // A missing input is the data reader's to report, with its own message.
        let Ok(input_path) = fs::canonicalize(input) else {
            continue;
        };
        if let Some(reason) = overlap(&artifacts, &input_path) {
            return Err(refuse(format!("{} {reason}", input.display())));
        }
    }
    let mut created = None;
    match fs::metadata(dir) {
        Ok(meta) if !meta.is_dir() => return Err(refuse("it is a file, not a directory".into())),
        Ok(_) if !run_dir.marker().is_file() => {
            if run_dir.checkpoints().is_run() {
                return Err(refuse(format!(
                    "it holds checkpoints but not the mark `{MARKER_FILE}` that makes a folder a \
                     cubenet run's; if an older cubenet wrote them, create an empty \
                     `{MARKER_FILE}` file there to continue or replace that run, else choose a \
                     new or empty directory"
                )));
            }
            let mut entries = fs::read_dir(dir).map_err(TrainError::read(dir))?;
            if let Some(entry) = entries.next() {
                let name = entry.map_err(TrainError::read(dir))?.file_name();
                return Err(refuse(format!(
                    "it holds files that no cubenet run wrote (`{}` …), and cubenet never \
                     replaces those: choose a new or empty directory",
                    name.to_string_lossy()
                )));
            }
        }
        Ok(_) => {
            let run_entries = RUN_FILES
                .iter()
                .chain(&RUN_FOLDERS)
                .map(|name| dir.join(name));
            if let Some(link) = first_link(run_entries).map_err(TrainError::read(dir))? {
                return Err(refuse(link_refusal(&link)));
            }
        }
        Err(e) if e.kind() == ErrorKind::NotFound => {
            let topmost = topmost_missing(dir);
            fs::create_dir_all(dir).map_err(TrainError::io(dir))?;
            created = Some(topmost);
        }
        Err(e) => return Err(TrainError::read(dir)(e)),
    }
    let marker = run_dir.marker();
    if marker.is_file() {
        return Ok(Claimed::Nothing);
    }
    write_atomically(&marker, MARKER_TEXT.as_bytes())?;
    Ok(match created {
        Some(topmost) => Claimed::Created { topmost },
        None => Claimed::Marked,
    })
}

/// The outermost folder on the way to the missing `path` that does not exist yet, named as
/// `path` names it.
fn topmost_missing(path: &Path) -> PathBuf {
    let mut topmost = path;
    let missing = |parent: &&Path| !parent.as_os_str().is_empty() && !parent.exists();
    while let Some(parent) = topmost.parent().filter(missing) {
        topmost = parent;
    }
    topmost.to_path_buf()
}

fn link_refusal(link: &Path) -> String {
    format!(
        "{} is a symbolic link, and cubenet never writes or deletes through a link it did not \
         make: remove the link, or choose another directory",
        link.display()
    )
}

/// The first symbolic link among `entries` (of a run directory: those that runs or exports
/// write, clear or fill), looking inside the folders without following links.
fn first_link(entries: impl IntoIterator<Item = PathBuf>) -> std::io::Result<Option<PathBuf>> {
    let mut pending: Vec<PathBuf> = entries.into_iter().collect();
    while let Some(path) = pending.pop() {
        let meta = match fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if meta.file_type().is_symlink() {
            return Ok(Some(path));
        }
        if meta.is_dir() {
            for entry in fs::read_dir(&path)? {
                pending.push(entry?.path());
            }
        }
    }
    Ok(None)
}

/// The lock on `run_dir`'s [`super::LOCK_FILE`], which then names this process; refused,
/// with the process that holds it, while another run has it.
fn lock(run_dir: &RunDir) -> Result<File, TrainError> {
    let path = run_dir.lock_file();
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(TrainError::io(&path))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = match holder.trim() {
                "" => "another process".to_string(),
                pid => format!("process {pid}"),
            };
            return Err(TrainError::ArtifactDir {
                dir: run_dir.root().to_path_buf(),
                reason: format!(
                    "another cubenet run ({holder}) is writing there; wait for it to end, or \
                     choose another directory"
                ),
            });
        }
        Err(TryLockError::Error(e)) => return Err(TrainError::io(&path)(e)),
    }
    file.set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| writeln!(file, "{}", std::process::id()))
        .map_err(TrainError::io(&path))?;
    Ok(file)
}

/// `path` made absolute with its existing part's links resolved, as
/// [`fs::canonicalize`] gives it for a path that exists.
fn resolved(path: &Path) -> std::io::Result<PathBuf> {
    let absolute = std::path::absolute(path)?;
    let mut existing = absolute.as_path();
    let mut missing = Vec::new();
    while !existing.exists() {
        let (Some(name), Some(parent)) = (existing.file_name(), existing.parent()) else {
            break;
        };
        missing.push(name);
        existing = parent;
    }
    let mut resolved = fs::canonicalize(existing)?;
    resolved.extend(missing.iter().rev());
    Ok(resolved)
}

/// Why the input at `input` may not be read by a run writing into `artifacts` (both
/// canonical), if it may not.
fn overlap(artifacts: &Path, input: &Path) -> Option<String> {
    if artifacts.starts_with(input) && input.is_dir() {
        return Some(
            "holds the artifact directory, whose files would be read as data: keep the \
             artifacts outside the data folder"
                .into(),
        );
    }
    let inside = input.strip_prefix(artifacts).ok()?;
    let mut parts = inside.components();
    let first = parts.next()?.as_os_str().to_string_lossy();
    // A file beside the run's files, or anything in the folders runs write; a folder of
    // its own is the user's.
    let beside_run_files = parts.next().is_none() && !input.is_dir();
    let written_here =
        beside_run_files || RUN_FOLDERS.contains(&first.as_ref()) || first == EXPORT_DIR;
    written_here.then(|| {
        format!(
            "lies where runs write in the artifact directory ({}): move the data into a \
             folder of its own, or choose another artifact directory",
            PathBuf::from(first.as_ref()).display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(dir: &Path, inputs: &[&Path]) -> String {
        RunDir::claim(dir, inputs).unwrap_err().to_string()
    }

    #[test]
    fn new_empty_and_marked_directories_are_taken_others_refused() {
        let root = tempfile::tempdir().unwrap();
        let new = root.path().join("a/b");
        RunDir::claim(&new, &[]).unwrap();
        assert!(new.join(MARKER_FILE).is_file());
        fs::write(new.join("model.mpk"), b"x").unwrap();
        RunDir::claim(&new, &[]).unwrap();

        let empty = root.path().join("empty");
        fs::create_dir(&empty).unwrap();
        RunDir::claim(&empty, &[]).unwrap();

        let users = root.path().join("photos");
        fs::create_dir(&users).unwrap();
        fs::write(users.join("cat.png"), b"x").unwrap();
        let message = refusal(&users, &[]);
        assert!(
            message.contains("photos") && message.contains("`cat.png`"),
            "{message}"
        );
        assert!(!users.join(MARKER_FILE).exists());

        let file = root.path().join("file");
        fs::write(&file, b"x").unwrap();
        assert!(refusal(&file, &[]).contains("it is a file, not a directory"));
    }

    #[test]
    fn inputs_where_runs_write_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("run");
        for folder in ["train/cat", "data/train", "checkpoint"] {
            fs::create_dir_all(dir.join(folder)).unwrap();
        }
        fs::write(dir.join("table.csv"), b"x").unwrap();
        fs::write(dir.join(MARKER_FILE), MARKER_TEXT).unwrap();
        fs::create_dir_all(dir.join("photos/cat")).unwrap();
        RunDir::claim(
            &dir,
            &[
                &dir.join("data/train"),
                &dir.join("photos"),
                &root.path().join("none"),
            ],
        )
        .unwrap();
        for input in ["train", "train/cat", "table.csv", "checkpoint"] {
            let message = refusal(&dir, &[&dir.join(input)]);
            assert!(
                message.contains("lies where runs write"),
                "{input}: {message}"
            );
        }
        let message = refusal(&dir, &[root.path()]);
        assert!(
            message.contains("holds the artifact directory"),
            "{message}"
        );
        // Refused before it is created: nothing is left in the data folder.
        let inside_data = dir.join("data/train/run");
        let message = refusal(&inside_data, &[&dir.join("data/train")]);
        assert!(
            message.contains("holds the artifact directory"),
            "{message}"
        );
        assert!(!inside_data.exists());
    }

    #[cfg(unix)]
    #[test]
    fn a_link_where_runs_write_is_refused_and_nothing_behind_it_touched() {
        let root = tempfile::tempdir().unwrap();
        let elsewhere = root.path().join("elsewhere");
        fs::create_dir_all(elsewhere.join("epoch-1")).unwrap();
        fs::write(elsewhere.join("model-1.mpk"), b"kept").unwrap();
        for link in ["checkpoint", "train", "cache", "model.mpk", "valid/epoch-1"] {
            let dir = root.path().join(format!("run-{}", link.replace('/', "-")));
            RunDir::claim(&dir, &[]).unwrap();
            let at = dir.join(link);
            fs::create_dir_all(at.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(&elsewhere, &at).unwrap();
            let message = refusal(&dir, &[]);
            assert!(message.contains("is a symbolic link"), "{link}: {message}");
            assert!(message.contains(link), "{link}: {message}");
        }
        assert_eq!(fs::read(elsewhere.join("model-1.mpk")).unwrap(), b"kept");
        assert!(elsewhere.join("epoch-1").is_dir());
    }

    #[test]
    fn a_claimed_directory_is_refused_to_a_second_run_until_released() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("run");
        let first = RunDir::claim(&dir, &[]).unwrap();
        let held = first.clone();
        drop(first);
        let message = refusal(&dir, &[]);
        let pid = std::process::id().to_string();
        assert!(
            message.contains("another cubenet run") && message.contains(&pid),
            "{message}"
        );
        drop(held);
        RunDir::claim(&dir, &[]).unwrap();
    }
}
