//! `cubenet export`: a trained run's weights as safetensors under PyTorch's names, with a
//! JSON sidecar that describes the `nn.Sequential` they load into
//! (`examples/load_in_pytorch.py` rebuilds it), or the whole network as one ONNX graph.
//! Exports are written on the CPU: they are small, and need no device (the data-parallel
//! build, which has no CPU backend, loads the model on the backend it trained on).

use std::path::PathBuf;

use cubenet_engine::device::BackendKind;
use cubenet_engine::train::{
    EXPORT_WEIGHTS, ExportFormat, RunDir, SavedModel, onnx_sidecar_path, sidecar_path,
};

/// The file name of an ONNX export in the run's export folder.
const ONNX_MODEL: &str = "model.onnx";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    /// Weights under PyTorch's names, and a sidecar describing the network
    Safetensors,
    /// One ONNX graph (opset 17) with a dynamic batch dimension
    Onnx,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Artifact directory of a finished `cubenet train`
    #[arg(long)]
    model_dir: PathBuf,
    #[arg(long, value_enum, default_value = "safetensors")]
    format: Format,
    /// ONNX: the input normalization and the output's softmax (or sigmoid) as nodes, so that
    /// raw pixels (0–255) or raw feature values go in and probabilities come out
    #[arg(long)]
    with_preprocessing: bool,
    /// The file to write (`.safetensors` or `.onnx`; the sidecar goes beside it as `.json`,
    /// `.onnx.json`) [default: <model-dir>/export/model.safetensors or model.onnx]
    #[arg(long)]
    output: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let (format, name) = match args.format {
        Format::Safetensors => {
            anyhow::ensure!(
                !args.with_preprocessing,
                "--with-preprocessing is for --format onnx: a safetensors export holds weights \
                 only (its sidecar gives the preprocessing)"
            );
            (ExportFormat::Safetensors, EXPORT_WEIGHTS)
        }
        Format::Onnx => {
            let with_preprocessing = args.with_preprocessing;
            (ExportFormat::Onnx { with_preprocessing }, ONNX_MODEL)
        }
    };
    let output = match args.output {
        Some(output) => output,
        None => RunDir::open(&args.model_dir).export_folder()?.join(name),
    };
    let cpu = BackendKind::Ndarray
        .is_compiled()
        .then_some(BackendKind::Ndarray);
    match SavedModel::load(&args.model_dir, cpu)? {
        SavedModel::Image(model) => model.export(&output, format)?,
        SavedModel::Tabular(model) => model.export(&output, format)?,
    }
    let (what, sidecar) = match format {
        ExportFormat::Safetensors => ("PyTorch names", sidecar_path(&output)),
        ExportFormat::Onnx { .. } => ("ONNX", onnx_sidecar_path(&output)),
    };
    println!(
        "exported {} ({what}) and {}",
        output.display(),
        sidecar.display()
    );
    Ok(())
}
