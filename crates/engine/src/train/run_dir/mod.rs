//! The artifact directory of a run, and everything in it. [`RunDir`] is its one owner: a run
//! claims its directory once ([`RunDir::claim`]), and every path that cubenet writes or reads
//! there is named by one of its methods, so that the layout is written down in one place.
//!
//! ```text
//! <artifact_dir>/
//!   .cubenet-run            the mark that makes the folder a cubenet run's (claim.rs)
//!   .cubenet-lock           held by the run writing here, with its process id (claim.rs)
//!   run.toml                the resolved run file
//!   config.json             the model's settings (and, for tables, the task's)
//!   preprocessing.json      tables: the feature standardization
//!   model.mpk               the trained model
//!   curves.png, confusion-matrix.png, per-class-accuracy.csv
//!   experiment.log          burn-train's application log
//!   checkpoint/             per-epoch records and the run's settings (checkpoints.rs)
//!   train/, valid/          burn-train's metric logs, an `epoch-<k>` folder per epoch
//!   tensorboard/            the same metrics and the run's settings as TensorBoard events
//!   cache/                  decoded images
//!   export/                 what `cubenet export` writes (claim.rs: never through a link)
//! ```

pub(crate) mod artifacts;
pub(crate) mod checkpoints;
mod claim;
pub(crate) mod confusion;
pub(crate) mod data_identity;
mod event_file;
pub(crate) mod metric_logs;
pub(crate) mod record_frame;
pub(crate) mod recorder;
pub(crate) mod resume;
pub(crate) mod tensorboard;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use checkpoints::Checkpoints;

/// Marks a directory as holding a cubenet run's artifacts.
pub const MARKER_FILE: &str = ".cubenet-run";
/// Locked by the process that runs in the directory, and names it.
const LOCK_FILE: &str = ".cubenet-lock";
/// The resolved run file, from which `eval` and `predict` rebuild the network and its data.
pub const RUN_FILE: &str = "run.toml";
/// The model's settings.
pub const CONFIG_FILE: &str = "config.json";
/// A tabular run's feature standardization.
pub const PREPROCESSING_FILE: &str = "preprocessing.json";
/// The final model record.
pub const MODEL_FILE: &str = "model.mpk";
/// The loss and accuracy figure.
pub const CURVES_FILE: &str = "curves.png";
/// The test split's confusion matrix.
pub const CONFUSION_MATRIX_FILE: &str = "confusion-matrix.png";
/// The test split's accuracy per class.
pub const PER_CLASS_ACCURACY_FILE: &str = "per-class-accuracy.csv";
/// burn-train's application log.
const EXPERIMENT_LOG: &str = "experiment.log";
/// The checkpoints (burn-train's name).
pub const CHECKPOINT_DIR: &str = "checkpoint";
/// burn-train's metric logs, one folder a split.
const METRIC_LOG_DIRS: [&str; 2] = ["train", "valid"];
/// TensorBoard's event files (tensorboard.rs).
const TENSORBOARD_DIR: &str = "tensorboard";
/// The prefix of a metric log's folder for one epoch, `epoch-<k>`.
const EPOCH_PREFIX: &str = "epoch-";
/// Decoded images, kept between runs.
pub const IMAGE_CACHE_DIR: &str = "cache";
/// What `cubenet export` writes by default.
pub const EXPORT_DIR: &str = "export";
/// The entries that runs clear or fill, where a run's own inputs may not lie.
const RUN_FOLDERS: [&str; 5] = [
    METRIC_LOG_DIRS[0],
    METRIC_LOG_DIRS[1],
    TENSORBOARD_DIR,
    CHECKPOINT_DIR,
    IMAGE_CACHE_DIR,
];
/// The files a run writes at the top of its directory.
const RUN_FILES: [&str; 10] = [
    MARKER_FILE,
    LOCK_FILE,
    RUN_FILE,
    CONFIG_FILE,
    PREPROCESSING_FILE,
    MODEL_FILE,
    CURVES_FILE,
    CONFUSION_MATRIX_FILE,
    PER_CLASS_ACCURACY_FILE,
    EXPERIMENT_LOG,
];

/// A run's artifact directory: claimed for a run that writes there ([`RunDir::claim`]), or
/// opened to read a finished one ([`RunDir::open`]). A claimed one holds the directory's
/// lock until its last clone is dropped.
#[derive(Debug, Clone)]
pub struct RunDir {
    root: PathBuf,
    lock: Option<Arc<File>>,
    /// The data files and folders of the run that claimed it, whose identity is saved with
    /// its settings.
    inputs: Vec<PathBuf>,
    /// What the claim added, which [`RunDir::withdraw`] may take back.
    claimed: Claimed,
}

/// What claiming a directory added to the file system.
#[derive(Debug, Clone, Default)]
enum Claimed {
    /// Nothing: the directory was an earlier run's, or is only being read.
    #[default]
    Nothing,
    /// The mark (and the lock file) in a directory that was empty.
    Marked,
    /// The directory itself, and the folders above it from `topmost` down.
    Created { topmost: PathBuf },
}

/// Two handles are equal when they name the same directory, locked or not.
impl PartialEq for RunDir {
    fn eq(&self, other: &Self) -> bool {
        self.root == other.root
    }
}

impl Eq for RunDir {}

impl RunDir {
    /// A finished run's directory, to read from; nothing is checked, created or locked.
    pub fn open(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            lock: None,
            inputs: Vec::new(),
            claimed: Claimed::Nothing,
        }
    }

    /// The directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The data files and folders the run reads, as [`RunDir::claim`] was given them.
    pub fn inputs(&self) -> &[PathBuf] {
        &self.inputs
    }

    pub fn marker(&self) -> PathBuf {
        self.root.join(MARKER_FILE)
    }

    fn lock_file(&self) -> PathBuf {
        self.root.join(LOCK_FILE)
    }

    pub fn run_file(&self) -> PathBuf {
        self.root.join(RUN_FILE)
    }

    pub fn config(&self) -> PathBuf {
        self.root.join(CONFIG_FILE)
    }

    pub fn preprocessing(&self) -> PathBuf {
        self.root.join(PREPROCESSING_FILE)
    }

    pub fn model(&self) -> PathBuf {
        self.root.join(MODEL_FILE)
    }

    pub fn curves(&self) -> PathBuf {
        self.root.join(CURVES_FILE)
    }

    pub fn confusion_matrix(&self) -> PathBuf {
        self.root.join(CONFUSION_MATRIX_FILE)
    }

    pub fn per_class_accuracy(&self) -> PathBuf {
        self.root.join(PER_CLASS_ACCURACY_FILE)
    }

    pub fn experiment_log(&self) -> PathBuf {
        self.root.join(EXPERIMENT_LOG)
    }

    pub fn tensorboard(&self) -> PathBuf {
        self.root.join(TENSORBOARD_DIR)
    }

    pub fn image_cache(&self) -> PathBuf {
        self.root.join(IMAGE_CACHE_DIR)
    }

    pub fn export(&self) -> PathBuf {
        self.root.join(EXPORT_DIR)
    }

    /// The checkpoint folder and its records.
    pub(crate) fn checkpoints(&self) -> Checkpoints {
        Checkpoints::in_dir(self.root.join(CHECKPOINT_DIR))
    }

    /// The training and validation metric logs' folders.
    pub fn metric_log_dirs(&self) -> impl Iterator<Item = PathBuf> + '_ {
        METRIC_LOG_DIRS.iter().map(|split| self.root.join(split))
    }

    /// burn-train's folder for the logs of `epoch` of the split whose folder is `split_dir`.
    pub fn epoch_logs(split_dir: &Path, epoch: usize) -> PathBuf {
        split_dir.join(format!("{EPOCH_PREFIX}{epoch}"))
    }

    /// The epoch whose logs a folder named `name` holds, if it is one ([`RunDir::epoch_logs`]'s
    /// inverse).
    pub fn logged_epoch(name: &str) -> Option<usize> {
        name.strip_prefix(EPOCH_PREFIX)?.parse().ok()
    }
}
