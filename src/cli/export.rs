//! `cubenet export`: a trained run's weights as safetensors under PyTorch's names, with a
//! JSON sidecar that describes the `nn.Sequential` they load into
//! (`examples/load_in_pytorch.py` rebuilds it). Exports are written on the CPU: they are
//! small, and need no device (the data-parallel build, which has no CPU backend, loads the
//! model on the backend it trained on).

use std::path::PathBuf;

use crate::device::BackendKind;
use crate::train::{EXPORT_WEIGHTS, RunDir, SavedModel, sidecar_path};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Artifact directory of a finished `cubenet train`
    #[arg(long)]
    model_dir: PathBuf,
    /// The weights file to write (`.safetensors`; the sidecar goes beside it as `.json`)
    /// [default: <model-dir>/export/model.safetensors]
    #[arg(long)]
    output: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let output = args
        .output
        .unwrap_or_else(|| RunDir::open(&args.model_dir).export().join(EXPORT_WEIGHTS));
    let cpu = BackendKind::Ndarray
        .is_compiled()
        .then_some(BackendKind::Ndarray);
    match SavedModel::load(&args.model_dir, cpu)? {
        SavedModel::Image(model) => model.export(&output)?,
        SavedModel::Tabular(model) => model.export(&output)?,
    }
    println!(
        "exported {} (PyTorch names) and {}",
        output.display(),
        sidecar_path(&output).display()
    );
    Ok(())
}
