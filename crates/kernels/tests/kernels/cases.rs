//! Seeded random problem shapes covering the ranges the kernels must handle.

use cubenet_kernels::{ConvOptions2d, PoolOptions2d};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// Cases per op.
pub const CASES: u64 = 200;
/// Cap on multiply-adds per conv case, so 200 cases stay quick on a software GPU.
const MAX_MACS: usize = 1_000_000;

/// A convolution problem.
#[derive(Debug, Clone)]
pub struct ConvCase {
    pub seed: u64,
    pub batch: usize,
    pub c_in: usize,
    pub c_out: usize,
    pub size: [usize; 2],
    pub kernel: [usize; 2],
    pub options: ConvOptions2d,
    pub bias: bool,
    /// Whether the input needs a gradient (false for a first layer fed with data).
    pub x_grad: bool,
}

impl ConvCase {
    /// Case `index` of the seeded sequence `base`: batch 1–64, C_in 1–8, C_out 1–70, H and W
    /// 5–40, kernel 1–5, stride 1–2, padding 0–2, with batch 1, input channel counts past
    /// the input gradient's block of 8 (9, 13, 17) and the GEMM's range (8–40, and up to
    /// 256), filter counts that are not multiples of 32 or past the GEMM's 64-filter tile
    /// (70, 128, 256) and no padding (the kernels' unchecked path) forced in regularly.
    pub fn random(base: u64, index: u64) -> Self {
        let seed = base.wrapping_mul(1_000_003).wrapping_add(index);
        let mut rng = StdRng::seed_from_u64(seed);
        let mut case = Self {
            seed,
            batch: if index.is_multiple_of(10) {
                1
            } else {
                rng.random_range(1..=64)
            },
            c_in: match index % 5 {
                1 => [9, 13, 17, 32, 64, 128, 256][rng.random_range(0..7)],
                3 => rng.random_range(8..=40),
                _ => rng.random_range(1..=8),
            },
            c_out: if index.is_multiple_of(7) {
                [33, 65, 70, 128, 256][rng.random_range(0..5)]
            } else {
                rng.random_range(1..=70)
            },
            size: [rng.random_range(5..=40), rng.random_range(5..=40)],
            kernel: [rng.random_range(1..=5), rng.random_range(1..=5)],
            options: ConvOptions2d::new(
                [rng.random_range(1..=2), rng.random_range(1..=2)],
                if index % 4 == 2 {
                    [0, 0]
                } else {
                    [rng.random_range(0..=2), rng.random_range(0..=2)]
                },
            ),
            bias: index % 4 != 3,
            x_grad: index % 3 != 2,
        };
        // Shrink batch, then filters, then the map until the case is cheap enough.
        while case.macs() > MAX_MACS {
            if case.batch > 1 && rng.random_bool(0.6) {
                case.batch = case.batch.div_ceil(2);
            } else if case.c_out > 8 && rng.random_bool(0.5) {
                case.c_out -= 7;
            } else if case.size[0].max(case.size[1]) > 8 {
                case.size = case.size.map(|s| (s * 3 / 4).max(5));
            } else {
                case.batch = case.batch.div_ceil(2);
            }
        }
        case
    }

    /// A layer whose implicit GEMM is too long for one wave of the short tile on GPUs of up
    /// to 270 SMs (12,960 quads × 128 filters: 810 cubes of 128 × 64, more than three an
    /// SM), so that a GPU runs the wide tile rather than the short one its small cases get;
    /// in bf16, on GPUs of up to 135 SMs, the tall channels-last tile (406 cubes of 256 × 64)
    /// in the forward.
    pub fn large_grid() -> Self {
        Self::layer(10, [16, 128], 72, 3, 1)
    }

    /// LeNet's second layer (whose input gradient has 32 columns) and the CIFAR-shaped
    /// network's second and third, on small maps to keep the software GPU quick.
    pub fn network_layers() -> [Self; 3] {
        [
            Self::layer(2, [32, 64], 14, 5, 0),
            Self::layer(1, [64, 128], 8, 3, 1),
            Self::layer(1, [128, 256], 4, 3, 1),
        ]
    }

    /// The single-conv CNN's layer: conv 3x3 (1 → `filters`) with bias over `batch` 28x28 images.
    pub fn single_conv(batch: usize, filters: usize) -> Self {
        Self {
            x_grad: false,
            ..Self::layer(batch, [1, filters], 28, 3, 0)
        }
    }

    /// A network's conv layer: `channels` = [C_in, C_out], square `kernel`, stride 1,
    /// `padding`, with bias, over `batch` maps of `size`×`size`; its input needs a gradient.
    pub fn layer(
        batch: usize,
        channels: [usize; 2],
        size: usize,
        kernel: usize,
        padding: usize,
    ) -> Self {
        Self {
            seed: (batch * 1_000_000 + channels[0] * 1000 + channels[1]) as u64,
            batch,
            c_in: channels[0],
            c_out: channels[1],
            size: [size, size],
            kernel: [kernel, kernel],
            options: ConvOptions2d::new([1, 1], [padding, padding]),
            bias: true,
            x_grad: true,
        }
    }

    pub fn x_shape(&self) -> [usize; 4] {
        [self.batch, self.c_in, self.size[0], self.size[1]]
    }

    pub fn weight_shape(&self) -> [usize; 4] {
        [self.c_out, self.c_in, self.kernel[0], self.kernel[1]]
    }

    pub fn output_size(&self) -> [usize; 2] {
        self.options.output_size(self.size, self.kernel)
    }

    fn macs(&self) -> usize {
        let [oh, ow] = self.output_size();
        self.batch * self.c_out * oh * ow * self.c_in * self.kernel[0] * self.kernel[1]
    }
}

/// A pooling window that fits an `input`-sized map: window 1–4, stride 1–3, padding up to
/// half the window (none in half the cases); about half the cases tile the input exactly.
/// A quarter of the cases are the networks' own 2×2 stride-2 unpadded pool (the CPU
/// kernels' tiled path), over odd and even maps alike.
pub fn random_pool(rng: &mut StdRng, input: [usize; 2]) -> PoolOptions2d {
    if input.iter().all(|&side| side >= 2) && rng.random_bool(0.25) {
        return PoolOptions2d::new([2, 2], [2, 2], [0, 0]);
    }
    let kernel = input.map(|side| rng.random_range(1..=4.min(side)));
    let stride = kernel.map(|k| rng.random_range(1..=3.min(k + 1)));
    let padding = if rng.random_bool(0.5) {
        [0, 0]
    } else {
        kernel.map(|k| rng.random_range(0..=k / 2))
    };
    PoolOptions2d::new(kernel, stride, padding)
}

/// `len` values uniform in [−1, 1), never all zero.
pub fn values(rng: &mut StdRng, len: usize) -> Vec<f32> {
    (0..len).map(|_| rng.random_range(-1.0..1.0)).collect()
}
