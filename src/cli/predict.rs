//! `cubenet predict`: a trained model applied to new inputs, on the chosen backend.

use std::io::Write;
use std::path::{Path, PathBuf};

use cubenet_engine::atomic_file::write_atomically_with;
use cubenet_engine::data::{
    Channels, DataError, Decoding, ImageShape, check_replaceable_csv, image_files, is_image,
    mnist_classes, read_idx_file, read_image_file,
};
use cubenet_engine::device::BackendKind;
use cubenet_engine::train::SavedModel;

/// The header of an image run's predictions.
const PREDICTION_COLUMNS: [&str; 3] = ["path", "class", "probability"];

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Artifact directory of a finished `cubenet train`, or what `cubenet export` wrote
    #[arg(long)]
    model_dir: PathBuf,
    /// Image runs: image files (.png, .jpg, .jpeg), folders of them, or IDX image files;
    /// tabular runs: one CSV
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Where predictions go [default: stdout for one image file, else
    /// `<first input>-predictions.csv` beside it]
    #[arg(long)]
    output: Option<PathBuf>,
    /// Images: invert the pixels (dark drawings on light paper for a model trained on
    /// MNIST's light digits on dark)
    #[arg(long)]
    invert: bool,
    /// [default: the backend the run trained on]
    #[arg(long, value_enum)]
    backend: Option<BackendKind>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match super::load_saved_run(&args.model_dir, args.backend)?.0 {
        SavedModel::Image(model) => {
            let saved = model.saved();
            let images = read_inputs(&args.inputs, saved.shape, args.invert)
                .map_err(|e| anyhow::anyhow!("{e} (no predictions were written)"))?;
            let pixels: Vec<&[u8]> = images.iter().map(|(_, pixels)| pixels.as_slice()).collect();
            let predictions = model.classify(&pixels);
            let single_file = args.inputs.len() == 1 && !args.inputs[0].is_dir();
            match (&args.output, single_file) {
                (None, true) => {
                    let noun = match saved.classes == mnist_classes() {
                        true => "digit",
                        false => "class",
                    };
                    let mut out = std::io::stdout().lock();
                    for (class, p) in predictions {
                        writeln!(out, "{noun} {} (probability {p:.4})", saved.classes[class])?;
                    }
                }
                (output, _) => {
                    let path = output
                        .clone()
                        .unwrap_or_else(|| predictions_path(&args.inputs[0]));
                    check_replaceable_csv(&path, &PREDICTION_COLUMNS)?;
                    write_atomically_with(&path, |partial| {
                        let mut csv = csv::Writer::from_path(partial)?;
                        csv.write_record(PREDICTION_COLUMNS)?;
                        for ((name, _), (class, p)) in images.iter().zip(&predictions) {
                            let class = &saved.classes[*class];
                            csv.write_record([name, class, &format!("{p:.6}")])?;
                        }
                        csv.flush()
                    })?;
                    println!(
                        "wrote {} predictions to {}",
                        predictions.len(),
                        path.display()
                    );
                }
            }
        }
        SavedModel::Tabular(model) => {
            let [input] = args.inputs.as_slice() else {
                anyhow::bail!("a tabular run predicts the rows of one CSV file");
            };
            let output = args.output.unwrap_or_else(|| predictions_path(input));
            let rows = model.predict_csv(input, &output)?;
            println!("wrote {rows} predictions to {}", output.display());
        }
    }
    Ok(())
}

/// Every image of `inputs` with its name, as the CHW pixels of `shape`: image files are
/// converted and resized to it, folders read for their image files, anything else read as
/// an IDX image file `[n, height, width]` (gray runs; images named `file#index`).
fn read_inputs(
    inputs: &[PathBuf],
    shape: ImageShape,
    invert: bool,
) -> Result<Vec<(String, Vec<u8>)>, DataError> {
    let decoding = Decoding {
        channels: match shape.channels {
            1 => Channels::Gray,
            _ => Channels::Rgb,
        },
        size: Some([shape.height as u32, shape.width as u32]),
    };
    let mut images = Vec::new();
    for input in inputs {
        for path in image_files(input)? {
            // Each prediction names its file, exactly.
            let Some(name) = path.to_str().map(str::to_owned) else {
                return Err(DataError::Image {
                    path,
                    what: "its name is not valid UTF-8, and each prediction names its file: \
                           rename it"
                        .into(),
                });
            };
            if is_image(&path) {
                images.push((name, read_image_file(&path, decoding, shape)?));
                continue;
            }
            let idx = read_idx_file(&path).map_err(|error| match error {
                DataError::Corrupt { path, what } => DataError::Image {
                    path,
                    what: format!(
                        "is neither a .png, .jpg or .jpeg image nor an IDX image file ({what})"
                    ),
                },
                other => other,
            })?;
            if shape.channels != 1
                || idx.dims.len() != 3
                || idx.dims[1..] != [shape.height, shape.width]
            {
                return Err(DataError::Image {
                    path,
                    what: format!(
                        "expected a .png, .jpg or .jpeg image, or IDX images [n, {}, {}] of a \
                         gray model; got IDX dimensions {:?}",
                        shape.height, shape.width, idx.dims
                    ),
                });
            }
            let images_in_file = idx.data.chunks_exact(shape.bytes()).enumerate();
            images
                .extend(images_in_file.map(|(i, pixels)| (format!("{name}#{i}"), pixels.to_vec())));
        }
    }
    if invert {
        for (_, pixels) in &mut images {
            pixels.iter_mut().for_each(|p| *p = 255 - *p);
        }
    }
    Ok(images)
}

/// `data.csv` → `data-predictions.csv`, beside it.
fn predictions_path(input: &Path) -> PathBuf {
    let stem = input
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("input");
    input.with_file_name(format!("{stem}-predictions.csv"))
}
