//! Frames on the control connections between ranks.
//!
//! Every frame is a little-endian `u32` length followed by a bincode-encoded
//! [`Message`]. The control connections carry what cannot be one-sided:
//! segment registration, replies, health, orderly goodbye. Data never goes
//! here on the shared-memory transport.

use crate::error::{Error, Result};
use crate::segment::SegmentDescriptor;
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::io::{Read, Write};

/// Largest frame accepted from a peer.
pub(crate) const MAX_FRAME: usize = 16 << 20;

/// Messages between the ranks' progress engines.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum Message {
    /// "Map my segment `seg`; reply to `token`."
    Register {
        token: u64,
        seg: u8,
        desc: Box<SegmentDescriptor>,
    },
    /// "Forget my segment `seg`" (deleted); reply to `token` once forgotten.
    Unregister { token: u64, seg: u8 },
    /// The answer to a request carrying `token`.
    Reply {
        token: u64,
        result: std::result::Result<(), String>,
    },
    /// The answer to a request whose reply carries a value (atomics).
    ValueReply {
        token: u64,
        result: std::result::Result<u64, String>,
    },
    /// "Apply `op` to the u64 at `offset` of your segment `seg`; reply with
    /// its old value": atomics on memory peers cannot reach with hardware
    /// atomics (`segment_bind` memory, network transports).
    Atomic {
        token: u64,
        seg: u8,
        offset: u64,
        op: AtomicOp,
    },
    /// "I commit `group` with members hashing to `hash`" (`group_commit`).
    GroupCommit { group: u32, hash: u64 },
    /// A passive message (`passive_send`): queued by the receiver's
    /// progress engine for `passive_receive`.
    Passive { data: Vec<u8> },
    /// Health check; answered with a `Reply`.
    Ping { token: u64 },
    /// "Write `data` at `offset` of your segment `seg`, then set
    /// notification `notify` if given" (TCP transport). Answered with
    /// `Settled` when `queue` is given.
    Put {
        queue: Option<u8>,
        seg: u8,
        offset: u64,
        data: serde_bytes::ByteBuf,
        notify: Option<(u32, u32)>,
    },
    /// "Set notification `id` of your segment `seg` to `value`" (TCP),
    /// after everything sent before it.
    Notify {
        queue: Option<u8>,
        seg: u8,
        id: u32,
        value: u32,
    },
    /// "Send me `len` bytes at `offset` of your segment `seg`" (TCP);
    /// answered with `Data`.
    Get {
        token: u64,
        seg: u8,
        offset: u64,
        len: u64,
    },
    /// The bytes a `Get` asked for, or why not.
    Data {
        token: u64,
        result: std::result::Result<serde_bytes::ByteBuf, String>,
    },
    /// "Answer `token` after everything before it" (`Reply`): the end of a
    /// run of `Get`s whose local notification waits for all of them.
    Fence { token: u64 },
    /// `count` requests posted on queue `queue` were applied, or (with
    /// `failure`) refused.
    Settled {
        queue: u8,
        count: u32,
        failure: Option<String>,
    },
    /// "Rank `rank` is gone" (dead, or `terminated` in order): news the
    /// sender has on its own evidence or from another rank, passed on so
    /// that ranks never connected to `rank` learn it too.
    PeerGone { rank: u32, terminated: bool },
    /// The sender terminates in order; its connection closing is no failure.
    Goodbye,
    /// The sender asks the receiver to stop (`proc_kill`).
    Kill,
}

/// A read-modify-write on a u64 of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum AtomicOp {
    /// Add (wrapping).
    FetchAdd(u64),
    /// Store `new` if the word equals `comparator`.
    CompareSwap { comparator: u64, new: u64 },
}

impl AtomicOp {
    /// Applies the operation to `word` (sequentially consistent) and
    /// returns the old value.
    pub fn apply(self, word: &std::sync::atomic::AtomicU64) -> u64 {
        use std::sync::atomic::Ordering::SeqCst;
        match self {
            AtomicOp::FetchAdd(v) => word.fetch_add(v, SeqCst),
            AtomicOp::CompareSwap { comparator, new } => {
                match word.compare_exchange(comparator, new, SeqCst, SeqCst) {
                    Ok(old) | Err(old) => old,
                }
            }
        }
    }
}

/// Encodes `msg` as one frame.
pub(crate) fn encode<T: Serialize>(msg: &T) -> Result<Vec<u8>> {
    let body = bincode::serialize(msg).map_err(|e| Error::Protocol(format!("encoding: {e}")))?;
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_le_bytes());
    frame.extend_from_slice(&body);
    Ok(frame)
}

/// Decodes one frame body.
pub(crate) fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T> {
    bincode::deserialize(body).map_err(|e| Error::Protocol(format!("decoding: {e}")))
}

/// Writes one frame to a blocking stream.
pub(crate) fn write_frame<T: Serialize>(w: &mut impl Write, msg: &T) -> Result<()> {
    let frame = encode(msg)?;
    w.write_all(&frame)
        .map_err(|e| Error::io("sending a frame", e))
}

/// Reads one frame from a blocking stream.
pub(crate) fn read_frame<T: DeserializeOwned>(r: &mut impl Read) -> Result<T> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)
        .map_err(|e| Error::io("receiving a frame header", e))?;
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(Error::Protocol(format!(
            "frame of {len} bytes is too large"
        )));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)
        .map_err(|e| Error::io("receiving a frame body", e))?;
    decode(&body)
}

/// Splits complete frames off the front of `buf` (non-blocking reader side).
pub(crate) fn take_frames(buf: &mut Vec<u8>) -> Result<Vec<Message>> {
    let mut out = Vec::new();
    let mut at = 0;
    while buf.len() - at >= 4 {
        let len = u32::from_le_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]) as usize;
        if len > MAX_FRAME {
            return Err(Error::Protocol(format!(
                "frame of {len} bytes is too large"
            )));
        }
        if buf.len() - at - 4 < len {
            break;
        }
        out.push(decode(&buf[at + 4..at + 4 + len])?);
        at += 4 + len;
    }
    buf.drain(..at);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_at_the_right_places_even_when_cut() {
        let mut all = encode(&Message::Ping { token: 7 }).unwrap();
        all.extend(encode(&Message::Goodbye).unwrap());
        let mut buf = all[..all.len() - 1].to_vec();
        let got = take_frames(&mut buf).unwrap();
        assert_eq!(got.len(), 1);
        assert!(matches!(got[0], Message::Ping { token: 7 }));
        buf.push(*all.last().unwrap());
        let got = take_frames(&mut buf).unwrap();
        assert!(matches!(got[..], [Message::Goodbye]));
        assert!(buf.is_empty());
    }

    #[test]
    fn oversized_frames_are_refused() {
        let mut buf = ((MAX_FRAME + 1) as u32).to_le_bytes().to_vec();
        assert!(take_frames(&mut buf).is_err());
    }
}
