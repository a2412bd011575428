//! The frame around every record file cubenet writes (the model, and each epoch's model,
//! optimizer and scheduler checkpoints), so that a flipped or lost byte anywhere is found
//! before the record is used: Burn's MessagePack alone takes most damaged bytes as other
//! weights.
//!
//! Layout: the magic bytes `cnrecord`, a little-endian `u32` format version, the payload's
//! length as a little-endian `u64`, the CRC-32 (IEEE) of the payload as a little-endian
//! `u32`, then the payload (Burn's named MessagePack). The length and checksum sit before
//! the payload, so the frame is written in one piece with the record, whole or not at all.

/// The first bytes of a framed record.
const MAGIC: &[u8; 8] = b"cnrecord";
/// Bumped whenever the frame's layout changes.
const VERSION: u32 = 1;
/// Magic, version, length and checksum.
const HEADER_LEN: usize = MAGIC.len() + 4 + 8 + 4;

/// Why the bytes of a record file hold no whole framed record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Not a frame at all, but MessagePack: what cubenet wrote before records were framed.
    #[error("it has no checksum")]
    Unframed,
    /// A frame whose bytes were cut, lengthened or changed.
    #[error("{0}")]
    Damaged(String),
}

/// `payload` behind its frame: what a record file holds.
pub fn frame_record(payload: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(HEADER_LEN + payload.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&VERSION.to_le_bytes());
    bytes.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

/// The payload of a record file's `bytes` if its frame is whole and its checksum matches.
pub fn unframe(bytes: &[u8]) -> Result<&[u8], FrameError> {
    let damaged = |reason: &str| FrameError::Damaged(reason.to_string());
    let Some(rest) = bytes.strip_prefix(MAGIC) else {
        return Err(match looks_unframed(bytes) {
            true => FrameError::Unframed,
            false => damaged("its header is not a cubenet record's"),
        });
    };
    let (version, rest) = rest
        .split_first_chunk::<4>()
        .ok_or_else(|| damaged("its header is cut short"))?;
    if u32::from_le_bytes(*version) != VERSION {
        return Err(damaged("its header names an unknown format version"));
    }
    let (length, rest) = rest
        .split_first_chunk::<8>()
        .ok_or_else(|| damaged("its header is cut short"))?;
    let (checksum, payload) = rest
        .split_first_chunk::<4>()
        .ok_or_else(|| damaged("its header is cut short"))?;
    if u64::try_from(payload.len()).ok() != Some(u64::from_le_bytes(*length)) {
        return Err(damaged(&format!(
            "its header says {} bytes follow, the file has {}",
            u64::from_le_bytes(*length),
            payload.len()
        )));
    }
    if crc32fast::hash(payload) != u32::from_le_bytes(*checksum) {
        return Err(damaged("its checksum does not match its contents"));
    }
    Ok(payload)
}

/// Whether `bytes` start as Burn's named MessagePack records do, with a map: a file from
/// before framing. No damage to a frame makes one: its first byte, `c`, is three bit flips
/// from the nearest map marker.
fn looks_unframed(bytes: &[u8]) -> bool {
    // fixmap, map16, map32.
    bytes
        .first()
        .is_some_and(|&first| first & 0xf0 == 0x80 || first == 0xde || first == 0xdf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_gives_back_its_payload() {
        let payloads: [&[u8]; 3] = [b"", b"x", &[7; 1000]];
        for payload in payloads {
            assert_eq!(unframe(&frame_record(payload)), Ok(payload));
        }
    }

    #[test]
    fn every_flipped_bit_and_every_cut_is_found() {
        let payload: Vec<u8> = (0..200u32).map(|i| (i * 37 % 251) as u8).collect();
        let whole = frame_record(&payload);
        for byte in 0..whole.len() {
            for bit in 0..8 {
                let mut flipped = whole.clone();
                flipped[byte] ^= 1 << bit;
                assert!(
                    matches!(unframe(&flipped), Err(FrameError::Damaged(_))),
                    "byte {byte} bit {bit}"
                );
            }
        }
        for cut in 0..whole.len() {
            assert!(unframe(&whole[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = whole;
        long.push(0);
        assert!(unframe(&long).is_err());
    }

    #[test]
    fn a_record_from_before_framing_is_told_apart() {
        // A named MessagePack map of one entry, `{"a": 1}`.
        assert_eq!(unframe(&[0x81, 0xa1, b'a', 1]), Err(FrameError::Unframed));
        assert!(matches!(unframe(b""), Err(FrameError::Damaged(_))));
        assert!(matches!(unframe(b"{}"), Err(FrameError::Damaged(_))));
    }
}
