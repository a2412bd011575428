//! `cubenet export`: a trained run's weights as safetensors under PyTorch's names, with a
//! JSON sidecar that describes the `nn.Sequential` they load into
//! (`examples/load_in_pytorch.py` rebuilds it). Exports are written on the CPU: they are
//! small, and need no device.

use std::path::PathBuf;

use burn::backend::NdArray;
use cubenet::train::{
    EXPORT_DIR, EXPORT_WEIGHTS, export_image_model, export_tabular_model, sidecar_path,
};

use super::saved::SavedRun;

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
        .unwrap_or_else(|| args.model_dir.join(EXPORT_DIR).join(EXPORT_WEIGHTS));
    match SavedRun::<NdArray>::load(&args.model_dir, &Default::default())? {
        SavedRun::Image { model, saved, .. } => export_image_model(&model, &saved, &output)?,
        SavedRun::Tabular { model, .. } => export_tabular_model(&model, &output)?,
    }
    println!(
        "exported {} (PyTorch names) and {}",
        output.display(),
        sidecar_path(&output).display()
    );
    Ok(())
}
