//! On-device augmentation of training batches: horizontal flips, random crops of the
//! zero-padded images and cutout squares, drawn from a generator seeded by the run's seed and
//! the batch's images, so a batch is augmented the same way whenever it is built (also after
//! a resume); and the label smoothing their loss applies.

use burn::prelude::*;
use burn::tensor::ops::IntElem;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

/// Which augmentations a run's training batches get; all off by default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Augment {
    /// Mirror each image left-right with probability ½.
    pub flip: bool,
    /// Pad each side with this many zeros (the channel mean, after normalization), then
    /// crop a random window of the original size; 0 crops nothing.
    pub pad: usize,
    /// Zero a square of this side (clipped at the borders) centred on a random pixel of
    /// each image, after the crop (DeVries & Taylor's cutout); 0 cuts nothing.
    #[serde(default)]
    pub cutout: usize,
    /// Label smoothing ε of the training loss: each target becomes `1 − ε` on its class
    /// plus `ε / classes` on every class, as PyTorch's `label_smoothing`; 0 keeps one-hot.
    #[serde(default)]
    pub label_smoothing: f32,
}

impl Augment {
    /// Whether it changes nothing.
    pub fn is_off(&self) -> bool {
        !self.changes_images() && self.label_smoothing == 0.0
    }

    /// Whether it changes the pixels (rather than only the loss).
    pub fn changes_images(&self) -> bool {
        self.flip || self.pad > 0 || self.cutout > 0
    }

    /// `images` (`[n, c, h, w]`, normalized) augmented on their device, with draws seeded by
    /// `seed`.
    pub fn apply<B: Backend>(&self, images: Tensor<B, 4>, seed: u64) -> Tensor<B, 4> {
        let mut rng = StdRng::seed_from_u64(seed);
        let [n, c, h, w] = images.dims();
        let device = images.device();
        let mut images = images;
        if self.pad > 0 {
            // Output pixel (y, x) of image i reads input pixel (y + dy_i, x + dx_i), and zero
            // (the padding) where that falls outside the image. Only the shifts are drawn
            // here, as the padded window's corner (0..=2·pad, rows then columns); the index
            // and the mask are built on the device. Padding the batch first would cost a
            // host-filled tensor of the padded size: Burn's `pad` starts from `Tensor::full`,
            // which the autodiff backend fills on the host and uploads every step, costing more
            // host time than the step's kernels take.
            let (pad, centred) = (self.pad, self.pad as i64);
            let (rows, cols): (Vec<i64>, Vec<i64>) = (0..n)
                .map(|_| {
                    let dy = rng.random_range(0..=2 * pad) as i64 - centred;
                    let dx = rng.random_range(0..=2 * pad) as i64 - centred;
                    (dy, dx)
                })
                .unzip();
            let (pixel_y, pixel_x) = pixel_positions::<B>(h, w, &device);
            let y = per_image::<B>(rows, &device) + pixel_y;
            let x = per_image::<B>(cols, &device) + pixel_x;
            let (h, w) = (h as i64, w as i64);
            let outside = y
                .clone()
                .lower_elem(0)
                .bool_or(y.clone().greater_equal_elem(h))
                .bool_or(x.clone().lower_elem(0))
                .bool_or(x.clone().greater_equal_elem(w));
            let index = y.clamp(0, h - 1).mul_scalar(w) + x.clamp(0, w - 1);
            let planes = [n, c, (h * w) as usize];
            images = images
                .reshape(planes)
                .gather(2, index.reshape([n, 1, (h * w) as usize]).expand(planes))
                .mask_fill(
                    outside.reshape([n, 1, (h * w) as usize]).expand(planes),
                    0.0,
                )
                .reshape([n, c, h as usize, w as usize]);
        }
        if self.flip {
            let flips: Vec<bool> = (0..n).map(|_| rng.random_bool(0.5)).collect();
            let mask =
                Tensor::<B, 4, Bool>::from_data(TensorData::new(flips, [n, 1, 1, 1]), &device)
                    .expand([n, c, h, w]);
            images = images.clone().mask_where(mask, images.flip([3]));
        }
        if self.cutout > 0 {
            // Image i loses rows top_i..top_i + cutout and columns left_i..left_i + cutout,
            // a square centred on a uniformly drawn pixel; only the corners are drawn here.
            let before = (self.cutout / 2) as i64;
            let (tops, lefts): (Vec<i64>, Vec<i64>) = (0..n)
                .map(|_| {
                    let y = rng.random_range(0..h) as i64;
                    let x = rng.random_range(0..w) as i64;
                    (y - before, x - before)
                })
                .unzip();
            let side = self.cutout as i64;
            let (pixel_y, pixel_x) = pixel_positions::<B>(h, w, &device);
            let y = pixel_y - per_image::<B>(tops, &device);
            let x = pixel_x - per_image::<B>(lefts, &device);
            let inside = y
                .clone()
                .greater_equal_elem(0)
                .bool_and(y.lower_elem(side))
                .bool_and(x.clone().greater_equal_elem(0))
                .bool_and(x.lower_elem(side));
            let planes = [n, c, h * w];
            images = images
                .reshape(planes)
                .mask_fill(inside.reshape([n, 1, h * w]).expand(planes), 0.0)
                .reshape([n, c, h, w]);
        }
        images
    }
}

/// One value per image, as an `[n, 1]` tensor on `device` to broadcast over its pixels.
fn per_image<B: Backend>(values: Vec<i64>, device: &B::Device) -> Tensor<B, 2, Int> {
    let n = values.len();
    Tensor::<B, 1, Int>::from_data(TensorData::new(values, [n]).convert::<IntElem<B>>(), device)
        .reshape([n, 1])
}

/// Each pixel's row and column in an `h` × `w` image, row-major, as `[1, h · w]` tensors.
fn pixel_positions<B: Backend>(
    h: usize,
    w: usize,
    device: &B::Device,
) -> (Tensor<B, 2, Int>, Tensor<B, 2, Int>) {
    let pixel = Tensor::<B, 1, Int>::arange(0..(h * w) as i64, device).reshape([1, h * w]);
    (
        pixel.clone().div_scalar(w as i64),
        pixel.remainder_scalar(w as i64),
    )
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
        let flip = Augment {
            flip: true,
            ..Augment::default()
        };
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

    /// The shift (dy, dx) in -pad..=pad that moves `image`'s planes of the 2 × 2 × 3 × 4
    /// `input` onto `out`'s, zeros where it reads the padding; none if no shift does.
    fn shift_of(out: &[f32], input: &[f32], image: usize, pad: i64) -> Option<(i64, i64)> {
        let plane = |data: &[f32], c: usize| data[(image * 2 + c) * 12..][..12].to_vec();
        let moves = |dy: i64, dx: i64, c: usize| {
            let (o, i) = (plane(out, c), plane(input, c));
            (0..3i64).all(|y| {
                (0..4i64).all(|x| {
                    let (sy, sx) = (y + dy, x + dx);
                    let inside = (0..3).contains(&sy) && (0..4).contains(&sx);
                    let expected = if inside {
                        i[(sy * 4 + sx) as usize]
                    } else {
                        0.0
                    };
                    o[(y * 4 + x) as usize] == expected
                })
            })
        };
        (-pad..=pad)
            .flat_map(|dy| (-pad..=pad).map(move |dx| (dy, dx)))
            .find(|&(dy, dx)| (0..2).all(|c| moves(dy, dx, c)))
    }

    #[test]
    fn crops_are_shifted_windows_of_the_padded_image() {
        let x = images();
        let input: Vec<f32> = x.clone().into_data().to_vec().unwrap();
        // Pads up to and past the images' 3 rows, so that some windows hold no pixel.
        for pad in 1..=3 {
            let crop = Augment {
                pad,
                ..Augment::default()
            };
            let mut shifts = std::collections::BTreeSet::new();
            for seed in 0..6 {
                let out: Vec<f32> = crop.apply(x.clone(), seed).into_data().to_vec().unwrap();
                for image in 0..2 {
                    let shift = shift_of(&out, &input, image, pad as i64);
                    shifts.insert(shift.unwrap_or_else(|| {
                        panic!("pad {pad}, seed {seed}, image {image}: {out:?}")
                    }));
                }
            }
            assert!(shifts.len() > 2, "pad {pad}: the draws vary ({shifts:?})");
        }
    }

    #[test]
    fn cutout_zeros_one_clipped_square_around_a_drawn_pixel() {
        // Images of 5 x 6 pixels valued 1 and up, so that every zero is a cut pixel.
        let (n, c, h, w) = (16, 2, 5, 6);
        let values: Vec<f32> = (0..n * c * h * w).map(|v| v as f32 + 1.0).collect();
        let x = Tensor::<NdArray, 4>::from_data(
            TensorData::new(values.clone(), [n, c, h, w]),
            &Default::default(),
        );
        for side in [1, 2, 3, 4] {
            let cut = Augment {
                cutout: side,
                ..Augment::default()
            };
            let out: Vec<f32> = cut
                .apply(x.clone(), side as u64)
                .into_data()
                .to_vec()
                .unwrap();
            let mut clipped = false;
            for image in 0..n {
                let at = |ch: usize, y: usize, x: usize| ((image * c + ch) * h + y) * w + x;
                let zeros: Vec<(usize, usize)> = (0..h)
                    .flat_map(|y| (0..w).map(move |x| (y, x)))
                    .filter(|&(y, x)| out[at(0, y, x)] == 0.0)
                    .collect();
                // Some centre (cy, cx) explains exactly the zeros, the same on each channel,
                // and every other pixel keeps its value.
                let explained =
                    (0..h)
                        .flat_map(|cy| (0..w).map(move |cx| (cy, cx)))
                        .any(|(cy, cx)| {
                            let (top, left) =
                                (cy as i64 - (side / 2) as i64, cx as i64 - (side / 2) as i64);
                            let cut_here = |y: usize, x: usize| {
                                (top..top + side as i64).contains(&(y as i64))
                                    && (left..left + side as i64).contains(&(x as i64))
                            };
                            (0..h).all(|y| {
                                (0..w).all(|x| {
                                    (0..c).all(|ch| match cut_here(y, x) {
                                        true => out[at(ch, y, x)] == 0.0,
                                        false => out[at(ch, y, x)] == values[at(ch, y, x)],
                                    })
                                })
                            })
                        });
                assert!(explained, "side {side}, image {image}: zeros at {zeros:?}");
                clipped |= zeros.len() < side * side;
            }
            if side > 1 {
                assert!(clipped, "side {side}: some square is clipped by a border");
            }
        }
    }
}
