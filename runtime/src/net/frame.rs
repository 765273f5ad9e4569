//! Frames on the control connections between ranks.
//!
//! Every frame is a little-endian `u32` length followed by a
//! postcard-encoded [`Message`] (decision 0075: variant index and integers
//! as LEB128 varints, `u8` and `Option` tags one byte, byte strings a varint
//! length and the bytes; a body must be read whole, no byte left over). The control connections carry what cannot be one-sided:
//! segment registration, replies, health, orderly goodbye. Data never goes
//! here on the shared-memory transport.

use crate::model::descriptor::SegmentDescriptor;
use crate::model::error::{Error, Result};
use crate::model::ids::AtomicOp;
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
        /// Before the data: the target checks everything before a byte
        /// of a large write lands (it reads those straight into the
        /// segment, `transport/tcp/serve.rs`).
        notify: Option<(u32, u32)>,
        data: serde_bytes::ByteBuf,
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
    /// answered with `Data`. With `into` (my segment and offset), the
    /// bytes may come instead as a `Put` there, sent from where they lie
    /// and read straight into place as a write's are, then a `Data` with
    /// no bytes: a read costs what a write does.
    Get {
        token: u64,
        seg: u8,
        offset: u64,
        len: u64,
        into: Option<(u8, u64)>,
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
        /// Four bytes little-endian, not a varint: the frame has one size
        /// ([`SETTLED_FRAME`]) and is built on the stack.
        #[serde(with = "postcard::fixint::le")]
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
    /// Nothing: a byte in flight on a connection that was quiet, so that
    /// the kernel measures a peer's silence from the moment it began
    /// (decision 0033). Dropped by the receiver.
    Heartbeat,
}

/// Encodes `msg` as one frame.
pub(crate) fn encode<T: Serialize>(msg: &T) -> Result<Vec<u8>> {
    // The length prefix first, then the body after it in the same vector.
    let mut frame = postcard::to_extend(msg, vec![0u8; 4])
        .map_err(|e| Error::Protocol(format!("encoding: {e}")))?;
    let body = (frame.len() - 4) as u32;
    frame[..4].copy_from_slice(&body.to_le_bytes());
    Ok(frame)
}

/// Encodes `value` alone, without a length prefix (a payload inside a
/// frame, a transport's key).
pub(crate) fn encode_body<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    postcard::to_allocvec(value).map_err(|e| Error::Protocol(format!("encoding: {e}")))
}

/// Decodes one frame body, which it must take whole.
pub(crate) fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T> {
    let (value, rest) =
        postcard::take_from_bytes(body).map_err(|e| Error::Protocol(format!("decoding: {e}")))?;
    if !rest.is_empty() {
        return Err(Error::Protocol(format!(
            "decoding: {} bytes left over after the value",
            rest.len()
        )));
    }
    Ok(value)
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
#[cfg(test)]
pub(crate) fn take_frames(buf: &mut Vec<u8>) -> Result<Vec<Message>> {
    let mut out = Vec::new();
    let (used, result) = for_each_frame(buf, |frame| {
        out.push(match frame {
            Frame::Put(put) => Message::Put {
                queue: put.queue,
                seg: put.seg,
                offset: put.offset,
                data: serde_bytes::ByteBuf::from(put.data.to_vec()),
                notify: put.notify,
            },
            Frame::Msg(m) => m,
        })
    });
    buf.drain(..used);
    result.map(|()| out)
}

/// One frame taken off a connection's buffer by [`for_each_frame`].
pub(crate) enum Frame<'a> {
    /// A `Put`, its data still in the buffer (the TCP transport's bulk,
    /// copied once, into the segment).
    Put(PutRef<'a>),
    /// Any other message, decoded.
    Msg(Message),
}

/// Takes every complete frame at the front of `buf`, in order, to
/// `on_frame`: a `Put` with its data in place, a `Settled` without a
/// failure read in place too (the two frames of every write over TCP,
/// kept off the generic decoder and the heap), anything else decoded.
/// Returns the bytes the complete frames took (the caller drops them),
/// and the first error, which stops it.
pub(crate) fn for_each_frame(
    buf: &[u8],
    mut on_frame: impl FnMut(Frame<'_>),
) -> (usize, Result<()>) {
    let mut at = 0;
    let mut result = Ok(());
    while buf.len() - at >= 4 {
        let len = u32::from_le_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]) as usize;
        if len > MAX_FRAME {
            result = Err(Error::Protocol(format!(
                "frame of {len} bytes is too large"
            )));
            break;
        }
        if buf.len() - at - 4 < len {
            break;
        }
        let body = &buf[at + 4..at + 4 + len];
        if let Some(put) = parse_put(body) {
            on_frame(Frame::Put(put));
        } else if let Some((queue, count)) = parse_settled(body) {
            on_frame(Frame::Msg(Message::Settled {
                queue,
                count,
                failure: None,
            }));
        } else {
            match decode(body) {
                Ok(m) => on_frame(Frame::Msg(m)),
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        at += 4 + len;
    }
    (at, result)
}

/// A `Message::Put` read in place: its fields, its data a slice of the
/// frame.
#[derive(Clone, Copy)]
pub(crate) struct PutRef<'a> {
    pub queue: Option<u8>,
    pub seg: u8,
    pub offset: u64,
    pub data: &'a [u8],
    pub notify: Option<(u32, u32)>,
}

/// The first byte of every body of `msg`'s variant: its variant index,
/// taken from the encoder itself so that it follows the enum's order
/// (`cell` keeps it). One byte while the enum has fewer than 128 variants
/// (the varint of a larger index would take two; the encoder's answer is
/// checked).
fn variant_tag(cell: &'static std::sync::OnceLock<u8>, msg: fn() -> Message) -> u8 {
    *cell.get_or_init(|| {
        let body = encode_body(&msg()).expect("every message encodes");
        assert!(body[0] < 0x80, "a variant index of one byte");
        body[0]
    })
}

/// The first byte of every `Put` body.
fn put_tag() -> u8 {
    static TAG: std::sync::OnceLock<u8> = std::sync::OnceLock::new();
    variant_tag(&TAG, || Message::Put {
        queue: None,
        seg: 0,
        offset: 0,
        data: serde_bytes::ByteBuf::new(),
        notify: None,
    })
}

/// The first byte of every `Settled` body.
fn settled_tag() -> u8 {
    static TAG: std::sync::OnceLock<u8> = std::sync::OnceLock::new();
    variant_tag(&TAG, || Message::Settled {
        queue: 0,
        count: 0,
        failure: None,
    })
}

/// Bytes of the frame of a `Settled` without a failure: length prefix,
/// tag, queue, count, the failure's `None`.
pub(crate) const SETTLED_FRAME: usize = 4 + 1 + 1 + 4 + 1;

/// The frame of `Message::Settled { queue, count, failure: None }`, the
/// same bytes as [`encode`] gives (a test checks it), built on the stack:
/// the answer to nearly every request over TCP.
pub(crate) fn encode_settled(queue: u8, count: u32) -> [u8; SETTLED_FRAME] {
    let mut f = [0u8; SETTLED_FRAME];
    f[..4].copy_from_slice(&((SETTLED_FRAME - 4) as u32).to_le_bytes());
    f[4] = settled_tag();
    f[5] = queue;
    f[6..10].copy_from_slice(&count.to_le_bytes());
    f[10] = 0; // failure: None
    f
}

/// The queue and count of a `Settled` body without a failure; `None` for
/// any other body (a `Settled` with a failure goes to the generic decoder).
fn parse_settled(body: &[u8]) -> Option<(u8, u32)> {
    if body.len() != SETTLED_FRAME - 4 || body[0] != settled_tag() || body[6] != 0 {
        return None;
    }
    Some((body[1], u32::from_le_bytes(body[2..6].try_into().ok()?)))
}

/// Appends the LEB128 varint of `v` (postcard's integer encoding) to `put`.
fn put_varint(v: u64, mut put: impl FnMut(&[u8])) {
    let mut buf = [0u8; 10];
    let mut n = 0;
    let mut v = v;
    loop {
        let byte = (v & 0x7F) as u8;
        v >>= 7;
        if v == 0 {
            buf[n] = byte;
            n += 1;
            break;
        }
        buf[n] = byte | 0x80;
        n += 1;
    }
    put(&buf[..n]);
}

/// Reads a varint of at most `max` bytes whose last byte is at most
/// `last_max`, as postcard's decoder does (`max` 10 and `last_max` 1 for a
/// `u64`, 5 and 15 for a `u32`), from `take`.
fn take_varint<'a>(
    mut take: impl FnMut(usize) -> Option<&'a [u8]>,
    max: usize,
    last_max: u8,
) -> Option<u64> {
    let mut out = 0u64;
    for i in 0..max {
        let byte = take(1)?[0];
        out |= u64::from(byte & 0x7F) << (7 * i);
        if byte & 0x80 == 0 {
            return (i + 1 < max || byte <= last_max).then_some(out);
        }
    }
    None
}

/// The frame of a `Message::Put`, the same bytes as [`encode`] gives
/// (postcard's layout: variant index, then the fields in order; a test
/// checks it against `encode`). The transport sends the head
/// ([`encode_put_head`]) and the data where it lies instead.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn encode_put(
    queue: Option<u8>,
    seg: u8,
    offset: u64,
    data: &[u8],
    notify: Option<(u32, u32)>,
) -> Vec<u8> {
    let (head, n) = encode_put_head(queue, seg, offset, data.len(), notify);
    let mut f = head[..n].to_vec();
    f.extend_from_slice(data);
    f
}

/// Bytes of a `Put` frame's head at most: length prefix, tag, queue, segment,
/// offset (a varint), notification (two), data length (one more).
pub(crate) const PUT_HEAD_MAX: usize = 4 + 1 + 2 + 1 + 10 + (1 + 5 + 5) + 10;

/// The bytes of a `Put` frame that come before its `len` bytes of data:
/// sent with the data where it lies (`ControlOut::offer_parts`), they make
/// the frame [`encode_put`] makes. Built on the stack: the head of every
/// write over TCP, on its way to one `sendmsg`.
pub(crate) fn encode_put_head(
    queue: Option<u8>,
    seg: u8,
    offset: u64,
    len: usize,
    notify: Option<(u32, u32)>,
) -> ([u8; PUT_HEAD_MAX], usize) {
    let mut f = [0u8; PUT_HEAD_MAX];
    let mut at = 4; // length, set below
    let mut put = |bytes: &[u8]| {
        f[at..at + bytes.len()].copy_from_slice(bytes);
        at += bytes.len();
    };
    put(&[put_tag()]);
    match queue {
        Some(q) => put(&[1, q]),
        None => put(&[0]),
    }
    put(&[seg]);
    put_varint(offset, &mut put);
    match notify {
        Some((id, value)) => {
            put(&[1]);
            put_varint(id.into(), &mut put);
            put_varint(value.into(), &mut put);
        }
        None => put(&[0]),
    }
    put_varint(len as u64, &mut put);
    let body = (at - 4 + len) as u32;
    f[..4].copy_from_slice(&body.to_le_bytes());
    (f, at)
}

/// The part of a `Put` frame that comes before its data: enough to check
/// the whole request and put the data where it belongs while it is still
/// arriving (the TCP transport reads large writes straight into the
/// segment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PutHead {
    pub queue: Option<u8>,
    pub seg: u8,
    pub offset: u64,
    pub notify: Option<(u32, u32)>,
    /// Bytes of data; they end the frame.
    pub len: usize,
    /// Bytes of the frame before the data, length prefix included.
    pub head: usize,
}

/// The head of the `Put` frame that `buf` starts with (length prefix
/// first), once `buf` holds all of it; `None` for any other frame, a head
/// not read whole yet, or lengths that do not add up.
pub(crate) fn put_head(buf: &[u8]) -> Option<PutHead> {
    let frame = u32::from_le_bytes(buf.get(..4)?.try_into().ok()?) as usize;
    if frame > MAX_FRAME {
        return None;
    }
    let mut head = put_fields(&buf[4..])?;
    head.head += 4;
    (head.head.checked_add(head.len)? == 4 + frame).then_some(head)
}

/// The fields of a `Put` body (no length prefix) before its data, with
/// `head` the body's bytes before the data; `None` when `body` does not
/// start with them whole.
fn put_fields(body: &[u8]) -> Option<PutHead> {
    if *body.first()? != put_tag() {
        return None;
    }
    let mut at = 1usize;
    let mut take = |n: usize| -> Option<&[u8]> {
        let s = body.get(at..at.checked_add(n)?)?;
        at += n;
        Some(s)
    };
    let queue = match take(1)?[0] {
        0 => None,
        1 => Some(take(1)?[0]),
        _ => return None,
    };
    let seg = take(1)?[0];
    let offset = take_varint(&mut take, 10, 1)?;
    let notify = match take(1)?[0] {
        0 => None,
        1 => {
            let id = take_varint(&mut take, 5, 15)? as u32;
            let value = take_varint(&mut take, 5, 15)? as u32;
            Some((id, value))
        }
        _ => return None,
    };
    let len = usize::try_from(take_varint(&mut take, 10, 1)?).ok()?;
    Some(PutHead {
        queue,
        seg,
        offset,
        notify,
        len,
        head: at,
    })
}

/// Reads a `Put` body in place; `None` when `body` is another message (or
/// not a well-formed `Put`, which the generic decoder then reports).
fn parse_put(body: &[u8]) -> Option<PutRef<'_>> {
    let f = put_fields(body)?;
    (f.head.checked_add(f.len)? == body.len()).then_some(PutRef {
        queue: f.queue,
        seg: f.seg,
        offset: f.offset,
        data: &body[f.head..],
        notify: f.notify,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_put_head_is_read_from_any_prefix_that_holds_it() {
        for notify in [None, Some((7u32, 9u32))] {
            for queue in [None, Some(3u8)] {
                let data: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
                let f = encode_put(queue, 5, 4096, &data, notify);
                let head = put_head(&f).expect("a put's head");
                assert_eq!(
                    (head.queue, head.seg, head.offset, head.notify, head.len),
                    (queue, 5, 4096, notify, 1000)
                );
                assert_eq!(head.head + head.len, f.len());
                assert_eq!(&f[head.head..], &data[..]);
                // Any prefix holding the head gives the same; shorter ones none.
                assert_eq!(put_head(&f[..head.head]), Some(head));
                assert_eq!(put_head(&f[..head.head - 1]), None);
            }
        }
        assert_eq!(put_head(&encode(&Message::Goodbye).unwrap()), None);
    }

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
    fn a_put_built_in_place_is_the_frame_the_encoder_makes_and_reads_back() {
        for (queue, notify) in [(None, None), (Some(3), Some((7, 9))), (Some(0), None)] {
            let data: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
            let ours = encode_put(queue, 5, 1 << 40, &data, notify);
            let theirs = encode(&Message::Put {
                queue,
                seg: 5,
                offset: 1 << 40,
                data: serde_bytes::ByteBuf::from(data.clone()),
                notify,
            })
            .unwrap();
            assert_eq!(ours, theirs);
            let put = parse_put(&ours[4..]).expect("parsed");
            assert_eq!(
                (put.queue, put.seg, put.offset, put.data, put.notify),
                (queue, 5, 1 << 40, &data[..], notify)
            );
        }
        // Other messages and cut frames are not taken for a Put.
        assert!(parse_put(&encode(&Message::Goodbye).unwrap()[4..]).is_none());
        let cut = encode_put(None, 1, 0, &[1, 2, 3], None);
        assert!(parse_put(&cut[4..cut.len() - 1]).is_none());
    }

    #[test]
    fn a_settled_built_in_place_is_the_frame_the_encoder_makes_and_reads_back() {
        for (queue, count) in [(0u8, 1u32), (15, 70_000), (255, u32::MAX)] {
            let ours = encode_settled(queue, count);
            let theirs = encode(&Message::Settled {
                queue,
                count,
                failure: None,
            })
            .unwrap();
            assert_eq!(&ours[..], &theirs[..]);
            let mut buf = ours.to_vec();
            let got = take_frames(&mut buf).unwrap();
            assert!(
                matches!(got[..], [Message::Settled { queue: q, count: c, failure: None }] if q == queue && c == count),
                "{got:?}"
            );
        }
        // A failure is no fast-path frame; the generic decoder reads it.
        let failed = encode(&Message::Settled {
            queue: 2,
            count: 1,
            failure: Some("no".into()),
        })
        .unwrap();
        assert!(parse_settled(&failed[4..]).is_none());
        let got = take_frames(&mut failed.clone()).unwrap();
        assert!(
            matches!(&got[..], [Message::Settled { queue: 2, count: 1, failure: Some(f) }] if f == "no")
        );
        // Nor are other messages of the same length.
        let ping = encode(&Message::Ping { token: 1 }).unwrap();
        assert!(parse_settled(&ping[4..]).is_none());
    }

    /// Frames of every message kind, cut, mutated and made of random
    /// bytes: the decoder returns frames or an error, never panics, and
    /// never hands out a `Put` whose data lies outside the frame.
    #[test]
    fn the_decoder_survives_random_and_mutated_frames() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config as PtConfig, TestRunner};
        let samples: Vec<Vec<u8>> = [
            Message::Ping { token: 9 },
            Message::Goodbye,
            Message::Passive { data: vec![1; 40] },
            Message::Notify {
                queue: Some(1),
                seg: 2,
                id: 3,
                value: 4,
            },
            Message::Get {
                token: 1,
                seg: 0,
                offset: 5,
                len: 6,
                into: Some((2, 7)),
            },
            Message::PeerGone {
                rank: 3,
                terminated: false,
            },
            Message::Settled {
                queue: 1,
                count: 2,
                failure: Some("refused".into()),
            },
        ]
        .iter()
        .map(|m| encode(m).unwrap())
        .chain(std::iter::once(encode_settled(3, 9).to_vec()))
        .chain(std::iter::once(encode_put(
            Some(0),
            1,
            64,
            &[7; 300],
            Some((2, 1)),
        )))
        .collect();
        let mut runner = TestRunner::new(PtConfig {
            cases: 3000,
            ..PtConfig::default()
        });
        let frames = (
            0..samples.len(),
            proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8),
            proptest::collection::vec(any::<u8>(), 0..64),
            any::<bool>(),
        );
        runner
            .run(&frames, |(pick, flips, random, use_random)| {
                let mut buf = if use_random {
                    let mut b = (random.len() as u32).to_le_bytes().to_vec();
                    b.extend_from_slice(&random);
                    b
                } else {
                    let mut b = samples[pick].clone();
                    for (at, byte) in flips {
                        let i = at % b.len();
                        b[i] = byte;
                    }
                    b
                };
                let len = buf.len();
                let (used, _result) = for_each_frame(&buf, |frame| {
                    if let Frame::Put(put) = frame {
                        let start = put.data.as_ptr() as usize;
                        let at = buf.as_ptr() as usize;
                        assert!(start >= at && start + put.data.len() <= at + len);
                    }
                });
                prop_assert!(used <= len);
                buf.truncate(len / 2);
                let _ = take_frames(&mut buf);
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn varints_at_their_limits_are_built_and_read_as_the_encoder_does() {
        for offset in [0u64, 127, 128, 16_383, 16_384, 1 << 40, u64::MAX] {
            for notify in [None, Some((0u32, 1u32)), Some((u32::MAX, 127))] {
                let data = [9u8; 130];
                let ours = encode_put(Some(1), 2, offset, &data, notify);
                let theirs = encode(&Message::Put {
                    queue: Some(1),
                    seg: 2,
                    offset,
                    data: serde_bytes::ByteBuf::from(data.to_vec()),
                    notify,
                })
                .unwrap();
                assert_eq!(ours, theirs);
                let head = put_head(&ours).expect("a head");
                assert!(head.head <= PUT_HEAD_MAX);
                assert_eq!((head.offset, head.notify, head.len), (offset, notify, 130));
            }
        }
    }

    /// The in-place `Put` reader takes exactly the bodies the generic
    /// decoder reads as a `Put`, with the same fields: over-long varints
    /// (which postcard accepts) and ones too long for their type (which it
    /// refuses) included.
    #[test]
    fn the_in_place_put_reader_agrees_with_the_generic_decoder() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config as PtConfig, TestRunner};
        let mut runner = TestRunner::new(PtConfig {
            cases: 5000,
            ..PtConfig::default()
        });
        let bytes = proptest::collection::vec(
            prop_oneof![
                Just(0u8),
                Just(1),
                Just(0x80),
                Just(0xFF),
                Just(0x0F),
                Just(0x10),
                any::<u8>()
            ],
            0..40,
        );
        runner
            .run(&bytes, |tail| {
                let mut body = vec![put_tag()];
                body.extend_from_slice(&tail);
                let ours = parse_put(&body);
                let theirs = decode::<Message>(&body);
                match (ours, theirs) {
                    (
                        Some(p),
                        Ok(Message::Put {
                            queue,
                            seg,
                            offset,
                            notify,
                            data,
                        }),
                    ) => {
                        prop_assert_eq!(
                            (p.queue, p.seg, p.offset, p.notify, p.data),
                            (queue, seg, offset, notify, &data[..])
                        );
                    }
                    (None, Err(_)) => {}
                    (ours, theirs) => {
                        prop_assert!(
                            false,
                            "in place {:?}, decoder {:?}",
                            ours.map(|p| (p.offset, p.data.len())),
                            theirs
                        );
                    }
                }
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn bytes_left_over_after_a_message_are_refused() {
        let mut f = encode(&Message::Ping { token: 3 }).unwrap();
        f.push(0);
        assert!(decode::<Message>(&f[4..]).is_err());
        let mut buf = ((f.len() - 4) as u32).to_le_bytes().to_vec();
        buf.extend_from_slice(&f[4..]);
        assert!(take_frames(&mut buf).is_err());
    }

    #[test]
    fn oversized_frames_are_refused() {
        let mut buf = ((MAX_FRAME + 1) as u32).to_le_bytes().to_vec();
        assert!(take_frames(&mut buf).is_err());
    }
}
