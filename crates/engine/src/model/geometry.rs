//! Output sizes of convolution and pooling layers, checked at construction so that an
//! impossible network is refused with the layer's name instead of failing inside a kernel.

use cubenet_kernels::window_output_size;

use super::ModelError;

/// Height and width.
pub type Size2 = [usize; 2];

/// Output size of a convolution (dilation 1) over an `input`-sized map.
pub fn conv_output(
    layer: &str,
    input: Size2,
    kernel: Size2,
    stride: Size2,
    padding: Size2,
) -> Result<Size2, ModelError> {
    check_nonzero(layer, "kernel size", kernel)?;
    check_nonzero(layer, "stride", stride)?;
    window_output_size(input, kernel, stride, padding).ok_or_else(|| ModelError::WindowTooLarge {
        layer: layer.into(),
        window: kernel,
        input: [input[0] + 2 * padding[0], input[1] + 2 * padding[1]],
    })
}

/// Output size of a max-pool without padding. With `exact`, the windows must tile the
/// input with nothing left over (28→26→13 does, 27 with a 2×2 window does not).
pub fn pool_output(
    layer: &str,
    input: Size2,
    window: Size2,
    stride: Size2,
    exact: bool,
) -> Result<Size2, ModelError> {
    let output = conv_output(layer, input, window, stride, [0, 0])?;
    let covered = [
        (output[0] - 1) * stride[0] + window[0],
        (output[1] - 1) * stride[1] + window[1],
    ];
    if exact && covered != input {
        return Err(ModelError::InexactTiling {
            layer: layer.into(),
            input,
            window,
            stride,
        });
    }
    Ok(output)
}

/// Refuses a zero in a size that must be positive.
pub fn check_nonzero<const N: usize>(
    layer: &str,
    what: &'static str,
    values: [usize; N],
) -> Result<(), ModelError> {
    if values.contains(&0) {
        return Err(ModelError::Zero {
            layer: layer.into(),
            what,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_conv_cnn_geometry() {
        let conv = conv_output("conv", [28, 28], [3, 3], [1, 1], [0, 0]).unwrap();
        assert_eq!(conv, [26, 26]);
        assert_eq!(
            pool_output("pool", conv, [2, 2], [2, 2], true).unwrap(),
            [13, 13]
        );
    }

    #[test]
    fn padding_and_stride() {
        assert_eq!(
            conv_output("c", [28, 28], [5, 5], [1, 1], [2, 2]).unwrap(),
            [28, 28]
        );
        assert_eq!(
            conv_output("c", [7, 9], [3, 3], [2, 2], [1, 0]).unwrap(),
            [4, 4]
        );
    }

    #[test]
    fn window_larger_than_input_names_the_layer() {
        let err = conv_output("conv2", [4, 4], [5, 5], [1, 1], [0, 0]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "layer `conv2`: the 5x5 window is larger than its 4x4 (padded) input"
        );
    }

    #[test]
    fn inexact_tiling_is_refused_only_when_asked() {
        let err = pool_output("pool1", [27, 27], [2, 2], [2, 2], true).unwrap_err();
        assert!(err.to_string().contains("layer `pool1`"), "{err}");
        assert_eq!(
            pool_output("pool1", [27, 27], [2, 2], [2, 2], false).unwrap(),
            [13, 13]
        );
    }

    #[test]
    fn zero_sizes_are_refused() {
        let err = conv_output("conv1", [28, 28], [3, 3], [0, 1], [0, 0]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "layer `conv1`: stride must be positive, got a zero"
        );
    }
}
