//! The progress engine: one thread per rank serving what cannot be one-sided.
//!
//! It reads the control connections of every peer (one `epoll` through
//! `mio`), maps segments peers register, answers pings, and notices peers
//! that go away: a connection that closes without a goodbye marks its rank
//! corrupt in the error-state vector and wakes every waiter, so calls that
//! need that rank fail with an error naming it instead of hanging. It blocks
//! in `epoll_wait` when there is nothing to do: no core is burnt.

use crate::context::Inner;
use crate::error::{Error, Result};
use crate::transport::tcp::serve as tcp;
use crate::types::{Rank, RankState};
use crate::wire::{take_frames, Message};
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token, Waker};
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

const WAKER: Token = Token(usize::MAX);

/// Handle on the running engine thread.
#[derive(Debug)]
pub(crate) struct ProgressEngine {
    waker: Arc<Waker>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

struct Connection {
    rank: Rank,
    stream: TcpStream,
    buf: Vec<u8>,
    said_goodbye: bool,
}

impl ProgressEngine {
    /// Starts the thread over the reading halves of the control connections.
    pub fn start(
        inner: Arc<Inner>,
        readers: Vec<(Rank, std::net::TcpStream)>,
    ) -> Result<ProgressEngine> {
        let poll = Poll::new().map_err(|e| Error::io("creating the progress engine's poll", e))?;
        let waker = Arc::new(
            Waker::new(poll.registry(), WAKER)
                .map_err(|e| Error::io("creating the progress engine's waker", e))?,
        );
        let mut conns = Vec::with_capacity(readers.len());
        for (i, (rank, s)) in readers.into_iter().enumerate() {
            s.set_nonblocking(true)
                .and_then(|_| s.set_read_timeout(None))
                .and_then(|_| s.set_write_timeout(None))
                .map_err(|e| Error::io("configuring a control socket", e))?;
            let mut stream = TcpStream::from_std(s);
            poll.registry()
                .register(
                    &mut stream,
                    Token(i),
                    Interest::READABLE | Interest::WRITABLE,
                )
                .map_err(|e| Error::io("registering a control socket", e))?;
            conns.push(Some(Connection {
                rank,
                stream,
                buf: Vec::new(),
                said_goodbye: false,
            }));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name(format!("gaspi-progress-{}", inner.rank.0))
            .spawn(move || run(poll, conns, inner, stop2))
            .map_err(|e| Error::io("starting the progress engine", e))?;
        Ok(ProgressEngine {
            waker,
            stop,
            thread: Some(thread),
        })
    }

    /// Stops and joins the thread.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ProgressEngine {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(
    mut poll: Poll,
    mut conns: Vec<Option<Connection>>,
    inner: Arc<Inner>,
    stop: Arc<AtomicBool>,
) {
    let mut events = Events::with_capacity(64);
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        if stop.load(Ordering::Acquire) {
            return;
        }
        if let Err(e) = poll.poll(&mut events, None) {
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            tracing::error!("progress engine: poll failed: {e}");
            return;
        }
        for ev in events.iter() {
            if ev.token() == WAKER {
                continue;
            }
            let i = ev.token().0;
            let Some(conn) = conns[i].as_mut() else {
                continue;
            };
            if ev.is_writable() {
                // Room again after a write found the socket full: send what
                // the outbox holds (`control.rs`). A failure shows on the
                // reading side too, which decides what it means.
                if let Some(out) = &inner.peers[conn.rank.0 as usize].control {
                    let _ = out.flush();
                }
            }
            let closed = read_available(conn, &mut chunk, &inner);
            if closed {
                let conn = conns[i].take().expect("present");
                let mut stream = conn.stream;
                let _ = poll.registry().deregister(&mut stream);
                let state = if conn.said_goodbye {
                    RankState::Terminated
                } else {
                    RankState::Corrupt
                };
                inner.mark(conn.rank, state);
            }
        }
    }
}

/// Reads and handles everything available; true when the connection ended.
fn read_available(conn: &mut Connection, chunk: &mut [u8], inner: &Inner) -> bool {
    loop {
        match conn.stream.read(chunk) {
            Ok(0) => return true,
            Ok(n) => {
                conn.buf.extend_from_slice(&chunk[..n]);
                match take_frames(&mut conn.buf) {
                    Ok(msgs) => {
                        for m in msgs {
                            handle(conn, m, inner);
                        }
                    }
                    Err(e) => {
                        tracing::error!("{}: {e}; dropping the connection", conn.rank);
                        return true;
                    }
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

fn handle(conn: &mut Connection, msg: Message, inner: &Inner) {
    let from = conn.rank;
    match msg {
        Message::Register { token, seg, desc } => {
            let result = inner
                .attach(from, seg as usize, &desc)
                .map_err(|e| e.to_string());
            if let Err(e) = &result {
                tracing::warn!("could not map {} of {from}: {e}", crate::SegId(seg));
            }
            let _ = inner.send(from, &Message::Reply { token, result });
        }
        Message::Unregister { token, seg } => {
            inner.detach(from, seg as usize);
            let _ = inner.send(
                from,
                &Message::Reply {
                    token,
                    result: Ok(()),
                },
            );
        }
        Message::Reply { token, result } => {
            if !tcp::fence_answered(inner, token) {
                inner.complete(token, result.map(|()| 0))
            }
        }
        Message::Put {
            queue,
            seg,
            offset,
            data,
            notify,
        } => tcp::put(inner, from, queue, seg, offset, &data, notify),
        Message::Notify {
            queue,
            seg,
            id,
            value,
        } => tcp::notify(inner, from, queue, seg, id, value),
        Message::Get {
            token,
            seg,
            offset,
            len,
        } => tcp::get(inner, from, token, seg, offset, len),
        Message::Data { token, result } => tcp::data(inner, from, token, result),
        Message::Fence { token } => tcp::fence(inner, from, token),
        Message::Settled {
            queue,
            count,
            failure,
        } => tcp::settled(inner, from, queue, count, failure),
        Message::ValueReply { token, result } => inner.complete(token, result),
        Message::Atomic {
            token,
            seg,
            offset,
            op,
        } => {
            let result = inner
                .owner_atomic(crate::SegId(seg), offset, op)
                .map_err(|e| e.to_string());
            let _ = inner.send(from, &Message::ValueReply { token, result });
        }
        Message::Ping { token } => {
            let _ = inner.send(
                from,
                &Message::Reply {
                    token,
                    result: Ok(()),
                },
            );
        }
        Message::GroupCommit { group, hash } => inner.groups.commit_received(group, from, hash),
        Message::Passive { data } => inner.passive.push(from, data),
        Message::Goodbye => conn.said_goodbye = true,
        Message::Kill => {
            tracing::warn!("killed by {from} (proc_kill)");
            // SAFETY: raising SIGKILL on ourselves has no memory-safety
            // implications; the process ends at once, as proc_kill promises.
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        }
    }
}
