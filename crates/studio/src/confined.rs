//! Reading a run's files without leaving its folder: a name resolves to a file only when
//! it is one path component, and a file or folder is read only when it is not a symbolic
//! link (on Unix, the opened file must also be the one looked at, so that a link swapped in
//! between is refused), so a link planted in a run folder never leads the studio outside it.

use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

/// The most bytes the studio reads of one file: metric logs of long runs stay far below it.
const MAX_FILE_BYTES: u64 = 64 << 20;

/// `dir/name` when `name` is a single ordinary path component that does not start with a
/// dot (so neither `..`, an absolute path, a separator nor a hidden entry).
pub fn child(dir: &Path, name: &str) -> Option<PathBuf> {
    let mut components = Path::new(name).components();
    match (components.next(), components.next()) {
        (Some(Component::Normal(part)), None)
            if part == OsStr::new(name) && !name.starts_with('.') =>
        {
            Some(dir.join(name))
        }
        _ => None,
    }
}

/// Whether `path` is a folder itself, not a link to one.
pub fn is_real_dir(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|meta| meta.is_dir())
}

/// Whether `path` is a regular file itself, not a link to one.
pub fn is_real_file(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|meta| meta.is_file())
}

/// The bytes of the regular file at `path`; a link, a folder or a file over
/// [`MAX_FILE_BYTES`] is an error.
pub fn read(path: &Path) -> io::Result<Vec<u8>> {
    let looked_at = fs::symlink_metadata(path)?;
    if !looked_at.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let file = File::open(path)?;
    let opened = file.metadata()?;
    if !same_file(&looked_at, &opened) || opened.len() > MAX_FILE_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "changed while read, or too large",
        ));
    }
    let mut bytes = Vec::with_capacity(opened.len() as usize);
    file.take(MAX_FILE_BYTES).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The text of the regular file at `path` (see [`read`]), invalid UTF-8 replaced.
pub fn read_text(path: &Path) -> io::Result<String> {
    read(path).map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
}

/// The names of the entries of the folder at `path` (not a link), sorted.
pub fn entries(path: &Path) -> Vec<String> {
    if !is_real_dir(path) {
        return Vec::new();
    }
    let mut names: Vec<String> = fs::read_dir(path)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str().map(str::to_string))
        .collect();
    names.sort();
    names
}

#[cfg(unix)]
fn same_file(a: &fs::Metadata, b: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

#[cfg(not(unix))]
fn same_file(a: &fs::Metadata, b: &fs::Metadata) -> bool {
    a.len() == b.len() && a.modified().ok() == b.modified().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_one_ordinary_component_names_a_child() {
        let dir = Path::new("/runs");
        assert_eq!(child(dir, "lenet"), Some(PathBuf::from("/runs/lenet")));
        for name in [
            "", ".", "..", "../x", "a/b", "/etc", "lenet/", ".hidden", "a/../b",
        ] {
            assert_eq!(child(dir, name), None, "{name:?}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn links_are_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("folder")).unwrap();
        fs::write(dir.path().join("real"), "r").unwrap();
        assert!(read(&dir.path().join("link")).is_err());
        assert!(entries(&dir.path().join("folder")).is_empty());
        assert!(!is_real_dir(&dir.path().join("folder")));
        assert_eq!(read_text(&dir.path().join("real")).unwrap(), "r");
    }
}
