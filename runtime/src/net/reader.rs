//! Reading a connection: the one progress entry point.
//!
//! A peer's control connection is read by whichever thread holds its read
//! state: the progress engine (`crate::progress`, edge-triggered `epoll`)
//! or an application thread that waits for that peer
//! (`crate::waiter_progress`, a level-triggered set). Both call
//! [`read_available`], which reads the socket until it would block and
//! hands every whole frame, in the order it came, to a [`FrameHandler`]:
//! the layer above that knows what the frames mean. So frames are handled
//! once and in order whichever thread reads, and this layer knows nothing
//! of GASPI's calls.
//!
//! Two things of the TCP transport shape the loop, and reach it through
//! the handler: a large write's data is read from the socket straight into
//! its segment ([`FrameHandler::start_direct`], a [`DirectRead`]) instead of
//! through the frame buffer, and the answers a read owes are gathered
//! ([`FrameHandler::Answers`]) and sent once per read, at once from the
//! engine and with the application's next frame from a waiter
//! ([`FrameHandler::answer`]).
//!
//! The handler is a type parameter, not a trait object: the engine and
//! the waiters call the same monomorphic code as before this seam (every
//! write over TCP passes here; no indirect call per frame).

use super::frame::{for_each_frame, put_head, Frame, PutHead, MAX_FRAME};
use crate::model::ids::Rank;
use std::io::Read;
use std::net::TcpStream;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

/// The reading side of one control connection. The socket is shared
/// with the peer's outbox (`super::connection::ControlOut`) when it is
/// the one this rank sends on.
///
/// Whoever holds `state` reads the socket until it would block and
/// handles every whole frame, so frames are handled once and in order
/// whichever thread reads.
#[derive(Debug)]
pub(crate) struct Connection<D> {
    pub rank: Rank,
    pub stream: Arc<TcpStream>,
    pub state: Mutex<ReadState<D>>,
}

/// What a reader of a connection keeps between reads.
#[derive(Debug)]
pub(crate) struct ReadState<D> {
    /// Bytes read and not yet taken as frames: `buf[..filled]`.
    buf: Vec<u8>,
    filled: usize,
    /// The peer said goodbye: its end, when it comes, is orderly.
    pub said_goodbye: bool,
    /// A large write whose data is being read straight into its segment.
    direct: Option<D>,
    /// The last frame was such a write: the next is likely one too, so a
    /// read that starts a frame asks for its head only ([`AFTER_LARGE`]),
    /// and the data follows straight into the segment instead of through
    /// the frame buffer.
    after_large: bool,
    /// Bytes read so far (wrapping): tells a reader whether its turn read
    /// anything.
    pub read: u64,
    /// A reader that was not the engine saw the connection end (or fail,
    /// or send garbage): the engine decides what that means when woken.
    pub ended: bool,
}

impl<D> Default for ReadState<D> {
    fn default() -> Self {
        ReadState {
            buf: Vec::new(),
            filled: 0,
            said_goodbye: false,
            direct: None,
            after_large: false,
            read: 0,
            ended: false,
        }
    }
}

impl<D> Connection<D> {
    /// A connection to `rank` over `stream`, nothing read yet.
    pub fn new(rank: Rank, stream: Arc<TcpStream>) -> Self {
        Connection {
            rank,
            stream,
            state: Mutex::new(ReadState::default()),
        }
    }

    /// Locks the read state (a reader that panicked left it consistent:
    /// bytes are taken only as whole frames).
    pub fn lock(&self) -> MutexGuard<'_, ReadState<D>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The read state if no other thread reads the connection now.
    pub fn try_lock(&self) -> Option<MutexGuard<'_, ReadState<D>>> {
        match self.state.try_lock() {
            Ok(s) => Some(s),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }
}

/// Who reads a connection: the answers it owes go out at once from the
/// engine, and with the application's next frame from a waiter
/// (`transport/tcp/serve.rs`, `SettleStash`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reader {
    Engine,
    Waiter,
}

/// The data of a large write being read from the socket straight into
/// the memory it is for.
pub(crate) trait DirectRead {
    /// Bytes of data still to come.
    fn left(&self) -> usize;
    /// Reads what `socket` has of the data into place: `Ok(0)` at the end
    /// of the stream, `WouldBlock` when nothing is there.
    fn read_from(&mut self, socket: &TcpStream) -> std::io::Result<usize>;
}

/// What the frames of a connection mean: the layer above the network,
/// which [`read_available`] hands every whole frame to.
pub(crate) trait FrameHandler {
    /// A large write read straight into place.
    type Direct: DirectRead;
    /// The answers the frames of one read owe their sender, gathered to
    /// be sent once.
    type Answers: Default;
    /// Handles one frame from `from`; a goodbye sets `said_goodbye`.
    fn frame(
        &self,
        from: Rank,
        frame: Frame<'_>,
        said_goodbye: &mut bool,
        answers: &mut Self::Answers,
    );
    /// A direct read of the `Put` whose head is `head` and of whose data
    /// `have` arrived already; `None`: it is read whole into the frame
    /// buffer and handled by [`Self::frame`].
    fn start_direct(&self, head: PutHead, have: &[u8]) -> Option<Self::Direct>;
    /// The data of `direct` is all in.
    fn finish_direct(&self, from: Rank, direct: Self::Direct, answers: &mut Self::Answers);
    /// Sends (or leaves for later, per `reader`) the answers one read owes.
    fn answer(&self, from: Rank, answers: Self::Answers, reader: Reader);
}

/// Bytes a reader asks the socket for at least (more when the frame being
/// read needs more).
const CHUNK: usize = 64 * 1024;

/// Bytes a reader asks for when a frame starts right after a large write
/// (`ReadState::after_large`): a `Put`'s head and a little more, so that
/// the next large write's data is not read into the frame buffer and then
/// copied into its segment. H100, two namespaces, same call (6 launches
/// each): 64 KiB ping-pong 23.4 -> 19.3 us (medians), 1.18 -> 1.02x the
/// raw socket; 1 MiB within the noise.
const AFTER_LARGE: usize = 4096;

/// Reads and handles everything available on `conn` (whose `state` the
/// caller holds); true when the connection ended, failed or sent
/// something that is not a frame.
pub(crate) fn read_available<H: FrameHandler>(
    conn: &Connection<H::Direct>,
    st: &mut ReadState<H::Direct>,
    handler: &H,
    reader: Reader,
) -> bool {
    loop {
        // A large write: its data goes from the socket into its segment.
        if let Some(d) = &mut st.direct {
            let got = d.read_from(&conn.stream);
            let left = d.left();
            if let Ok(n) = got {
                st.read = st.read.wrapping_add(n as u64);
            }
            match got {
                Ok(0) => return true,
                // A waiter's set is level-triggered: a short read means the
                // socket is empty for now, and the set will say when not.
                Ok(_) if left > 0 && reader == Reader::Waiter => return false,
                Ok(_) if left > 0 => {}
                Ok(_) => {
                    let mut answers = H::Answers::default();
                    if let Some(d) = st.direct.take() {
                        handler.finish_direct(conn.rank, d, &mut answers);
                    }
                    st.after_large = true;
                    handler.answer(conn.rank, answers, reader);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::debug!("{}: control connection error: {e}", conn.rank);
                    return true;
                }
            }
            continue;
        }
        // Read into the frame buffer, as much as the frame being read
        // still needs (at least a chunk). The buffer only grows (zeroed
        // once) and `filled` says how much of it holds bytes read.
        let have = st.filled;
        let want = if have == 0 && st.after_large {
            AFTER_LARGE
        } else {
            frame_remainder(&st.buf[..have]).max(CHUNK)
        };
        if st.buf.len() < have + want {
            st.buf.resize(have + want, 0);
        }
        let got = (&*conn.stream).read(&mut st.buf[have..have + want]);
        match got {
            Ok(0) => return true,
            Ok(n) => {
                st.filled += n;
                st.read = st.read.wrapping_add(n as u64);
                let rank = conn.rank;
                // One answer per queue for everything this read applied.
                let mut answers = H::Answers::default();
                // Every frame handled in the order it came.
                let said_goodbye = &mut st.said_goodbye;
                let (used, taken) = for_each_frame(&st.buf[..st.filled], |frame| {
                    handler.frame(rank, frame, said_goodbye, &mut answers)
                });
                let filled = st.filled;
                st.buf.copy_within(used..filled, 0);
                st.filled -= used;
                if used > 0 {
                    st.after_large = false;
                }
                handler.answer(rank, answers, reader);
                if let Err(e) = taken {
                    tracing::error!("{}: {e}; dropping the connection", conn.rank);
                    return true;
                }
                // What is left starts a frame not read whole: if it is a
                // large write, the rest of its data goes straight into
                // the segment (written once, not copied from here).
                if let Some(head) = put_head(&st.buf[..st.filled]) {
                    let have = &st.buf[head.head..st.filled];
                    if let Some(d) = handler.start_direct(head, have) {
                        st.filled = 0;
                        st.direct = Some(d);
                    }
                }
                // The engine's `epoll` is edge-triggered: it reads until the
                // socket would block. A waiter's is level-triggered: a short
                // read ends its turn without one more system call.
                if reader == Reader::Waiter && n < want && st.direct.is_none() {
                    return false;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                tracing::debug!("{}: control connection error: {e}", conn.rank);
                return true;
            }
        }
    }
}

/// Bytes the frame at the front of `buf` still lacks (0 when unknown).
fn frame_remainder(buf: &[u8]) -> usize {
    if buf.len() < 4 {
        return 0;
    }
    let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    (4 + len.min(MAX_FRAME)).saturating_sub(buf.len())
}
