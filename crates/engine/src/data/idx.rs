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
    parse_idx(&inflate(raw)?)
}

/// The decompressed bytes of a gzip IDX file, inflated no further than one byte past what
/// its header declares: a stream that inflates to far more than that is refused without
/// holding it in memory.
fn inflate(raw: &[u8]) -> Result<Vec<u8>, String> {
    let damaged = |e: std::io::Error| format!("gzip stream is damaged: {e}");
    let mut stream = GzDecoder::new(raw);
    let mut bytes = Vec::new();
    let mut inflate_to = |bytes: &mut Vec<u8>, len: usize| {
        let more = len.saturating_sub(bytes.len()) as u64;
        (&mut stream).take(more).read_to_end(bytes).map(drop)
    };
    inflate_to(&mut bytes, 4).map_err(damaged)?;
    if let [0, 0, TYPE_U8, ndims] = bytes[..] {
        inflate_to(&mut bytes, 4 + 4 * usize::from(ndims)).map_err(damaged)?;
        if let Ok(header) = Header::parse(&bytes) {
            let end = header.end();
            inflate_to(&mut bytes, end.saturating_add(1)).map_err(damaged)?;
            if bytes.len() > end {
                return Err(format!(
                    "the gzip stream inflates past the {} data bytes of dimensions {:?}",
                    header.len, header.dims
                ));
            }
        }
    }
    Ok(bytes)
}

/// An IDX header: the dimensions, where the data starts and how many bytes it has.
struct Header {
    dims: Vec<usize>,
    start: usize,
    len: usize,
}

impl Header {
    /// The header at the start of `bytes`; the error says what is wrong with it.
    fn parse(bytes: &[u8]) -> Result<Self, String> {
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
        let start = 4 + 4 * ndims;
        let dim_bytes = bytes.get(4..start).ok_or_else(|| {
            format!("truncated header: {ndims} dimensions declared but the file ends first")
        })?;
        let dims: Vec<usize> = dim_bytes
            .chunks_exact(4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
            .collect();
        let len = dims
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| format!("dimensions {dims:?} overflow"))?;
        Ok(Self { dims, start, len })
    }

    /// Where the data ends.
    fn end(&self) -> usize {
        self.start.saturating_add(self.len)
    }
}

/// Parses the bytes of an (already decompressed) IDX file; the error says what is wrong.
pub fn parse_idx(bytes: &[u8]) -> Result<IdxArray, String> {
    let Header { dims, start, len } = Header::parse(bytes)?;
    let data = &bytes[start..];
    if data.len() < len {
        return Err(format!(
            "truncated: dimensions {dims:?} need {len} data bytes, found {}",
            data.len()
        ));
    }
    if data.len() > len {
        return Err(format!(
            "{} unexpected trailing bytes after the {len} data bytes of dimensions {dims:?}",
            data.len() - len
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

    #[test]
    fn a_gzip_stream_is_inflated_no_further_than_its_header_declares() {
        use flate2::{Compression, write::GzEncoder};
        use std::io::Write;
        let gzip = |bytes: &[u8]| {
            let mut encoder = GzEncoder::new(Vec::new(), Compression::fast());
            encoder.write_all(bytes).unwrap();
            encoder.finish().unwrap()
        };
        let whole = idx_bytes(&[2, 2], &[1, 2, 3, 4]);
        assert_eq!(decode_idx(&gzip(&whole)).unwrap().data, vec![1, 2, 3, 4]);
        // 64 MiB of zeros past a 4-byte body: refused after reading one byte of them.
        let mut bomb = whole.clone();
        bomb.resize(whole.len() + (64 << 20), 0);
        let message = decode_idx(&gzip(&bomb)).unwrap_err();
        assert!(
            message.contains("inflates past the 4 data bytes"),
            "{message}"
        );
        assert_eq!(inflate(&gzip(&bomb)).unwrap_err(), message);
        let short = gzip(&whole[..whole.len() - 1]);
        assert!(
            decode_idx(&short)
                .unwrap_err()
                .contains("need 4 data bytes, found 3")
        );
    }
}
