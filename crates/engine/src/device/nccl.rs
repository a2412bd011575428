//! Where NCCL, the collective-communication library data-parallel training on several CUDA
//! GPUs sums its gradients with, lives on this machine.
//!
//! cubenet does not link NCCL: a build must run where it is missing (one GPU, the CPU),
//! so it is looked for and loaded at run time, the way cudarc loads the CUDA libraries.
//! It is usually a system library (Debian's `libnccl2`), on `LD_LIBRARY_PATH`, or inside a
//! Python environment that installed PyTorch (the `nvidia-nccl-cu*` wheel's
//! `nvidia/nccl/lib`).

use std::ffi::{OsString, c_int};
use std::fmt;
use std::path::{Path, PathBuf};

/// The file name NCCL 2 is loaded by.
pub const LIBRARY: &str = "libnccl.so.2";

/// Directories the system's loader searches without configuration, in its order.
const SYSTEM_DIRS: [&str; 6] = [
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
    "/usr/local/cuda/lib64",
];

/// Directories below a Python environment's prefix (or a user's home) whose `python3.*`
/// entries hold packages.
const PYTHON_LIB_DIRS: [&str; 2] = ["lib", ".local/lib"];
/// Where the NCCL wheel puts the library inside a package directory.
const WHEEL_LIB_DIR: &str = "nvidia/nccl/lib";

/// NCCL could not be used.
#[derive(Debug, thiserror::Error)]
pub enum NcclError {
    #[error(
        "NCCL ({LIBRARY}) was not found on LD_LIBRARY_PATH, in the system library directories \
         or in a Python environment's {WHEEL_LIB_DIR}; install it (`apt-get install libnccl2`, \
         or `pip install nvidia-nccl-cu12`) or put the directory holding it on LD_LIBRARY_PATH"
    )]
    NotFound,
    #[error("{path} could not be loaded as NCCL: {reason}")]
    Unloadable { path: PathBuf, reason: String },
}

/// An NCCL library that loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nccl {
    pub path: PathBuf,
    pub version: NcclVersion,
}

/// NCCL's version, from `ncclGetVersion`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NcclVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl NcclVersion {
    /// Decodes `ncclGetVersion`'s code: major · 10000 + minor · 100 + patch since NCCL 2.9,
    /// major · 1000 + minor · 100 + patch before.
    pub fn from_code(code: u32) -> Self {
        let major_unit = if code >= 20_900 { 10_000 } else { 1_000 };
        NcclVersion {
            major: code / major_unit,
            minor: code % major_unit / 100,
            patch: code % 100,
        }
    }
}

impl fmt::Display for NcclVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Finds NCCL where it usually lives (see [`search_dirs`]) and loads it to read its version.
pub fn locate() -> Result<Nccl, NcclError> {
    load_first(&search_dirs(|name| std::env::var_os(name)))
}

/// The directories to look in, in order: `LD_LIBRARY_PATH`'s, the system's, then the
/// active Python environment's (`VIRTUAL_ENV`, `CONDA_PREFIX`), the user's (`HOME`) and the
/// system's Python packages. `env` reads an environment variable.
fn search_dirs(env: impl Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = env("LD_LIBRARY_PATH")
        .map(|paths| std::env::split_paths(&paths).collect())
        .unwrap_or_default();
    dirs.extend(SYSTEM_DIRS.iter().map(PathBuf::from));
    let mut prefixes: Vec<PathBuf> = ["VIRTUAL_ENV", "CONDA_PREFIX", "HOME"]
        .into_iter()
        .filter_map(|name| env(name).map(PathBuf::from))
        .collect();
    prefixes.extend(["/usr/local", "/usr"].map(PathBuf::from));
    if let Some(conda) = env("CONDA_PREFIX") {
        // Conda's NCCL package installs into the environment's own lib.
        dirs.push(Path::new(&conda).join("lib"));
    }
    for prefix in prefixes {
        for lib in PYTHON_LIB_DIRS {
            for python in python_dirs(&prefix.join(lib)) {
                for packages in ["site-packages", "dist-packages"] {
                    dirs.push(python.join(packages).join(WHEEL_LIB_DIR));
                }
            }
        }
    }
    dirs
}

/// The `python3*` directories in `dir` (none if it cannot be read), sorted.
fn python_dirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut pythons: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|entry| {
            entry
                .file_name()
                .to_str()
                .is_some_and(|name| name.starts_with("python3"))
        })
        .map(|entry| entry.path())
        .collect();
    pythons.sort();
    pythons
}

/// Loads the first [`LIBRARY`] found in `dirs`.
fn load_first(dirs: &[PathBuf]) -> Result<Nccl, NcclError> {
    let path = dirs
        .iter()
        .map(|dir| dir.join(LIBRARY))
        .find(|path| path.is_file())
        .ok_or(NcclError::NotFound)?;
    let version = read_version(&path).map_err(|reason| NcclError::Unloadable {
        path: path.clone(),
        reason,
    })?;
    Ok(Nccl { path, version })
}

/// Loads the library at `path` and asks it for its version.
fn read_version(path: &Path) -> Result<NcclVersion, String> {
    /// `ncclResult_t ncclGetVersion(int *version)`; 0 is `ncclSuccess`.
    type GetVersion = unsafe extern "C" fn(*mut c_int) -> c_int;

    // SAFETY: loading runs the library's initializers; NCCL's only set up its own state.
    let library = unsafe { libloading::Library::new(path) }.map_err(|error| error.to_string())?;
    // SAFETY: the symbol, if present, has NCCL's documented signature.
    let get_version = unsafe { library.get::<GetVersion>(b"ncclGetVersion\0") }
        .map_err(|_| "it has no ncclGetVersion".to_string())?;
    let mut code: c_int = 0;
    // SAFETY: ncclGetVersion writes one int through the pointer it is given.
    let status = unsafe { get_version(&mut code) };
    match u32::try_from(code) {
        Ok(code) if status == 0 => Ok(NcclVersion::from_code(code)),
        _ => Err(format!(
            "ncclGetVersion returned status {status}, version {code}"
        )),
    }
}

/// One line for `cubenet info`: the version and path, or why NCCL cannot be used.
pub fn status_line(found: &Result<Nccl, NcclError>) -> String {
    match found {
        Ok(nccl) => format!("{} at {}", nccl.version, nccl.path.display()),
        Err(error) => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_decode_both_schemes() {
        assert_eq!(NcclVersion::from_code(22_803).to_string(), "2.28.3");
        assert_eq!(NcclVersion::from_code(21_805).to_string(), "2.18.5");
        assert_eq!(NcclVersion::from_code(2_804).to_string(), "2.8.4");
    }

    #[test]
    fn search_starts_with_ld_library_path_and_reaches_python_environments() {
        let venv = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(venv.path().join("lib/python3.12")).unwrap();
        let env = |name: &str| match name {
            "LD_LIBRARY_PATH" => Some(OsString::from("/opt/a:/opt/b")),
            "VIRTUAL_ENV" => Some(venv.path().as_os_str().to_owned()),
            _ => None,
        };
        let dirs = search_dirs(env);
        assert_eq!(
            dirs[..2],
            [PathBuf::from("/opt/a"), PathBuf::from("/opt/b")]
        );
        assert_eq!(dirs[2], PathBuf::from(SYSTEM_DIRS[0]));
        let wheel = venv
            .path()
            .join("lib/python3.12/site-packages/nvidia/nccl/lib");
        assert!(dirs.contains(&wheel), "{wheel:?} not in {dirs:?}");
    }

    #[test]
    fn missing_and_unloadable_libraries_are_one_line_errors() {
        let empty = tempfile::tempdir().unwrap();
        let error = load_first(&[empty.path().to_path_buf()]).unwrap_err();
        assert!(matches!(error, NcclError::NotFound));
        assert!(error.to_string().contains("apt-get install libnccl2"));

        // A file of that name that is not a library, then a real library that is not NCCL.
        let fake = tempfile::tempdir().unwrap();
        std::fs::write(fake.path().join(LIBRARY), b"not a library").unwrap();
        let error = load_first(&[empty.path().into(), fake.path().into()]).unwrap_err();
        let NcclError::Unloadable { path, .. } = &error else {
            panic!("expected Unloadable, got {error}");
        };
        assert_eq!(path, &fake.path().join(LIBRARY));
        assert!(!error.to_string().contains('\n'), "{error}");

        let libm = [
            "/lib/x86_64-linux-gnu/libm.so.6",
            "/lib/aarch64-linux-gnu/libm.so.6",
            "/lib64/libm.so.6",
        ]
        .into_iter()
        .map(Path::new)
        .find(|path| path.is_file())
        .expect("the C math library, present on every glibc system");
        let other = tempfile::tempdir().unwrap();
        std::fs::copy(libm, other.path().join(LIBRARY)).unwrap();
        let error = load_first(&[other.path().into()]).unwrap_err();
        assert!(
            error.to_string().ends_with("it has no ncclGetVersion"),
            "{error}"
        );
    }
}
