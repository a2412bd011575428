//! Reader for the IDX format MNIST ships in (raw or gzip-compressed).
//!
//! An IDX file is a 4-byte magic number `00 00 <type> <ndims>`, `ndims` big-endian `u32`
//! dimensions, then the elements in row-major order. MNIST uses type `0x08` (unsigned byte)
//! only, so that is the one type accepted here. Every count is checked against the bytes
//! actually present, so a truncated download or a file with trailing garbage is reported
//! instead of silently yielding a short or shifted dataset.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use flate2::read::GzDecoder;

use super::DataError;

/// The IDX element type code for unsigned bytes, the only one MNIST uses.
const TYPE_U8: u8 = 0x08;
/// The first two bytes of every gzip stream.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// A decoded IDX array of bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdxArray {
    /// The dimensions, outermost first (e.g. `[60000, 28, 28]`).
    pub dims: Vec<usize>,
    /// The elements in row-major order; `data.len()` is the product of `dims`.
    pub data: Vec<u8>,
}

/// Reads an IDX file of unsigned bytes, decompressing it first if it is gzip.
pub fn read_idx_file(path: &Path) -> Result<IdxArray, DataError> {
    let io_err = |source| DataError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut raw = Vec::new();
    BufReader::new(File::open(path).map_err(io_err)?)
        .read_to_end(&mut raw)
        .map_err(io_err)?;
    decode_idx(&raw).map_err(|what| corrupt(path, what))
}

/// Parses the bytes of an IDX file, raw or gzip-compressed; the error says what is wrong.
pub fn decode_idx(raw: &[u8]) -> Result<IdxArray, String> {
    if !raw.starts_with(&GZIP_MAGIC) {
        return parse_idx(raw);
    }
    let mut inflated = Vec::new();
    GzDecoder::new(raw)
        .read_to_end(&mut inflated)
        .map_err(|e| format!("gzip stream is damaged: {e}"))?;
    parse_idx(&inflated)
}

/// Parses the bytes of an (already decompressed) IDX file; the error says what is wrong.
pub fn parse_idx(bytes: &[u8]) -> Result<IdxArray, String> {
    let header = bytes
        .get(..4)
        .ok_or_else(|| format!("file is {} bytes, too short for an IDX header", bytes.len()))?;
    if header[0] != 0 || header[1] != 0 {
        return Err(format!(
            "bad magic number {:02x} {:02x} {:02x} {:02x}: not an IDX file",
            header[0], header[1], header[2], header[3]
        ));
    }
    if header[2] != TYPE_U8 {
        return Err(format!(
            "element type 0x{:02x} is not supported (MNIST uses unsigned bytes, 0x08)",
            header[2]
        ));
    }
    let ndims = usize::from(header[3]);
    if ndims == 0 {
        return Err("header declares zero dimensions".into());
    }
    let dims_end = 4 + 4 * ndims;
    let dim_bytes = bytes.get(4..dims_end).ok_or_else(|| {
        format!("truncated header: {ndims} dimensions declared but the file ends first")
    })?;
    let dims: Vec<usize> = dim_bytes
        .chunks_exact(4)
        .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .collect();
    let expected = dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| format!("dimensions {dims:?} overflow"))?;
    let data = &bytes[dims_end..];
    if data.len() < expected {
        return Err(format!(
            "truncated: dimensions {dims:?} need {expected} data bytes, found {}",
            data.len()
        ));
    }
    if data.len() > expected {
        return Err(format!(
            "{} unexpected trailing bytes after the {expected} data bytes of dimensions {dims:?}",
            data.len() - expected
        ));
    }
    Ok(IdxArray {
        dims,
        data: data.to_vec(),
    })
}

fn corrupt(path: &Path, what: String) -> DataError {
    DataError::Corrupt {
        path: PathBuf::from(path),
        what,
    }
}

/// The bytes of an IDX file of unsigned bytes, for tests that write one.
#[cfg(test)]
pub(crate) fn idx_bytes(dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut bytes = vec![0, 0, TYPE_U8, dims.len() as u8];
    for d in dims {
        bytes.extend_from_slice(&d.to_be_bytes());
    }
    bytes.extend_from_slice(data);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_dims_and_data() {
        let array = parse_idx(&idx_bytes(&[2, 3], &[1, 2, 3, 4, 5, 6])).unwrap();
        assert_eq!(array.dims, vec![2, 3]);
        assert_eq!(array.data, vec![1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn rejects_bad_magic() {
        let mut bytes = idx_bytes(&[2], &[1, 2]);
        bytes[0] = 0x50;
        assert!(parse_idx(&bytes).unwrap_err().contains("bad magic"));
    }

    #[test]
    fn rejects_other_element_types() {
        let mut bytes = idx_bytes(&[2], &[1, 2]);
        bytes[2] = 0x0d; // float
        assert!(parse_idx(&bytes).unwrap_err().contains("element type 0x0d"));
    }

    #[test]
    fn rejects_truncated_header_and_data() {
        assert!(parse_idx(&[0, 0]).unwrap_err().contains("too short"));
        let header_only = &idx_bytes(&[5, 5], &[])[..8];
        assert!(
            parse_idx(header_only)
                .unwrap_err()
                .contains("truncated header")
        );
        let short = idx_bytes(&[2, 2], &[1, 2, 3]);
        assert!(
            parse_idx(&short)
                .unwrap_err()
                .contains("need 4 data bytes, found 3")
        );
    }

    #[test]
    fn rejects_trailing_bytes() {
        let long = idx_bytes(&[2], &[1, 2, 3]);
        assert!(
            parse_idx(&long)
                .unwrap_err()
                .contains("1 unexpected trailing bytes")
        );
    }
}
