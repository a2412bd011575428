//! The shape of one conv·ReLU·pool block, which the CIFAR-shaped network is listed in and
//! the block benchmark times.

use cubenet_kernels::ConvOptions2d;

/// A conv·bias·ReLU·2×2-max-pool block: the shape of its input (`[channels, height,
/// width]`), its filters, and its square kernel and zero padding (stride 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockShape {
    pub input: [usize; 3],
    pub filters: usize,
    pub kernel: usize,
    pub padding: usize,
}

impl BlockShape {
    /// The shape of the block's pooled output, `[channels, height, width]`.
    pub fn output(&self) -> [usize; 3] {
        let [_, h, w] = self.input;
        let [conv_h, conv_w] = self.conv().output_size([h, w], [self.kernel, self.kernel]);
        [self.filters, conv_h / 2, conv_w / 2]
    }

    pub(crate) fn conv(&self) -> ConvOptions2d {
        ConvOptions2d::new([1, 1], [self.padding; 2])
    }
}
