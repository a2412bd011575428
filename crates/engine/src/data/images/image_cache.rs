//! A decoded image folder saved as one file, so that the next run reads raw pixels instead
//! of decoding thousands of PNGs or JPEGs again.
//!
//! Layout: the magic bytes, a little-endian `u32` format version, a `u32` header length, a
//! JSON header (fingerprint, shape, classes, image count), then every image's pixels and
//! every label as a little-endian `u32`, and last the CRC-32 (IEEE) of all that as a
//! little-endian `u32`. The fingerprint is the caller's digest of what the pixels were
//! decoded from; a cache whose fingerprint differs, or that is damaged in any way (one
//! flipped pixel too, which the checksum finds), is not used, and the caller decodes the
//! images again.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::atomic_file::{WriteError, write_atomically_with};
use crate::data::{ImageSet, ImageShape};

const MAGIC: &[u8; 8] = b"cnimages";
/// Bumped whenever the layout or the decoding changes, which makes older caches stale.
pub(crate) const VERSION: u32 = 2;

#[derive(Serialize, Deserialize)]
struct Header {
    fingerprint: String,
    shape: ImageShape,
    classes: Vec<String>,
    len: usize,
}

/// The images cached at `path` if it holds a whole cache with this `fingerprint`.
pub(crate) fn read_cache(path: &Path, fingerprint: &str) -> Option<ImageSet> {
    let bytes = std::fs::read(path).ok()?;
    let (checked, checksum) = bytes.split_last_chunk::<4>()?;
    if crc32fast::hash(checked) != u32::from_le_bytes(*checksum) {
        return None;
    }
    let rest = checked.strip_prefix(MAGIC)?;
    let (version, rest) = take_u32(rest)?;
    let (header_len, rest) = take_u32(rest)?;
    let (header, body) = rest.split_at_checked(header_len as usize)?;
    let header: Header = serde_json::from_slice(header).ok()?;
    if version != VERSION || header.fingerprint != fingerprint {
        return None;
    }
    let ImageShape {
        channels,
        height,
        width,
    } = header.shape;
    let pixel_bytes = [channels, height, width]
        .into_iter()
        .try_fold(header.len, usize::checked_mul)?;
    let (pixels, labels) = body.split_at_checked(pixel_bytes)?;
    if labels.len() != header.len.checked_mul(4)? {
        return None;
    }
    let labels: Vec<u32> = labels
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    if labels.iter().any(|&l| l as usize >= header.classes.len()) {
        return None;
    }
    Some(ImageSet::new(
        pixels.to_vec(),
        labels,
        header.shape,
        header.classes,
    ))
}

/// Saves `images` at `path` under `fingerprint`, whole or not at all.
pub(crate) fn write_cache(
    path: &Path,
    fingerprint: &str,
    images: &ImageSet,
) -> Result<(), WriteError> {
    let header = serde_json::to_vec(&Header {
        fingerprint: fingerprint.to_owned(),
        shape: images.shape(),
        classes: images.classes().to_vec(),
        len: images.len(),
    })
    .expect("the header is plain data");
    let labels: Vec<u8> = images
        .labels()
        .iter()
        .flat_map(|label| label.to_le_bytes())
        .collect();
    write_atomically_with(path, |partial| {
        let mut out = Checksummed {
            out: BufWriter::new(File::create(partial)?),
            checksum: crc32fast::Hasher::new(),
        };
        out.write_all(MAGIC)?;
        out.write_all(&VERSION.to_le_bytes())?;
        out.write_all(
            &u32::try_from(header.len())
                .map_err(io::Error::other)?
                .to_le_bytes(),
        )?;
        out.write_all(&header)?;
        out.write_all(images.pixels())?;
        out.write_all(&labels)?;
        let Checksummed { mut out, checksum } = out;
        out.write_all(&checksum.finalize().to_le_bytes())?;
        out.flush()
    })
}

/// A writer that keeps the CRC-32 of what went through it.
struct Checksummed<W> {
    out: W,
    checksum: crc32fast::Hasher,
}

impl<W: Write> Checksummed<W> {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.checksum.update(bytes);
        self.out.write_all(bytes)
    }
}

fn take_u32(bytes: &[u8]) -> Option<(u32, &[u8])> {
    let (head, rest) = bytes.split_first_chunk::<4>()?;
    Some((u32::from_le_bytes(*head), rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn images() -> ImageSet {
        let shape = ImageShape {
            channels: 3,
            height: 2,
            width: 1,
        };
        ImageSet::new(
            (0..12).collect(),
            vec![1, 0],
            shape,
            vec!["a".into(), "b".into()],
        )
    }

    #[test]
    fn round_trips_and_refuses_other_fingerprints() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("train.cache");
        write_cache(&path, "abc", &images()).unwrap();
        assert_eq!(read_cache(&path, "abc"), Some(images()));
        assert_eq!(read_cache(&path, "abd"), None);
        assert_eq!(read_cache(&dir.path().join("absent"), "abc"), None);
    }

    #[test]
    fn damaged_caches_are_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("train.cache");
        write_cache(&path, "abc", &images()).unwrap();
        let whole = std::fs::read(&path).unwrap();
        for cut in [0, 5, 12, whole.len() - 1] {
            std::fs::write(&path, &whole[..cut]).unwrap();
            assert_eq!(read_cache(&path, "abc"), None, "cut at {cut}");
        }
        let mut long = whole.clone();
        long.push(0);
        std::fs::write(&path, &long).unwrap();
        assert_eq!(read_cache(&path, "abc"), None);
        // Every flipped byte, also in the pixels and labels, which would still parse.
        for byte in 0..whole.len() {
            let mut flipped = whole.clone();
            flipped[byte] ^= 0x10;
            std::fs::write(&path, &flipped).unwrap();
            assert_eq!(read_cache(&path, "abc"), None, "byte {byte} flipped");
        }
    }
}
