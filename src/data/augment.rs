//! On-device augmentation of training batches: horizontal flips and random crops of the
//! zero-padded images, drawn from a generator seeded by the run's seed and the batch's
//! images, so a batch is augmented the same way whenever it is built (also after a resume).

use burn::prelude::*;
use burn::tensor::ops::{IntElem, PadMode};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

/// Which augmentations a run's training batches get; all off by default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Augment {
    /// Mirror each image left-right with probability ½.
    pub flip: bool,
    /// Pad each side with this many zeros (the channel mean, after normalization), then
    /// crop a random window of the original size; 0 crops nothing.
    pub pad: usize,
}

impl Augment {
    /// Whether it changes nothing.
    pub fn is_off(&self) -> bool {
        !self.flip && self.pad == 0
    }

    /// `images` (`[n, c, h, w]`, normalized) augmented on their device, with draws seeded by
    /// `seed`.
    pub fn apply<B: Backend>(&self, images: Tensor<B, 4>, seed: u64) -> Tensor<B, 4> {
        let mut rng = StdRng::seed_from_u64(seed);
        let [n, c, h, w] = images.dims();
        let device = images.device();
        let mut images = images;
        if self.pad > 0 {
            let pad = self.pad;
            let padded_width = w + 2 * pad;
            // Output pixel (y, x) of image i reads padded pixel (y + dy_i, x + dx_i): the
            // flat index y·padded_width + x shifted by dy_i·padded_width + dx_i. Only the
            // shifts are drawn here; the index is built on the device.
            let shifts: Vec<i64> = (0..n)
                .map(|_| {
                    let dy = rng.random_range(0..=2 * pad);
                    let dx = rng.random_range(0..=2 * pad);
                    (dy * padded_width + dx) as i64
                })
                .collect();
            let shifts = Tensor::<B, 1, Int>::from_data(
                TensorData::new(shifts, [n]).convert::<IntElem<B>>(),
                &device,
            );
            let pixel = Tensor::<B, 1, Int>::arange(0..(h * w) as i64, &device);
            let row_start = pixel
                .clone()
                .div_scalar(w as i64)
                .mul_scalar((2 * pad) as i64);
            let index = (shifts.reshape([n, 1]) + (pixel + row_start).reshape([1, h * w]))
                .reshape([n, 1, h * w])
                .expand([n, c, h * w]);
            images = images
                .pad((pad, pad, pad, pad), PadMode::Constant(0.0))
                .reshape([n, c, (h + 2 * pad) * padded_width])
                .gather(2, index)
                .reshape([n, c, h, w]);
        }
        if self.flip {
            let flips: Vec<bool> = (0..n).map(|_| rng.random_bool(0.5)).collect();
            let mask =
                Tensor::<B, 4, Bool>::from_data(TensorData::new(flips, [n, 1, 1, 1]), &device)
                    .expand([n, c, h, w]);
            images = images.clone().mask_where(mask, images.flip([3]));
        }
        images
    }
}

/// The seed of one batch's augmentation: the run's seed mixed with the batch's images (their
/// positions in the set, in batch order), which the epoch's seeded order fixes.
pub fn batch_seed(seed: u64, images: impl IntoIterator<Item = usize>) -> u64 {
    images
        .into_iter()
        .fold(seed ^ 0xCBF2_9CE4_8422_2325, |hash, index| {
            (hash ^ index as u64).wrapping_mul(0x0000_0100_0000_01B3)
        })
}

#[cfg(test)]
mod tests {
    use burn::backend::NdArray;

    use super::*;

    fn images() -> Tensor<NdArray, 4> {
        let values: Vec<f32> = (0..2 * 2 * 3 * 4).map(|v| v as f32 + 1.0).collect();
        Tensor::from_data(TensorData::new(values, [2, 2, 3, 4]), &Default::default())
    }

    #[test]
    fn off_changes_nothing_and_flips_mirror_rows() {
        let x = images();
        let same = Augment::default().apply(x.clone(), 1);
        assert_eq!(same.into_data(), x.clone().into_data());
        let flip = Augment { flip: true, pad: 0 };
        for seed in 0..8 {
            let out = flip.apply(x.clone(), seed);
            for i in 0..2 {
                let image = out.clone().slice(i..i + 1);
                let original = x.clone().slice(i..i + 1);
                let mirrored = original.clone().flip([3]);
                let kept = image.clone().equal(original).all().into_scalar();
                let flipped = image.equal(mirrored).all().into_scalar();
                assert!(kept || flipped, "image {i}, seed {seed}");
            }
        }
        // Seeded: the same batch seed gives the same batch.
        let a = flip.apply(x.clone(), 3).into_data();
        assert_eq!(a, flip.apply(x, 3).into_data());
    }

    #[test]
    fn crops_are_shifted_windows_of_the_padded_image() {
        let x = images();
        let crop = Augment {
            flip: false,
            pad: 1,
        };
        let out: Vec<f32> = crop.apply(x.clone(), 5).into_data().to_vec().unwrap();
        let input: Vec<f32> = x.into_data().to_vec().unwrap();
        for image in 0..2 {
            // Each output plane is the input plane moved by the same (dy, dx) in -1..=1,
            // zeros where it reads the padding.
            let plane = |data: &[f32], c: usize| -> Vec<f32> {
                let start = (image * 2 + c) * 12;
                data[start..start + 12].to_vec()
            };
            let found = (-1i64..=1)
                .flat_map(|dy| (-1i64..=1).map(move |dx| (dy, dx)))
                .find(|&(dy, dx)| {
                    (0..2).all(|c| {
                        let (o, i) = (plane(&out, c), plane(&input, c));
                        (0..3i64).all(|y| {
                            (0..4i64).all(|x| {
                                let (sy, sx) = (y + dy, x + dx);
                                let expected = if (0..3).contains(&sy) && (0..4).contains(&sx) {
                                    i[(sy * 4 + sx) as usize]
                                } else {
                                    0.0
                                };
                                o[(y * 4 + x) as usize] == expected
                            })
                        })
                    })
                });
            assert!(found.is_some(), "image {image}: {out:?}");
        }
    }
}
