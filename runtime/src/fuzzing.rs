//! The checks behind the fuzz targets (`fuzz/`, feature `fuzzing`): every
//! decoder of bytes that arrive from outside this rank's process, each
//! with the invariant it must keep, not only "no panic" (decision 0077).
//! Each entry point takes the fuzzer's bytes and panics when an invariant
//! breaks. `cargo test` replays the committed corpora through them
//! (`fuzz/corpus/<target>/`), so a finding once fixed stays a test.

use crate::model::descriptor::SegmentDescriptor;
use crate::net::frame::{self, Frame, Message, PutRef};
use crate::transport::{Capabilities, Completion, RemoteSegment, Via};
use std::sync::Mutex;

/// A fuzz target's checks: they panic when an invariant breaks.
pub type Check = fn(&[u8]);

/// The fuzz targets, by name: the corpus folder of each is `fuzz/corpus/<name>`.
pub const TARGETS: &[(&str, Check)] = &[
    ("frames", frames),
    ("tcp_put", tcp_put),
    ("handshake", handshake),
    ("rendezvous", rendezvous),
    ("descriptor", descriptor),
    ("passive", passive),
];

/// The complete frames at the front of `data`, each with its length prefix.
fn split_frames(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while let Some(len) = data.get(at..at + 4) {
        let len = u32::from_le_bytes(len.try_into().expect("four bytes")) as usize;
        let Some(frame) = data.get(at..at + 4 + len) else {
            break;
        };
        out.push(frame);
        at += 4 + len;
    }
    out
}

/// A frame's re-encoding: a `Put` built in place, anything else encoded.
fn reencode(f: &Frame<'_>) -> Vec<u8> {
    match f {
        Frame::Put(p) => frame::encode_put(p.queue, p.seg, p.offset, p.data, p.notify),
        Frame::Msg(m) => frame::encode(m).expect("a decoded message encodes"),
    }
}

/// The one frame `bytes` makes, re-encoded, or `None` when refused.
fn decode_one(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let (used, result) = frame::for_each_frame(bytes, |f| out.push(reencode(&f)));
    match result {
        Ok(()) => {
            assert_eq!(used, bytes.len(), "a whole frame is taken whole");
            assert_eq!(out.len(), 1, "one frame is one message");
            out.pop()
        }
        Err(_) => {
            assert!(out.is_empty(), "a refused frame delivered a message");
            None
        }
    }
}

/// Frames after the handshake (`net/frame.rs`), as a connection's reader
/// takes them off its buffer. Invariants: the reader never takes more
/// than it has; a `Put` read in place has its data inside the buffer and
/// the fields the generic decoder reads; a decoded frame encodes back to
/// the same bytes unless the input spelled a varint longer than needed
/// (then the re-encoding is shorter), and the re-encoding decodes to
/// itself.
pub fn frames(data: &[u8]) {
    let (used, _) = frame::for_each_frame(data, |f| {
        if let Frame::Put(p) = &f {
            let (lo, hi) = (data.as_ptr() as usize, data.as_ptr() as usize + data.len());
            let at = p.data.as_ptr() as usize;
            assert!(
                at >= lo && at + p.data.len() <= hi,
                "Put data outside the buffer"
            );
        }
    });
    assert!(used <= data.len());
    for bytes in split_frames(&data[..used]) {
        let Some(again) = decode_one(bytes) else {
            continue;
        };
        if again.len() == bytes.len() {
            assert_eq!(
                again, bytes,
                "a frame re-encodes to other bytes of its length"
            );
        } else {
            assert!(again.len() < bytes.len(), "a re-encoding grew");
        }
        assert_eq!(
            decode_one(&again).as_deref(),
            Some(&again[..]),
            "no fixed point"
        );
        // The in-place readers and the generic decoder agree.
        let body = &bytes[4..];
        if let Some(head) = frame::put_head(bytes) {
            match frame::decode::<Message>(body) {
                Ok(Message::Put {
                    queue,
                    seg,
                    offset,
                    notify,
                    data,
                }) => assert_eq!(
                    (head.queue, head.seg, head.offset, head.notify, head.len),
                    (queue, seg, offset, notify, data.len())
                ),
                other => panic!("in-place head {head:?}, decoder {other:?}"),
            }
        }
    }
}

/// A segment of `size` bytes and `words` notification words in plain
/// memory, standing for this rank's own segment on the TCP target: it
/// asserts what `RemoteSegment`'s callers promise (arguments checked).
#[derive(Debug)]
struct ModelSegment {
    data: Mutex<Vec<u8>>,
    words: Mutex<Vec<u32>>,
}

impl RemoteSegment for ModelSegment {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            completion: Completion::Now,
            in_place_from: None,
            gpu: false,
            words_in_gpu_memory: false,
        }
    }
    fn size(&self) -> u64 {
        self.data.lock().expect("not poisoned").len() as u64
    }
    fn notification_count(&self) -> u32 {
        self.words.lock().expect("not poisoned").len() as u32
    }
    fn put(&self, offset: u64, src: *const u8, len: usize, _via: Via<'_>) -> crate::Result<()> {
        let mut d = self.data.lock().expect("not poisoned");
        let end = offset
            .checked_add(len as u64)
            .expect("a write's end overflows");
        assert!(
            end <= d.len() as u64,
            "a write accepted outside its segment"
        );
        // SAFETY: `src` is the frame's data, `len` bytes the caller holds.
        let src = unsafe { std::slice::from_raw_parts(src, len) };
        d[offset as usize..end as usize].copy_from_slice(src);
        Ok(())
    }
    fn get(&self, offset: u64, dst: *mut u8, len: usize) -> crate::Result<()> {
        let d = self.data.lock().expect("not poisoned");
        let end = offset
            .checked_add(len as u64)
            .expect("a read's end overflows");
        assert!(end <= d.len() as u64, "a read accepted outside its segment");
        // SAFETY: `dst` has room for `len` bytes (the caller's promise).
        unsafe { std::ptr::copy_nonoverlapping(d.as_ptr().add(offset as usize), dst, len) };
        Ok(())
    }
    fn notify(&self, id: u32, value: u32, _via: Via<'_>) -> crate::Result<()> {
        let mut w = self.words.lock().expect("not poisoned");
        assert!(value != 0, "notification value 0 accepted");
        *w.get_mut(id as usize)
            .expect("a notification accepted outside its segment") = value;
        Ok(())
    }
    fn atomic(&self, _offset: u64, _op: crate::model::ids::AtomicOp) -> crate::Result<Option<u64>> {
        Ok(None)
    }
    fn gpu_view(&self, _home: u32) -> crate::Result<crate::transport::GpuView> {
        Err(crate::Error::Protocol("no GPU here".into()))
    }
}

/// The TCP target applying peers' writes (`transport/tcp/serve.rs`): the
/// first three bytes size the segment (1 to 65,536 bytes, 0 to 255
/// words), the rest are frames. Invariants: an accepted write lands inside
/// its segment with its bytes, and its notification on a word of it; a
/// refused one changes nothing.
pub fn tcp_put(data: &[u8]) {
    let Some((sizes, rest)) = data.split_first_chunk::<3>() else {
        return;
    };
    let size = u16::from_le_bytes([sizes[0], sizes[1]]) as usize + 1;
    let seg = ModelSegment {
        data: Mutex::new(vec![0xA5; size]),
        words: Mutex::new(vec![0; sizes[2] as usize]),
    };
    let apply = |p: &PutRef<'_>| {
        let before = (
            seg.data.lock().expect("not poisoned").clone(),
            seg.words.lock().expect("not poisoned").clone(),
        );
        // The TCP target's checks (`serve::put`), then what it does with a
        // host segment once they pass.
        let applied = crate::transport::tcp::serve::check_put(&seg, p).and_then(|()| {
            seg.put(p.offset, p.data.as_ptr(), p.data.len(), Via::INTERNAL)
                .map_err(|e| e.to_string())?;
            if let Some((id, value)) = p.notify {
                seg.notify(id, value, Via::INTERNAL)
                    .map_err(|e| e.to_string())?;
            }
            Ok(())
        });
        match applied {
            Ok(()) => {
                let d = seg.data.lock().expect("not poisoned");
                let at = p.offset as usize;
                assert_eq!(&d[at..at + p.data.len()], p.data, "the bytes written");
                if let Some((id, value)) = p.notify {
                    assert_eq!(seg.words.lock().expect("not poisoned")[id as usize], value);
                }
            }
            Err(_) => {
                let after = (
                    seg.data.lock().expect("not poisoned").clone(),
                    seg.words.lock().expect("not poisoned").clone(),
                );
                assert!(before == after, "a refused write changed the segment");
            }
        }
    };
    let _ = frame::for_each_frame(rest, |f| match f {
        Frame::Put(p) => apply(&p),
        Frame::Msg(Message::Put {
            queue,
            seg,
            offset,
            notify,
            data,
        }) => apply(&PutRef {
            queue,
            seg,
            offset,
            data: &data,
            notify,
        }),
        Frame::Msg(_) => {}
    });
}

/// The handshake's proof of the job key (`net/auth.rs`). First byte 0:
/// the rest is a peer's answer, which without the key must be refused.
/// Otherwise the rest is a payload answered with the key, then changed
/// at the positions the input names: an accepted answer must give the
/// payload that was authenticated.
pub fn handshake(data: &[u8]) {
    const KEY: &[u8] = b"fuzzing job key, 32 bytes long..";
    const PURPOSE: &str = "gaspi-fuzz-v1";
    let nonce = [7u8; 32];
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode == 0 {
        let got = crate::net::auth::verify::<Vec<u8>>(KEY, PURPOSE, &nonce, rest, "fuzzer");
        assert!(got.is_err(), "an answer without the key was accepted");
        return;
    }
    let split = (mode as usize).min(rest.len());
    let (payload, changes) = rest.split_at(split);
    let payload = payload.to_vec();
    let mut answer =
        crate::net::auth::answer_frame(KEY, PURPOSE, &nonce, &payload).expect("an answer encodes");
    let mut body = answer.split_off(4);
    let unchanged = crate::net::auth::verify::<Vec<u8>>(KEY, PURPOSE, &nonce, &body, "fuzzer")
        .expect("a true answer");
    assert_eq!(unchanged, payload, "the authenticated payload");
    for pair in changes.chunks_exact(2) {
        if !body.is_empty() {
            let at = pair[0] as usize % body.len();
            body[at] ^= pair[1];
        }
    }
    if let Ok(got) = crate::net::auth::verify::<Vec<u8>>(KEY, PURPOSE, &nonce, &body, "fuzzer") {
        assert_eq!(
            got, payload,
            "a changed answer was accepted with another payload"
        );
    }
}

/// The start-up rendezvous messages (`net/rendezvous.rs`): see there.
pub fn rendezvous(data: &[u8]) {
    crate::net::rendezvous::fuzz_messages(data);
}

/// A segment descriptor a peer registers (`model/descriptor.rs`), remote
/// keys included. Invariants: a decoded descriptor encodes back to a
/// descriptor equal to it; one that `validate` accepts has its size in
/// 1..=ceiling and its data, notification area and GPU words inside the
/// memory it names (checked here again in 128-bit arithmetic).
pub fn descriptor(data: &[u8]) {
    let Ok(d) = frame::decode::<SegmentDescriptor>(data) else {
        return;
    };
    let again: SegmentDescriptor =
        frame::decode(&frame::encode_body(&d).expect("encodes")).expect("decodes");
    assert_eq!(again, d, "a descriptor does not survive its round trip");
    for k in &d.keys {
        assert!(d.key(&k.transport).is_some(), "a key is found by its name");
    }
    if d.validate().is_err() {
        return;
    }
    let wide = |v: u64| v as u128;
    assert!(d.size >= 1 && d.size <= crate::SEGMENT_SIZE_CEILING);
    assert!(wide(d.data_offset) + wide(d.size) <= wide(d.data.len()));
    let area = 128 + 4 * wide(d.notification_count.into());
    assert_eq!(
        area,
        gaspi_notify::NotificationArea::bytes_for(d.notification_count) as u128,
        "the area's size"
    );
    assert!(wide(d.notifications_offset) + area <= wide(d.notifications.len()));
    if let Some(at) = d.device_words_offset {
        assert!(at >= d.size, "GPU words inside the data");
        let end = wide(d.data_offset) + wide(at) + 4 * wide(d.notification_count.into());
        assert!(
            end <= wide(d.data.len()),
            "GPU words outside the allocation"
        );
    }
}

/// The passive messages a peer sends (`passive.rs`): frames whose
/// `Passive` messages go to an inbox. Invariants: the inbox takes a
/// message of 1 to `PASSIVE_MAX` bytes whole, and refuses any other size
/// without a trace.
pub fn passive(data: &[u8]) {
    let inbox = crate::passive::Inbox::default();
    let _ = frame::for_each_frame(data, |f| {
        let Frame::Msg(Message::Passive { data }) = f else {
            return;
        };
        let before = inbox.queue.lock().expect("not poisoned").len();
        let fits = (1..=crate::PASSIVE_MAX).contains(&(data.len() as u64));
        let copy = data.clone();
        let taken = inbox.push(crate::Rank(1), data).is_ok();
        assert_eq!(taken, fits, "a passive message of {} bytes", copy.len());
        let q = inbox.queue.lock().expect("not poisoned");
        if taken {
            assert_eq!(q.back().map(|(_, d)| d), Some(&copy));
            assert_eq!(q.len(), before + 1);
        } else {
            assert_eq!(q.len(), before, "a refused message was queued");
        }
    });
}

/// Seeds for the corpora from recorded traffic: `streams` are the bytes
/// of each direction of each TCP connection of a run (`fuzz/seed.sh`
/// records a test run and splits it); returns (target, input) pairs, at
/// most `per_target` distinct ones per target.
pub fn seeds_from_streams(streams: &[Vec<u8>], per_target: usize) -> Vec<(&'static str, Vec<u8>)> {
    let mut out: Vec<(&'static str, Vec<u8>)> = Vec::new();
    let mut add = |target: &'static str, bytes: Vec<u8>| {
        let n = out.iter().filter(|(t, _)| *t == target).count();
        if n < per_target && !out.iter().any(|(t, b)| *t == target && *b == bytes) {
            out.push((target, bytes));
        }
    };
    for stream in streams {
        let frames = split_frames(stream);
        for (i, f) in frames.iter().enumerate() {
            let body = &f[4..];
            // The handshake: an answer is (payload, mac).
            if let Ok((payload, mac)) = frame::decode::<(Vec<u8>, Vec<u8>)>(body) {
                if mac.len() == 32 && i == 0 {
                    let mut h = vec![0u8];
                    h.extend_from_slice(body);
                    add("handshake", h);
                    let mut h = vec![payload.len().clamp(1, 255) as u8];
                    h.extend_from_slice(&payload);
                    add("handshake", h);
                    add("rendezvous", payload);
                    continue;
                }
            }
            match frame::decode::<Message>(body) {
                Ok(Message::Register { desc, .. }) => {
                    add("descriptor", frame::encode_body(&*desc).expect("encodes"))
                }
                Ok(_) => {}
                Err(_) => add("rendezvous", body.to_vec()),
            }
        }
        // Runs of up to 8 frames (2 KiB at most) for the frame targets.
        let mut at = 0;
        while at < frames.len() {
            let mut group = Vec::new();
            let mut n = 0;
            while at + n < frames.len() && n < 8 && group.len() + frames[at + n].len() <= 2048 {
                group.extend_from_slice(frames[at + n]);
                n += 1;
            }
            at += n.max(1);
            if group.is_empty() {
                continue;
            }
            let mut kinds = (false, false);
            let _ = frame::for_each_frame(&group, |f| match f {
                Frame::Put(_) => kinds.0 = true,
                Frame::Msg(Message::Passive { .. }) => kinds.1 = true,
                Frame::Msg(_) => {}
            });
            if kinds.0 {
                let mut t = vec![0xFF, 0x0F, 16]; // 4 KiB, 16 words
                t.extend_from_slice(&group);
                add("tcp_put", t);
            }
            if kinds.1 {
                add("passive", group.clone());
            }
            add("frames", group);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    /// Writes seeds from recorded streams (`fuzz/seed.sh` runs it):
    /// GASPI_FUZZ_STREAMS names the folder of streams, GASPI_FUZZ_OUT the
    /// corpus root. Ignored unless asked for.
    #[test]
    #[ignore]
    fn write_seeds_from_recorded_streams() {
        let (Ok(from), Ok(to)) = (
            std::env::var("GASPI_FUZZ_STREAMS"),
            std::env::var("GASPI_FUZZ_OUT"),
        ) else {
            println!("SKIPPED: set GASPI_FUZZ_STREAMS and GASPI_FUZZ_OUT");
            return;
        };
        let mut streams = Vec::new();
        let mut paths: Vec<_> = std::fs::read_dir(&from)
            .expect("the streams folder")
            .map(|e| e.expect("an entry").path())
            .collect();
        paths.sort();
        for p in paths {
            streams.push(std::fs::read(p).expect("a stream"));
        }
        let seeds = super::seeds_from_streams(&streams, 30);
        for (i, (target, bytes)) in seeds.iter().enumerate() {
            let dir = std::path::Path::new(&to).join(target);
            std::fs::create_dir_all(&dir).expect("the corpus folder");
            std::fs::write(dir.join(format!("seed-{i:04}")), bytes).expect("a seed");
        }
        println!("{} seeds from {} streams", seeds.len(), streams.len());
    }

    /// Every committed corpus input (`fuzz/corpus/<target>/`) through its
    /// target's checks: the fuzzers' findings, once fixed, stay fixed.
    #[test]
    fn the_fuzz_corpora_keep_their_invariants() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
        let mut total = 0;
        for (name, check) in super::TARGETS {
            let dir = root.join(name);
            let entries = std::fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("the corpus of {name} at {}: {e}", dir.display()));
            for entry in entries {
                let path = entry.expect("a directory entry").path();
                let bytes = std::fs::read(&path).expect("a corpus file");
                let outcome = std::panic::catch_unwind(|| check(&bytes));
                assert!(
                    outcome.is_ok(),
                    "{name}: {} breaks an invariant",
                    path.display()
                );
                total += 1;
            }
        }
        assert!(total > 0, "no corpus inputs under {}", root.display());
        println!("{total} corpus inputs replayed");
    }
}
