//! `cubenet train`: a run file (or the default MNIST run), flag overrides, then training,
//! which Ctrl-C, SIGTERM and SIGHUP stop: the first at the next step, with the checkpoint
//! `--resume` continues after; a second at once ([`cubenet_engine::train::StopRequest`]). A stopped
//! run exits with code 130, whichever signal stopped it.

use std::path::PathBuf;

use cubenet_engine::train::{RunError, StopPoint, StopRequest, TrainError};
use cubenet_run_file::{RunConfig, RunFileError, RunFlags};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run file (TOML; see configs/) [default: the single-conv CNN on MNIST]
    #[arg(long)]
    config: Option<PathBuf>,
    /// Set a key of the run file, e.g. `--set training.epochs=5` (repeatable)
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    #[command(flatten)]
    flags: RunFlags,
    /// Continue from the last complete checkpoint in the artifact directory
    #[arg(long)]
    resume: bool,
    /// Print the resolved run file (every default filled in) and exit
    #[arg(long)]
    print_config: bool,
}

impl Args {
    /// The run file with the flags applied.
    fn config(&self) -> anyhow::Result<RunConfig> {
        let mut config = match &self.config {
            Some(path) => RunConfig::load(path, &self.set)?,
            None => RunConfig::load_str(DEFAULT_RUN, &self.set)?,
        };
        self.flags.apply(&mut config)?;
        Ok(config)
    }
}

/// What `cubenet train` runs without `--config`.
const DEFAULT_RUN: &str = "artifact_dir = \"artifacts/mnist_cnn\"\n\
                           [data]\nkind = \"mnist\"\n[model]\nkind = \"simple\"\n";

pub fn run(args: Args) -> anyhow::Result<()> {
    let config = args.config()?;
    let (resolved, _) = config.resolve()?;
    if args.print_config {
        print!("{}", resolved.to_toml());
        return Ok(());
    }
    stop_on_signals()?;
    println!("{}", config.train(args.resume)?);
    eprintln!("artifacts in {}", resolved.artifact_dir.display());
    Ok(())
}

/// The exit code of a run stopped on request.
pub(super) const STOPPED_EXIT_CODE: u8 = 130;

/// Where a run that `error` ended was stopped, if it was stopped on request.
pub(super) fn stop_point(error: &anyhow::Error) -> Option<StopPoint> {
    match error.downcast_ref::<RunFileError>()? {
        RunFileError::Run(RunError::Train(TrainError::Stopped(point))) => Some(*point),
        _ => None,
    }
}

/// Turns SIGINT, SIGTERM and SIGHUP into stop requests, on a thread of their own; a request
/// that stops the process at once prints the stop line and exits with
/// [`STOPPED_EXIT_CODE`]. A signal that was ignored when cubenet started (SIGHUP under
/// `nohup`, SIGINT for a background job of a script) stays ignored.
#[cfg(unix)]
fn stop_on_signals() -> anyhow::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    use signal_hook::iterator::Signals;

    let handled: Vec<i32> = [SIGINT, SIGTERM, SIGHUP]
        .into_iter()
        .filter(|&signal| !ignored_at_start(signal))
        .collect();
    let mut signals = Signals::new(&handled)?;
    if handled.contains(&SIGINT) {
        cubenet_engine::train::handle_stop_signals();
    }
    std::thread::Builder::new()
        .name("stop-signals".into())
        .spawn(move || {
            for _ in signals.forever() {
                if cubenet_engine::train::request_stop() == StopRequest::Now {
                    let line = cubenet_engine::train::end_now();
                    // The terminal may be gone (SIGHUP): the exit code still says it.
                    let _ = std::io::Write::write_all(
                        &mut std::io::stderr(),
                        format!("{line}\n").as_bytes(),
                    );
                    std::process::exit(STOPPED_EXIT_CODE.into());
                }
            }
        })?;
    Ok(())
}

/// Whether `signal` is ignored (`SIG_IGN`), as a parent can leave it for its children:
/// signal-hook's handlers would otherwise replace that.
#[cfg(unix)]
fn ignored_at_start(signal: i32) -> bool {
    let mut current = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: a null new action only reads the current one into `current`.
    let read = unsafe { libc::sigaction(signal, std::ptr::null(), current.as_mut_ptr()) };
    // SAFETY: sigaction filled `current` when it returned 0; zeroed memory is a valid action.
    read == 0 && unsafe { current.assume_init() }.sa_sigaction == libc::SIG_IGN
}

/// Elsewhere a run stops as the platform stops a process.
#[cfg(not(unix))]
fn stop_on_signals() -> anyhow::Result<()> {
    Ok(())
}
