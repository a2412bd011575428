//! `cubenet predict`: a trained model applied to new inputs, on the CPU.

use std::io::Write;
use std::path::{Path, PathBuf};

use burn::backend::NdArray;
use burn::prelude::*;
use burn::tensor::activation::softmax;
use cubenet::atomic_file::write_atomically;
use cubenet::data::{IMAGE_SIDE, read_digits};
use cubenet::model::MnistModel;

use crate::saved::SavedRun;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Artifact directory of a finished `cubenet train`
    #[arg(long)]
    model_dir: PathBuf,
    /// A PNG of one 28×28 digit or an IDX image file (image runs), or a CSV (tabular runs)
    input: PathBuf,
    /// Where predictions go [default: stdout for images, `<input>-predictions.csv` for CSVs]
    #[arg(long)]
    output: Option<PathBuf>,
    /// Images: the digit is dark on a light background (MNIST's are light on dark)
    #[arg(long)]
    invert: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let device = Default::default();
    match SavedRun::load(&args.model_dir)? {
        SavedRun::Image { model, .. } => {
            let digits = read_digits(&args.input, args.invert)?;
            let lines = predict_digits(&model, &digits);
            match &args.output {
                Some(path) => {
                    let mut text = String::from("image,digit,probability\n");
                    for (i, (digit, p)) in lines.iter().enumerate() {
                        text.push_str(&format!("{i},{digit},{p:.6}\n"));
                    }
                    write_atomically(path, text.as_bytes())?;
                    println!("wrote {} predictions to {}", lines.len(), path.display());
                }
                None => {
                    let mut out = std::io::stdout().lock();
                    for (digit, p) in lines {
                        writeln!(out, "digit {digit} (probability {p:.4})")?;
                    }
                }
            }
        }
        SavedRun::Tabular { model, .. } => {
            let output = args.output.unwrap_or_else(|| predictions_path(&args.input));
            let rows = model.predict_csv(&args.input, &output, &device)?;
            println!("wrote {rows} predictions to {}", output.display());
        }
    }
    Ok(())
}

/// The most likely digit of each image and its probability.
fn predict_digits(model: &MnistModel<NdArray>, digits: &[[u8; 784]]) -> Vec<(usize, f32)> {
    let device = Default::default();
    digits
        .chunks(1000)
        .flat_map(|chunk| {
            let pixels: Vec<f32> = chunk
                .iter()
                .flatten()
                .map(|&p| cubenet::data::normalize_pixel(p))
                .collect();
            let images = Tensor::<NdArray, 4>::from_data(
                TensorData::new(pixels, [chunk.len(), 1, IMAGE_SIDE, IMAGE_SIDE]),
                &device,
            );
            let probabilities = softmax(model.forward(images), 1);
            let values: Vec<f32> = probabilities.into_data().to_vec().expect("f32 outputs");
            values
                .chunks(10)
                .map(|row| {
                    let (digit, p) = row
                        .iter()
                        .enumerate()
                        .max_by(|a, b| a.1.total_cmp(b.1))
                        .expect("ten classes");
                    (digit, *p)
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// `data.csv` → `data-predictions.csv`, beside it.
fn predictions_path(input: &Path) -> PathBuf {
    let stem = input
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("input");
    input.with_file_name(format!("{stem}-predictions.csv"))
}
