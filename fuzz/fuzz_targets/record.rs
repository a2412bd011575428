//! Model, optimizer and scheduler record files (what `eval`, `predict` and `--resume` load):
//! any bytes give a record or an error — never a panic. The first byte picks the record type
//! (its value mod 3) and what the rest is (its value / 3, mod 2): a whole file, checksummed
//! frame and all, or a payload that the target frames with its right checksum, so that the
//! MessagePack decoding behind the checksum is fuzzed too. The model is the network of
//! `fuzz/seeds/record-run.toml`, whose checkpoints are the seeds.
//! The model is loaded on NdArray, as `eval` and `predict` load it (Burn's autodiff backend
//! keeps a graph node for every parameter it loads until a backward pass, which a million
//! loads without one would pile up); the optimizer record's tensors are NdArray's either way.
#![no_main]

use std::path::Path;
use std::sync::OnceLock;

use burn::backend::{Autodiff, NdArray};
use burn::lr_scheduler::LrScheduler;
use burn::lr_scheduler::cosine::CosineAnnealingLrScheduler;
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::{Adam, Optimizer};
use cubenet::data::MNIST_SHAPE;
use cubenet::model::ImageModel;
use cubenet::run_file::{Job, RunConfig};
use cubenet::train::{decode_model_record, decode_record, frame_record};
use libfuzzer_sys::fuzz_target;

type B = Autodiff<NdArray>;
type AdamRecord = <OptimizerAdaptor<Adam, ImageModel<B>, B> as Optimizer<ImageModel<B>, B>>::Record;
type CosineRecord = <CosineAnnealingLrScheduler as LrScheduler>::Record<B>;

fn model() -> ImageModel<NdArray> {
    static MODEL: OnceLock<ImageModel<NdArray>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let run = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds/record-run.toml");
            let (_, job) = RunConfig::load(&run, &[]).unwrap().resolve().unwrap();
            let Job::Image(job) = job else {
                panic!("an image run");
            };
            let model = job.config.model.fit(MNIST_SHAPE, 10).unwrap();
            model.init(&Default::default()).unwrap()
        })
        .clone()
}

fuzz_target!(|bytes: &[u8]| {
    let Some((&kind, rest)) = bytes.split_first() else {
        return;
    };
    let framed;
    let record = match kind / 3 % 2 {
        0 => rest,
        _ => {
            framed = frame_record(rest);
            &framed
        }
    };
    let device = Default::default();
    match kind % 3 {
        0 => drop(decode_model_record(record, model(), &device)),
        1 => drop(decode_record::<B, AdamRecord>(record, &device)),
        _ => drop(decode_record::<B, CosineRecord>(record, &device)),
    }
});
