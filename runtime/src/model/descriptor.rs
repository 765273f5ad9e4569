//! The descriptor of a segment: what a peer needs to reach it.
//!
//! It travels in the bootstrap endpoint (the system segment) and in
//! registration frames. It names memory (`gaspi-segments`'
//! [`MemoryDescriptor`]s) and carries, as opaque bytes, the remote key of
//! every transport that registered the segment when it was created. No
//! transport's type appears here: a new transport adds its key without
//! touching this file, as UCX's protocols carry packed rkeys they do not read.

use super::bounds::fits;
use super::config::SEGMENT_SIZE_CEILING;
use super::error::{Error, Result};
use gaspi_notify::NotificationArea;
use gaspi_segments::MemoryDescriptor;
use serde::{Deserialize, Serialize};

/// What a peer needs to reach a segment: its data and its notifications.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentDescriptor {
    /// Bytes of data.
    pub size: u64,
    /// Where the data lives.
    pub data: MemoryDescriptor,
    /// Offset of the data within `data`.
    pub data_offset: u64,
    /// Where the notification area lives.
    pub notifications: MemoryDescriptor,
    /// Offset of the notification area within `notifications`.
    pub notifications_offset: u64,
    /// Number of notification words.
    pub notification_count: u32,
    /// The owner's inbox for owner-executed copies (GPU segments only; see
    /// `gpu/owner_copy.rs`); `None`: writers copy themselves.
    #[serde(default)]
    pub inbox: Option<MemoryDescriptor>,
    /// GPU segments with the `device` placement: where the notification
    /// words start in the data's allocation, counted from the data's first
    /// byte (see `segments/device_words.rs`); `None`: they are the words of the
    /// area in `notifications`.
    #[serde(default)]
    pub device_words_offset: Option<u64>,
    /// Which segment of its owner this is: a number no other segment of
    /// the owner's process had, so a peer can tell a segment from one
    /// deleted and created again under the same id (the target-assisted
    /// copy checks it, `protocol/assisted_copy.rs`).
    #[serde(default)]
    pub instance: u64,
    /// What each transport that registered the segment at its creation
    /// needs to reach it (the `verbs` transport: its addresses and remote
    /// keys), packed and unpacked by that transport alone.
    #[serde(default)]
    pub keys: Vec<TransportKey>,
}

/// One transport's remote key of a segment: opaque bytes that only the
/// transport named `transport` packs and reads (UCX's packed rkey).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransportKey {
    /// The transport's name (`"verbs"`).
    pub transport: String,
    /// The key, in the transport's own encoding.
    #[serde(with = "serde_bytes")]
    pub bytes: Vec<u8>,
}

impl SegmentDescriptor {
    /// Checks a descriptor a peer sent before anything is mapped from it:
    /// the size is 1..=[`SEGMENT_SIZE_CEILING`], the data
    /// (`data_offset + size`), GPU notification words and notification
    /// area lie inside the memory their descriptors name, all without
    /// overflow. A peer's descriptor is never trusted: a size that wrapped
    /// on its side would otherwise let this rank's writes (checked only
    /// against `size`) land outside the mapping.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(Error::Protocol(format!("segment descriptor: {what}")));
        if self.size == 0 {
            return bad("size 0".into());
        }
        if self.size > SEGMENT_SIZE_CEILING {
            return Err(Error::SegmentTooLarge {
                size: self.size,
                max: SEGMENT_SIZE_CEILING,
            });
        }
        if !fits(self.data_offset, self.size, self.data.len()) {
            return bad(format!(
                "data {}+{} outside its {} bytes",
                self.data_offset,
                self.size,
                self.data.len()
            ));
        }
        let area = NotificationArea::bytes_for(self.notification_count) as u64;
        if !fits(self.notifications_offset, area, self.notifications.len()) {
            return bad(format!(
                "notification area {}+{area} outside its {} bytes",
                self.notifications_offset,
                self.notifications.len()
            ));
        }
        if let Some(at) = self.device_words_offset {
            let words = 4 * u64::from(self.notification_count);
            let end = self.data_offset.checked_add(at);
            if at < self.size || !end.is_some_and(|e| fits(e, words, self.data.len())) {
                return bad(format!(
                    "GPU notification words at {at} outside the data's {} bytes",
                    self.data.len()
                ));
            }
        }
        Ok(())
    }

    /// The key that transport `name` packed into this descriptor, if any.
    pub fn key(&self, name: &str) -> Option<&[u8]> {
        self.keys
            .iter()
            .find(|k| k.transport == name)
            .map(|k| k.bytes.as_slice())
    }

    /// Sets transport `name`'s key (replacing one it set before).
    pub fn set_key(&mut self, name: &str, bytes: Vec<u8>) {
        self.keys.retain(|k| k.transport != name);
        self.keys.push(TransportKey {
            transport: name.to_owned(),
            bytes,
        });
    }
}
