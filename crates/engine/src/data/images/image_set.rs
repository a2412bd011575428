//! One split of a labelled image dataset, decoded into memory, and the per-channel
//! statistics its pixels are normalized with.

use serde::{Deserialize, Serialize};

/// The size of every image of a set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageShape {
    /// 1 (gray) or 3 (red, green, blue).
    pub channels: usize,
    pub height: usize,
    pub width: usize,
}

impl ImageShape {
    /// Pixels in one channel plane.
    pub fn plane(&self) -> usize {
        self.height * self.width
    }

    /// Bytes in one image: every channel plane.
    pub fn bytes(&self) -> usize {
        self.channels * self.plane()
    }
}

/// Labelled images of one shape, each stored channel by channel (CHW), one byte a pixel.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageSet {
    pixels: Vec<u8>,
    labels: Vec<u32>,
    shape: ImageShape,
    classes: Vec<String>,
}

impl ImageSet {
    /// Images `pixels` (`labels.len()` images of `shape`, CHW) whose labels index
    /// `classes`.
    ///
    /// # Panics
    /// If the pixel count does not match, or a label has no class: the readers build only
    /// consistent sets, so either is a bug.
    pub fn new(pixels: Vec<u8>, labels: Vec<u32>, shape: ImageShape, classes: Vec<String>) -> Self {
        assert_eq!(
            pixels.len(),
            labels.len() * shape.bytes(),
            "{} labels of {shape:?} images",
            labels.len()
        );
        assert!(
            labels.iter().all(|&label| (label as usize) < classes.len()),
            "a label outside the {} classes",
            classes.len()
        );
        Self {
            pixels,
            labels,
            shape,
            classes,
        }
    }

    /// Number of images.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether the set holds no image.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// The pixels of image `index`, channel by channel, each channel row-major.
    pub fn image(&self, index: usize) -> &[u8] {
        let bytes = self.shape.bytes();
        &self.pixels[index * bytes..(index + 1) * bytes]
    }

    /// The class of image `index`, an index into [`classes`](Self::classes).
    pub fn label(&self, index: usize) -> u32 {
        self.labels[index]
    }

    /// Every image's pixels, one after another.
    pub fn pixels(&self) -> &[u8] {
        &self.pixels
    }

    /// Every image's label, in image order.
    pub fn labels(&self) -> &[u32] {
        &self.labels
    }

    pub fn shape(&self) -> ImageShape {
        self.shape
    }

    /// Class names, in label order.
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    /// Mean and standard deviation of each channel over the images at `indices` (the
    /// training split), in pixel units 0..1. Sums are exact integers, so the result does
    /// not depend on the order or number of images.
    pub fn channel_stats(&self, indices: &[usize]) -> ChannelStats {
        let plane = self.shape.plane();
        let mut sums = vec![(0u64, 0u64); self.shape.channels];
        for &index in indices {
            for (channel, (sum, squares)) in self.image(index).chunks_exact(plane).zip(&mut sums) {
                for &pixel in channel {
                    *sum += u64::from(pixel);
                    *squares += u64::from(pixel) * u64::from(pixel);
                }
            }
        }
        let count = (indices.len() * plane) as f64;
        let (mean, std) = sums
            .into_iter()
            .map(|(sum, squares)| {
                if count == 0.0 {
                    return (0.0, 1.0);
                }
                let mean = sum as f64 / count;
                let variance = (squares as f64 / count - mean * mean).max(0.0);
                (mean / 255.0, variance.sqrt() / 255.0)
            })
            .map(|(mean, std)| (mean as f32, if std > 0.0 { std as f32 } else { 1.0 }))
            .unzip();
        ChannelStats { mean, std }
    }
}

/// Per-channel mean and standard deviation of pixels scaled to 0..1; saved with a model so
/// that prediction normalizes its inputs as training did. A channel that never varies has
/// standard deviation 1, so normalizing only centers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelStats {
    pub mean: Vec<f32>,
    pub std: Vec<f32>,
}

impl ChannelStats {
    /// Statistics that leave pixels at their 0..1 scale: mean 0, standard deviation 1.
    pub fn unit(channels: usize) -> Self {
        Self {
            mean: vec![0.0; channels],
            std: vec![1.0; channels],
        }
    }

    /// The pixels of one CHW image, scaled to 0..1 and normalized channel by channel.
    pub fn normalize<'a>(&'a self, image: &'a [u8]) -> impl Iterator<Item = f32> + 'a {
        let plane = image.len() / self.mean.len();
        image
            .chunks_exact(plane)
            .zip(self.mean.iter().zip(&self.std))
            .flat_map(|(channel, (&mean, &std))| {
                channel
                    .iter()
                    .map(move |&pixel| (f32::from(pixel) / 255.0 - mean) / std)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three 2×2 RGB images with labels 0, 1, 0.
    fn rgb_set() -> ImageSet {
        let pixels: Vec<u8> = (0..3 * 12).map(|i| (i * 37 % 256) as u8).collect();
        let shape = ImageShape {
            channels: 3,
            height: 2,
            width: 2,
        };
        ImageSet::new(pixels, vec![0, 1, 0], shape, vec!["a".into(), "b".into()])
    }

    #[test]
    fn images_are_cut_by_shape() {
        let set = rgb_set();
        assert_eq!(set.len(), 3);
        assert_eq!(set.image(1), &set.pixels()[12..24]);
        assert_eq!(set.label(1), 1);
        assert_eq!(set.classes(), ["a", "b"]);
    }

    #[test]
    fn channel_stats_match_a_float64_computation() {
        let set = rgb_set();
        let indices = [2, 0];
        let stats = set.channel_stats(&indices);
        for channel in 0..3 {
            let values: Vec<f64> = indices
                .iter()
                .flat_map(|&i| &set.image(i)[channel * 4..(channel + 1) * 4])
                .map(|&p| f64::from(p) / 255.0)
                .collect();
            let mean = values.iter().sum::<f64>() / values.len() as f64;
            let variance =
                values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / values.len() as f64;
            assert!((f64::from(stats.mean[channel]) - mean).abs() < 1e-6);
            assert!((f64::from(stats.std[channel]) - variance.sqrt()).abs() < 1e-6);
        }
        let normalized: Vec<f32> = stats.normalize(set.image(0)).collect();
        let first = (f32::from(set.image(0)[0]) / 255.0 - stats.mean[0]) / stats.std[0];
        let last = (f32::from(set.image(0)[11]) / 255.0 - stats.mean[2]) / stats.std[2];
        assert_eq!(
            (normalized.len(), normalized[0], normalized[11]),
            (12, first, last)
        );
    }

    #[test]
    fn constant_channels_keep_a_unit_std() {
        let shape = ImageShape {
            channels: 1,
            height: 1,
            width: 2,
        };
        let set = ImageSet::new(vec![51, 51], vec![0], shape, vec!["x".into()]);
        let stats = set.channel_stats(&[0]);
        assert_eq!((stats.mean[0], stats.std[0]), (0.2, 1.0));
    }
}
