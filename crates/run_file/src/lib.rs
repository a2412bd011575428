//! The `cubenet` run file: one TOML schema for image (MNIST) and tabular (CSV or generated)
//! runs, with sections `[data]`, `[model]`, `[optimizer]`, `[training]` and the top-level
//! `backend` and `artifact_dir`. Unknown keys are refused, naming the key. A file states
//! only what differs from the defaults; [`RunConfig::resolve`] fills in the rest (what
//! `cubenet train --print-config` prints) and turns it into the run's own settings. The
//! defaults are those of the settings' own configs ([`ImageTrainingConfig`],
//! [`TabularConfig`], [`SimpleCnnConfig`], [`LeNetConfig`]), read from them here; only the
//! settings that exist in run files alone (`artifact_dir`, a generated table's `rows` and
//! `seed`) have their defaults in this file.
//!
//! ```toml
//! backend = "ndarray"
//! artifact_dir = "artifacts/quadrants"
//! [data]
//! kind = "generated"
//! generator = "quadrants"
//! [model]
//! kind = "mlp"
//! task = "binary"
//! hidden = [16, 16]
//! activation = "tanh"
//! [optimizer]
//! kind = "sgd"
//! learning_rate = 0.05
//! momentum = 0.9
//! [training]
//! epochs = 100
//! batch_size = 32
//! ```

mod flags;
mod home_paths;
mod overrides;
mod resolve;
mod sections;

pub use flags::RunFlags;
pub use resolve::{Job, RunReport};
pub use sections::{DataSection, ImageOptions, ModelSection, TableSection, TrainingSection};

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use cubenet_engine::device::BackendKind;
use cubenet_engine::train::tabular::OptimizerConfig;
use cubenet_engine::train::{Run, RunDir, RunError};

use overrides::{blame_override, parse_value, set};
use sections::*;

/// The largest run file read: parsing TOML takes several times a file's size, and a run
/// file is settings, never data.
const MAX_RUN_FILE_BYTES: u64 = 1 << 20;

/// A run file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {}{message}", path.display(), key.as_ref().map(|k| format!("`{k}`: ")).unwrap_or_default())]
    Parse {
        path: PathBuf,
        /// The key the message is about, where known.
        key: Option<String>,
        message: String,
    },
    #[error("`--set {0}` is not KEY=VALUE (e.g. training.epochs=5)")]
    Override(String),
    #[error("`--set {assignment}`: {message}")]
    BadOverride { assignment: String, message: String },
    #[error("{0}")]
    Invalid(String),
}

/// Everything a `cubenet train` run is, as written in a run file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// `ndarray`, `cuda` or `wgpu` [default: cuda when compiled in, else ndarray].
    pub backend: Option<BackendKind>,
    /// Where the config, model, checkpoints, metric logs and curves go.
    #[serde(default = "default_artifact_dir")]
    pub artifact_dir: PathBuf,
    pub data: DataSection,
    #[serde(default)]
    pub model: ModelSection,
    /// [default: Adam at the learning rate of [`ImageTrainingConfig`] for images, the
    /// optimizer of [`TabularConfig`] for tables]
    pub optimizer: Option<OptimizerConfig>,
    #[serde(default)]
    pub training: TrainingSection,
}

fn default_artifact_dir() -> PathBuf {
    PathBuf::from("artifacts/run")
}

/// Why a run file's run failed: the file, or the run.
#[derive(Debug, thiserror::Error)]
pub enum RunFileError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Run(#[from] RunError),
}

impl RunConfig {
    /// Parses a run file's text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        Self::from_value(parse_value(text, path)?, path)
    }

    /// Reads a run file, applying `overrides` (`section.key=value`, the value in TOML
    /// syntax or a bare string) on top of it.
    pub fn load(path: &Path, overrides: &[String]) -> Result<Self, ConfigError> {
        let read_error = |source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        };
        let bytes = std::fs::metadata(path).map_err(read_error)?.len();
        if bytes > MAX_RUN_FILE_BYTES {
            return Err(ConfigError::Parse {
                path: path.to_path_buf(),
                key: None,
                message: format!(
                    "it is {bytes} bytes; a run file is a few lines of settings (at most \
                     {MAX_RUN_FILE_BYTES} bytes): is this the right file?"
                ),
            });
        }
        let text = std::fs::read_to_string(path).map_err(read_error)?;
        Self::with_overrides(&text, path, overrides)
    }

    /// Like [`RunConfig::load`], for a run file's text held in memory.
    pub fn load_str(text: &str, overrides: &[String]) -> Result<Self, ConfigError> {
        Self::with_overrides(text, Path::new("(built-in run)"), overrides)
    }

    fn with_overrides(text: &str, path: &Path, overrides: &[String]) -> Result<Self, ConfigError> {
        let mut value = parse_value(text, path)?;
        let mut applied = Vec::new();
        for assignment in overrides {
            applied.push(set(&mut value, assignment)?);
        }
        Self::from_value(value, path).map_err(|error| match error {
            ConfigError::Parse {
                key: Some(key),
                message,
                ..
            } => blame_override(&applied, &key, &message).unwrap_or_else(|| ConfigError::Parse {
                path: path.to_path_buf(),
                key: Some(key),
                message,
            }),
            other => other,
        })
    }

    /// The run file's table as a config; an error names the key it is about (`training.epochs`)
    /// where serde can tell.
    fn from_value(mut value: toml::Table, path: &Path) -> Result<Self, ConfigError> {
        home_paths::expand_home(&mut value);
        serde_path_to_error::deserialize(value).map_err(|e| {
            let key = e.path().to_string();
            ConfigError::Parse {
                path: path.to_path_buf(),
                key: (key != ".").then_some(key),
                message: e.inner().message().trim_end().to_string(),
            }
        })
    }

    /// Trains the run this file describes: resolves it, claims its artifact directory, then
    /// trains and evaluates on the file's backend; the resolved file is saved there
    /// ([`RunDir::run_file`]) once the run has passed its checks.
    pub fn train(&self, resume: bool) -> Result<RunReport, RunFileError> {
        let (resolved, job) = self.resolve()?;
        let dir = RunDir::claim(&resolved.artifact_dir, &job.inputs()).map_err(RunError::from)?;
        let backend = resolved
            .backend
            .unwrap_or_else(BackendKind::default_for_build);
        let tensorboard = resolved.training.tensorboard.unwrap_or(true);
        let run = Run {
            dir,
            resume,
            tensorboard,
            run_file: Some(resolved.to_toml()),
        };
        Ok(job.launch(run, backend)?)
    }

    /// The config as TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("run configs serialize to TOML")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cubenet_engine::data::{Augment, ImageSource};
    use cubenet_engine::model::{ImageModelConfig, Precision};
    use cubenet_engine::train::tabular::TabularJob;
    use cubenet_engine::train::{ImageJob, LrSchedule};

    fn parse(text: &str) -> Result<RunConfig, ConfigError> {
        RunConfig::parse(text, Path::new("run.toml"))
    }

    #[test]
    fn unknown_keys_are_named() {
        let err = parse("[data]\nkind = \"mnist\"\n[training]\nepoch = 3\n").unwrap_err();
        assert!(err.to_string().contains("unknown field `epoch`"), "{err}");
        let err = parse("[data]\nkind = \"mnist\"\ncolor = 1\n").unwrap_err();
        assert!(err.to_string().contains("unknown field `color`"), "{err}");
        let err = parse("[data]\nkind = \"mnist\"\n[model]\nkind = \"simple\"\nfilter = 3\n")
            .unwrap_err();
        assert!(err.to_string().contains("unknown field `filter`"), "{err}");
        let err = parse("bakend = \"cuda\"\n[data]\nkind = \"mnist\"\n").unwrap_err();
        assert!(err.to_string().contains("unknown field `bakend`"), "{err}");
    }

    #[test]
    fn defaults_resolve_per_run_kind() {
        let (image, job) = parse("[data]\nkind = \"mnist\"\n")
            .unwrap()
            .resolve()
            .unwrap();
        assert_eq!(image.training.epochs, Some(3));
        assert!(matches!(job, Job::Image(_)));
        let text = "[data]\nkind = \"generated\"\ngenerator = \"xor\"\n\
                    [model]\nkind = \"mlp\"\ntask = \"binary\"\nhidden = [4]\n";
        let (table, job) = parse(text).unwrap().resolve().unwrap();
        assert_eq!(table.training.epochs, Some(100));
        let Job::Tabular(TabularJob { config, .. }) = job else {
            panic!("a tabular job")
        };
        assert_eq!(config.features, ["x1", "x2"]);
        assert_eq!(config.targets, ["y"]);
        // The printed config parses back to itself.
        assert_eq!(parse(&table.to_toml()).unwrap(), table);
    }

    #[test]
    fn overrides_are_checked_like_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.toml");
        std::fs::write(&path, "[data]\nkind = \"mnist\"\n").unwrap();
        let set = |s: &str| RunConfig::load(&path, &[s.to_string()]);
        assert_eq!(set("training.epochs=7").unwrap().training.epochs, Some(7));
        assert_eq!(
            set("backend=wgpu").unwrap().backend,
            Some(BackendKind::Wgpu)
        );
        assert!(
            set("training.epocs=7")
                .unwrap_err()
                .to_string()
                .contains("epocs")
        );
        assert!(matches!(set("epochs"), Err(ConfigError::Override(_))));
        assert_eq!(
            set("training.epochs=7\nseed=99").unwrap_err().to_string(),
            "`--set training.epochs=7\\nseed=99`: a `--set` takes one key on one line: give \
             each key a --set of its own"
        );
        assert_eq!(
            set("training.epochs=three").unwrap_err().to_string(),
            "`--set training.epochs=three`: invalid type: string \"three\", expected usize"
        );
        let no_section = set("optimizer.learning_rate=0.1").unwrap_err().to_string();
        assert!(
            no_section.starts_with(
                "`--set optimizer.learning_rate=0.1`: the run file has no [optimizer] section"
            ) && no_section.contains("`kind`"),
            "{no_section}"
        );
    }

    #[test]
    fn type_errors_name_the_key() {
        let err = parse("[data]\nkind = \"mnist\"\n[training]\nepochs = \"three\"\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "run.toml: `training.epochs`: invalid type: string \"three\", expected usize"
        );
    }

    #[test]
    fn precision_reaches_every_cnn_and_defaults_per_backend() {
        let on = |backend: &str, model: &str| {
            let text =
                format!("backend = \"{backend}\"\n[data]\nkind = \"mnist\"\n[model]\n{model}");
            let (resolved, job) = parse(&text).unwrap().resolve().unwrap();
            assert_eq!(parse(&resolved.to_toml()).unwrap(), resolved);
            let Job::Image(ImageJob { config, .. }) = job else {
                panic!("an image job")
            };
            let ran = match config.model {
                ImageModelConfig::Simple(c) => c.precision,
                ImageModelConfig::Lenet(c) => c.precision,
                ImageModelConfig::Cnn(c) => c.precision,
                ImageModelConfig::Mlp(_) => panic!("a CNN"),
            };
            let mut model = resolved.model.clone();
            let stated = model.precision_mut().map(|precision| *precision);
            assert_eq!(stated, Some(Some(ran)), "the resolved run file states it");
            ran
        };
        let precision = |model: &str| on("ndarray", model);
        let cnn = "kind = \"cnn\"\nlayers = [{ conv = 8 }, { dense = \"classes\" }]\n";
        assert_eq!(precision("kind = \"lenet\"\n"), Precision::Fp32);
        assert_eq!(on("wgpu", "kind = \"lenet\"\n"), Precision::Fp32);
        assert_eq!(on("cuda", "kind = \"lenet\"\n"), Precision::Tf32);
        assert_eq!(on("cuda", cnn), Precision::Tf32);
        assert_eq!(
            on("cuda", "kind = \"lenet\"\nprecision = \"fp32\"\n"),
            Precision::Fp32
        );
        assert_eq!(
            precision("kind = \"simple\"\nprecision = \"tf32\"\n"),
            Precision::Tf32
        );
        assert_eq!(
            precision("kind = \"lenet\"\nprecision = \"tf32\"\n"),
            Precision::Tf32
        );
        assert_eq!(
            precision(&format!("{cnn}precision = \"tf32\"\n")),
            Precision::Tf32
        );
        assert_eq!(
            precision("kind = \"lenet\"\nprecision = \"bf16\"\n"),
            Precision::Bf16
        );
        let err =
            parse("[data]\nkind = \"mnist\"\n[model]\nkind = \"lenet\"\nprecision = \"fp16\"\n")
                .unwrap_err();
        assert!(err.to_string().contains("unknown variant `fp16`"), "{err}");
    }

    #[test]
    fn image_kinds_take_the_image_options_and_print_back() {
        let text = "[data]\nkind = \"image_folder\"\nroot = \"photos\"\nsize = [32, 32]\n\
                    flip = true\npad = 4\nlimit_train = 100\n\
                    [model]\nkind = \"cnn\"\n\
                    layers = [{ conv = 8, padding = 1 }, { relu = true }, { pool = 2 }, \
                    { dense = \"classes\" }]\n";
        let (resolved, job) = parse(text).unwrap().resolve().unwrap();
        let Job::Image(ImageJob { config, source }) = job else {
            panic!("an image job")
        };
        assert!(matches!(source, ImageSource::ImageFolder { .. }));
        assert_eq!(
            config.augment,
            Some(Augment {
                flip: true,
                pad: 4,
                ..Augment::default()
            })
        );
        assert_eq!(config.limit_train, Some(100));
        assert!(matches!(config.model, ImageModelConfig::Cnn(_)));
        assert_eq!(parse(&resolved.to_toml()).unwrap(), resolved);

        let (mnist, _) = parse("[data]\nkind = \"mnist\"\ndir = \"m\"\nflip = true\n")
            .unwrap()
            .resolve()
            .unwrap();
        assert_eq!(parse(&mnist.to_toml()).unwrap(), mnist);

        let err = parse("[data]\nkind = \"cifar\"\ndir = \"c\"\nflp = true\n").unwrap_err();
        assert!(err.to_string().contains("unknown field `flp`"), "{err}");
        let err = parse("[data]\nkind = \"pictures\"\n").unwrap_err();
        assert!(err.to_string().contains("`image_folder`"), "{err}");
    }

    #[test]
    fn mismatched_sections_are_refused() {
        let err = parse("[data]\nkind = \"generated\"\ngenerator = \"xor\"\n")
            .unwrap()
            .resolve()
            .unwrap_err();
        assert!(err.to_string().contains("MLP"), "{err}");
        let err = parse(
            "[data]\nkind = \"generated\"\ngenerator = \"xor\"\n[model]\nkind = \"mlp\"\n\
             task = \"binary\"\n[training]\nlabel_smoothing = 0.1\n",
        )
        .unwrap()
        .resolve()
        .unwrap_err();
        assert!(err.to_string().contains("for image runs"), "{err}");
        let err = parse(
            "[data]\nkind = \"mnist\"\n[optimizer]\nkind = \"sgd\"\nlearning_rate = 0.1\n\
             nesterov = true\n",
        )
        .unwrap()
        .resolve()
        .unwrap_err();
        assert!(
            err.to_string().contains("nesterov needs a momentum"),
            "{err}"
        );
    }

    #[test]
    fn an_image_recipe_resolves_into_its_training_settings_and_prints_back() {
        let text = "[data]\nkind = \"mnist\"\ndir = \"m\"\nflip = true\npad = 4\ncutout = 8\n\
                    [optimizer]\nkind = \"sgd\"\nlearning_rate = 0.1\nmomentum = 0.9\n\
                    nesterov = true\nl2 = 5e-4\n\
                    [training]\nschedule = \"constant\"\nlabel_smoothing = 0.2\ntest_flips = true\n";
        let (resolved, job) = parse(text).unwrap().resolve().unwrap();
        let Job::Image(ImageJob { config, .. }) = job else {
            panic!("an image job")
        };
        assert_eq!(
            config.optimizer_settings(),
            OptimizerConfig::Sgd {
                learning_rate: 0.1,
                momentum: 0.9,
                nesterov: true,
                l2: 5e-4,
            }
        );
        assert_eq!(config.schedule, Some(LrSchedule::Constant));
        assert!(config.test_flips());
        let augment = config.augment.unwrap();
        assert_eq!((augment.cutout, augment.label_smoothing), (8, 0.2));
        assert_eq!(parse(&resolved.to_toml()).unwrap(), resolved);
        // Without them: Adam, cosine, no smoothing, no flips at test time.
        let (_, job) = parse("[data]\nkind = \"mnist\"\ndir = \"m\"\n")
            .unwrap()
            .resolve()
            .unwrap();
        let Job::Image(ImageJob { config, .. }) = job else {
            panic!("an image job")
        };
        assert!(matches!(
            config.optimizer_settings(),
            OptimizerConfig::Adam { l2: 0.0, .. }
        ));
        assert_eq!(config.schedule, Some(LrSchedule::Cosine));
        assert!(!config.test_flips() && config.augment.is_none());
    }
}
