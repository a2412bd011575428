//! Digit images to predict: a PNG of one 28×28 digit, or an IDX file of many.

use std::io::BufReader;
use std::path::Path;

use super::{DataError, IMAGE_PIXELS, IMAGE_SIDE, read_idx_file};

/// The digits in `path`, each 784 row-major pixels with ink high (as in MNIST): a `.png`
/// holds one, anything else is read as an IDX image file `[n, 28, 28]` (raw or gzip).
/// `invert` flips dark-on-light drawings to MNIST's light-on-dark.
pub fn read_digits(path: &Path, invert: bool) -> Result<Vec<[u8; IMAGE_PIXELS]>, DataError> {
    let is_png = path
        .extension()
        .is_some_and(|ext| ext.eq_ignore_ascii_case("png"));
    let mut digits = if is_png {
        vec![read_png_digit(path)?]
    } else {
        let idx = read_idx_file(path)?;
        if idx.dims.len() != 3 || idx.dims[1..] != [IMAGE_SIDE, IMAGE_SIDE] {
            return Err(DataError::Image {
                path: path.to_path_buf(),
                what: format!(
                    "expected IDX images [n, 28, 28], got dimensions {:?}",
                    idx.dims
                ),
            });
        }
        idx.data
            .chunks_exact(IMAGE_PIXELS)
            .map(|image| image.try_into().expect("chunks of one image"))
            .collect()
    };
    if invert {
        for pixel in digits.iter_mut().flatten() {
            *pixel = 255 - *pixel;
        }
    }
    Ok(digits)
}

/// A 28×28 PNG (gray, gray+alpha, RGB or RGBA, any bit depth) as gray pixels.
fn read_png_digit(path: &Path) -> Result<[u8; IMAGE_PIXELS], DataError> {
    let file = std::fs::File::open(path).map_err(|source| DataError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let invalid = |what: String| DataError::Image {
        path: path.to_path_buf(),
        what,
    };
    let mut decoder = png::Decoder::new(BufReader::new(file));
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder
        .read_info()
        .map_err(|e| invalid(format!("not a readable PNG: {e}")))?;
    let size = reader
        .output_buffer_size()
        .ok_or_else(|| invalid("the PNG is too large".into()))?;
    let mut buffer = vec![0; size];
    let frame = reader
        .next_frame(&mut buffer)
        .map_err(|e| invalid(format!("not a readable PNG: {e}")))?;
    if (frame.width, frame.height) != (IMAGE_SIDE as u32, IMAGE_SIDE as u32) {
        return Err(invalid(format!(
            "digits are 28×28 pixels, this image is {}×{}",
            frame.width, frame.height
        )));
    }
    let channels = frame.color_type.samples();
    let mut pixels = [0u8; IMAGE_PIXELS];
    for (pixel, sample) in pixels
        .iter_mut()
        .zip(buffer[..frame.buffer_size()].chunks_exact(channels))
    {
        *pixel = match sample {
            [gray] | [gray, _] => *gray,
            [r, g, b, ..] => {
                ((299 * u32::from(*r) + 587 * u32::from(*g) + 114 * u32::from(*b)) / 1000) as u8
            }
            _ => unreachable!("PNG pixels have 1 to 4 samples"),
        };
    }
    Ok(pixels)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_png(path: &Path, width: u32, color: png::ColorType, data: &[u8]) {
        let file = std::fs::File::create(path).unwrap();
        let mut encoder = png::Encoder::new(file, width, width);
        encoder.set_color(color);
        encoder.set_depth(png::BitDepth::Eight);
        encoder
            .write_header()
            .unwrap()
            .write_image_data(data)
            .unwrap();
    }

    #[test]
    fn gray_and_rgb_pngs_read_as_gray_pixels() {
        let dir = tempfile::tempdir().unwrap();
        let gray: Vec<u8> = (0..IMAGE_PIXELS).map(|i| (i % 256) as u8).collect();
        let path = dir.path().join("gray.png");
        write_png(&path, 28, png::ColorType::Grayscale, &gray);
        assert_eq!(read_digits(&path, false).unwrap()[0].to_vec(), gray);
        let inverted: Vec<u8> = gray.iter().map(|p| 255 - p).collect();
        assert_eq!(read_digits(&path, true).unwrap()[0].to_vec(), inverted);

        let rgb: Vec<u8> = gray.iter().flat_map(|&p| [p, p, p]).collect();
        let path = dir.path().join("rgb.png");
        write_png(&path, 28, png::ColorType::Rgb, &rgb);
        assert_eq!(read_digits(&path, false).unwrap()[0].to_vec(), gray);
    }

    #[test]
    fn wrong_sizes_and_garbage_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.png");
        write_png(&path, 32, png::ColorType::Grayscale, &[0; 32 * 32]);
        let err = read_digits(&path, false).unwrap_err().to_string();
        assert!(err.contains("28×28") && err.contains("32×32"), "{err}");
        let path = dir.path().join("junk.png");
        std::fs::write(&path, b"not a png").unwrap();
        let err = read_digits(&path, false).unwrap_err().to_string();
        assert!(err.contains("not a readable PNG"), "{err}");
    }
}
