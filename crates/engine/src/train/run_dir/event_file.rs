//! TensorBoard's event files: the `Event` and `Summary` messages of TensorFlow's
//! `event.proto` and `summary.proto` and the hparams plugin's `plugin_data.proto` (the fields
//! cubenet writes, with those files' field numbers), encoded by prost, in TFRecord framing
//! (each record its length and data, each followed by its masked CRC-32C).
//!
//! A record is written whole or not at all as far as a reader can tell: one cut short by a
//! killed process fails its checksum, and TensorBoard (like [`read_events`]) stops before it.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use prost::Message;

use crate::atomic_file::take_from_simulated_disk;

/// The `file_version` of the first event of each file, as TensorFlow writes it.
pub const FILE_VERSION: &str = "brain.Event:2";

/// TensorBoard's `Event`: one record of an event file.
#[derive(Clone, PartialEq, Message)]
pub struct Event {
    /// Seconds since the Unix epoch.
    #[prost(double, tag = "1")]
    pub wall_time: f64,
    #[prost(int64, tag = "2")]
    pub step: i64,
    #[prost(oneof = "What", tags = "3, 5")]
    pub what: Option<What>,
}

/// What an [`Event`] holds.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum What {
    #[prost(string, tag = "3")]
    FileVersion(String),
    #[prost(message, tag = "5")]
    Summary(Summary),
}

/// TensorBoard's `Summary`: tagged values.
#[derive(Clone, PartialEq, Message)]
pub struct Summary {
    #[prost(message, repeated, tag = "1")]
    pub value: Vec<SummaryValue>,
}

/// `Summary.Value`: a scalar under `tag`, or a plugin's data in `metadata`.
#[derive(Clone, PartialEq, Message)]
pub struct SummaryValue {
    #[prost(string, tag = "1")]
    pub tag: String,
    #[prost(float, optional, tag = "2")]
    pub simple_value: Option<f32>,
    #[prost(message, optional, tag = "9")]
    pub metadata: Option<SummaryMetadata>,
}

/// `SummaryMetadata`: which plugin reads a value, and its content.
#[derive(Clone, PartialEq, Message)]
pub struct SummaryMetadata {
    #[prost(message, optional, tag = "1")]
    pub plugin_data: Option<PluginData>,
}

/// `SummaryMetadata.PluginData`.
#[derive(Clone, PartialEq, Message)]
pub struct PluginData {
    #[prost(string, tag = "1")]
    pub plugin_name: String,
    #[prost(bytes = "vec", tag = "2")]
    pub content: Vec<u8>,
}

/// The hparams plugin's `HParamsPluginData`, holding a session's start.
#[derive(Clone, PartialEq, Message)]
pub struct HParamsPluginData {
    #[prost(int32, tag = "1")]
    pub version: i32,
    #[prost(message, optional, tag = "3")]
    pub session_start_info: Option<SessionStartInfo>,
}

/// The hparams plugin's `SessionStartInfo`: the run's settings.
#[derive(Clone, PartialEq, Message)]
pub struct SessionStartInfo {
    #[prost(btree_map = "string, message", tag = "1")]
    pub hparams: BTreeMap<String, HParamValue>,
    #[prost(double, tag = "5")]
    pub start_time_secs: f64,
}

/// `google.protobuf.Value`, as a setting's value.
#[derive(Clone, PartialEq, Message)]
pub struct HParamValue {
    #[prost(oneof = "Kind", tags = "2, 3, 4")]
    pub kind: Option<Kind>,
}

/// The kinds of [`HParamValue`] a setting takes.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Kind {
    #[prost(double, tag = "2")]
    Number(f64),
    #[prost(string, tag = "3")]
    Text(String),
    #[prost(bool, tag = "4")]
    Bool(bool),
}

/// TFRecord's checksum: CRC-32C rotated and offset, so that a CRC of data holding CRCs stays
/// well distributed.
fn masked_crc(bytes: &[u8]) -> u32 {
    let crc = crc32c::crc32c(bytes);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// `event` as one record: its length, the length's checksum, its data, the data's.
pub fn encode_record(event: &Event) -> Vec<u8> {
    let data = event.encode_to_vec();
    let length = (data.len() as u64).to_le_bytes();
    let mut record = Vec::with_capacity(data.len() + 16);
    record.extend_from_slice(&length);
    record.extend_from_slice(&masked_crc(&length).to_le_bytes());
    record.extend_from_slice(&data);
    record.extend_from_slice(&masked_crc(&data).to_le_bytes());
    record
}

/// An event file being written: records go through a buffer, written out by
/// [`EventWriter::flush`].
pub struct EventWriter {
    path: PathBuf,
    file: BufWriter<File>,
}

impl EventWriter {
    /// Creates the file at `path`, which must not exist, with its version event and `first`,
    /// written out; a file that cannot be is removed, so that no empty event file is left.
    pub fn create(path: PathBuf, wall_time: f64, first: &[Event]) -> io::Result<Self> {
        let file = File::options().write(true).create_new(true).open(&path)?;
        let mut writer = Self {
            path,
            file: BufWriter::new(file),
        };
        let version = Event {
            wall_time,
            step: 0,
            what: Some(What::FileVersion(FILE_VERSION.into())),
        };
        let written = std::iter::once(&version)
            .chain(first)
            .try_for_each(|event| writer.write(event))
            .and_then(|()| writer.flush());
        match written {
            Ok(()) => Ok(writer),
            Err(e) => {
                let _ = std::fs::remove_file(&writer.path);
                Err(e)
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `event` as one record.
    pub fn write(&mut self, event: &Event) -> io::Result<()> {
        let record = encode_record(event);
        take_from_simulated_disk(record.len() as u64)?;
        self.file.write_all(&record)
    }

    /// Writes out the buffered records.
    pub fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// The events of the file at `path` up to its first incomplete or damaged record.
pub fn read_events(path: &Path) -> io::Result<Vec<Event>> {
    let mut bytes = Vec::new();
    File::open(path)?.read_to_end(&mut bytes)?;
    let mut events = Vec::new();
    let mut rest = bytes.as_slice();
    while let Some((event, next)) = next_record(rest) {
        events.push(event);
        rest = next;
    }
    Ok(events)
}

/// The event at the start of `bytes` and what follows it, if a whole, intact one is there.
fn next_record(bytes: &[u8]) -> Option<(Event, &[u8])> {
    let (length, rest) = bytes.split_first_chunk::<8>()?;
    let (length_crc, rest) = rest.split_first_chunk::<4>()?;
    if u32::from_le_bytes(*length_crc) != masked_crc(length) {
        return None;
    }
    let length = usize::try_from(u64::from_le_bytes(*length)).ok()?;
    let data = rest.get(..length)?;
    let (data_crc, rest) = rest.get(length..)?.split_first_chunk::<4>()?;
    if u32::from_le_bytes(*data_crc) != masked_crc(data) {
        return None;
    }
    Some((Event::decode(data).ok()?, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scalar(step: i64, tag: &str, value: f32) -> Event {
        Event {
            wall_time: 1.5,
            step,
            what: Some(What::Summary(Summary {
                value: vec![SummaryValue {
                    tag: tag.into(),
                    simple_value: Some(value),
                    metadata: None,
                }],
            })),
        }
    }

    #[test]
    fn the_checksum_is_tfrecords_masked_crc32c() {
        // CRC-32C("123456789") is 0xe3069283 (RFC 3720's check value); masked, it is what
        // TensorBoard's own `masked_crc32c` gives.
        assert_eq!(masked_crc(b"123456789"), 0xc78a_b0e5);
    }

    #[test]
    fn events_read_back_and_a_cut_record_ends_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.out.tfevents.1.cubenet");
        let mut writer = EventWriter::create(path.clone(), 1.5, &[]).unwrap();
        let written = [scalar(1, "Loss/train", 0.5), scalar(2, "Loss/train", 0.25)];
        for event in &written {
            writer.write(event).unwrap();
        }
        writer.flush().unwrap();
        assert!(
            EventWriter::create(path.clone(), 0.0, &[]).is_err(),
            "never replaced"
        );
        let read = read_events(&path).unwrap();
        assert_eq!(read.len(), 3);
        assert_eq!(read[0].what, Some(What::FileVersion(FILE_VERSION.into())));
        assert_eq!(read[1..], written);
        // A process killed in the middle of the last record.
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        assert_eq!(read_events(&path).unwrap()[1..], written[..1]);
        // A flipped bit in the first scalar's data.
        let mut flipped = bytes.clone();
        let first_scalar = read[0].encode_to_vec().len() + 16 + 12;
        flipped[first_scalar + 2] ^= 1;
        std::fs::write(&path, &flipped).unwrap();
        assert_eq!(read_events(&path).unwrap().len(), 1);
    }
}
