//! Reads queued early (`KernelBackend::read_early`; NdArray runs the default body): every
//! tensor's values, in order, as Burn's own read gives them. Floats of ranks 1 to 3 with odd sizes, a transposed one (its
//! strides are not a contiguous tensor's), a one-element loss and int targets; one read of
//! all of them, one of each alone, and one of none.

use burn::prelude::*;
use cubenet_kernels::{AutodiffKernelBackend, KernelBackend};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::cases::values;
use crate::harness::{KernelCheck, on_each_backend};

/// The tensors read: floats then ints, as fresh tensors on `device` (seeded values).
fn tensors<B: Backend>(device: &B::Device) -> (Vec<Tensor<B, 3>>, Vec<Tensor<B, 1, Int>>) {
    let mut rng = StdRng::seed_from_u64(7);
    let mut float = |shape: [usize; 3]| {
        let values = values(&mut rng, shape.iter().product());
        Tensor::<B, 3>::from_data(TensorData::new(values, shape), device)
    };
    let floats = vec![
        float([1, 1, 1]),
        float([1, 1, 1000]),
        float([1, 3, 5]),
        float([7, 1, 9]),
        float([2, 5, 3]).swap_dims(1, 2),
    ];
    let targets: Vec<i64> = (0..257).map(|_| rng.random_range(-3..1000)).collect();
    let ints = vec![Tensor::from_data(TensorData::new(targets, [257]), device)];
    (floats, ints)
}

fn check_read_early<B: KernelBackend>(device: &B::Device) -> (usize, f64) {
    let (floats, ints) = tensors::<B>(device);
    let want: Vec<TensorData> = floats
        .iter()
        .map(|t| t.to_data())
        .chain(ints.iter().map(|t| t.to_data()))
        .collect();
    let read = |floats: Vec<Tensor<B, 3>>, ints: Vec<Tensor<B, 1, Int>>| {
        let floats = floats
            .into_iter()
            .map(|t| t.into_primitive().tensor())
            .collect();
        let ints = ints.into_iter().map(|t| t.into_primitive()).collect();
        cubecl::future::block_on(B::read_early(floats, ints)).expect("the read succeeds")
    };
    let all = read(floats.clone(), ints.clone());
    assert_eq!(all.len(), want.len(), "one value set a tensor");
    for (index, (got, want)) in all.iter().zip(&want).enumerate() {
        assert_eq!(got.shape, want.shape, "tensor {index}: shape");
        assert_eq!(got.as_bytes(), want.as_bytes(), "tensor {index}: values");
    }
    for (index, tensor) in floats.into_iter().enumerate() {
        assert_eq!(
            read(vec![tensor], Vec::new())[0].as_bytes(),
            want[index].as_bytes()
        );
    }
    let targets = read(Vec::new(), ints);
    assert_eq!(targets[0].as_bytes(), want[want.len() - 1].as_bytes());
    assert!(read(Vec::new(), Vec::new()).is_empty());
    (want.len(), 0.0)
}

struct ReadCheck;

impl KernelCheck for ReadCheck {
    fn run<B: AutodiffKernelBackend>(&self, device: &B::Device) -> (usize, f64) {
        check_read_early::<B::InnerBackend>(device)
    }
}

#[test]
fn reads_queued_early_give_burns_values() {
    on_each_backend("read_early", ReadCheck);
}
