//! What each frame from a peer means: the front hands it to the service
//! that owns it (segment registrations to the tables, requests and answers
//! of the TCP transport to `transport/tcp/serve.rs`, replies to the peers,
//! group commits to the group table, passive messages to the inbox,
//! atomics to the atomics). The progress engine and waiting threads read
//! connections for this context (`progress.rs`, `waiter_progress.rs`)
//! through the traits implemented here.

use crate::base::Base;
use crate::context::Inner;
use crate::model::ids::{Rank, RankState};
use crate::net::frame::{Frame, Message, PutHead};
use crate::net::peers::Peers;
use crate::net::reader::{read_available, FrameHandler, ReadState, Reader};
use crate::progress::EngineHost;
use crate::transport::tcp::serve::{self as tcp, Connection, DirectPut, SettlesOut};
use crate::waiter_progress::{WaiterHost, WaiterProgress};

impl EngineHost for Inner {
    #[inline]
    fn base(&self) -> &Base {
        &self.base
    }

    #[inline]
    fn waiter_progress(&self) -> &WaiterProgress {
        &self.waiter_progress
    }

    fn send_owed_answers(&self) {
        Inner::send_owed_answers(self)
    }

    fn drain_network(&self) {
        for t in &self.network {
            t.progress();
        }
    }

    #[inline]
    fn gpu_work_pending(&self) -> bool {
        self.gpu_apply.pending()
    }
}

impl WaiterHost for Inner {
    #[inline]
    fn peers(&self) -> &Peers {
        &self.base.peers
    }

    fn send_owed_answers(&self) {
        Inner::send_owed_answers(self)
    }

    fn read_as_waiter(&self, conn: &Connection, state: &mut ReadState<DirectPut>) -> bool {
        read_available(conn, state, self, Reader::Waiter)
    }
}

/// The engine and the waiters read connections for this rank's context:
/// control frames are handled here ([`handle`]), the TCP transport's
/// requests and answers by `transport/tcp/serve.rs`.
impl FrameHandler for Inner {
    type Direct = tcp::DirectPut;
    type Answers = tcp::Settles;

    #[inline]
    fn frame(
        &self,
        from: Rank,
        frame: Frame<'_>,
        said_goodbye: &mut bool,
        settles: &mut tcp::Settles,
    ) {
        match frame {
            Frame::Put(put) => tcp::put(self, from, &put, settles),
            Frame::Msg(m) => handle(from, said_goodbye, m, self, settles),
        }
    }

    #[inline]
    fn start_direct(&self, head: PutHead, have: &[u8]) -> Option<tcp::DirectPut> {
        tcp::DirectPut::start(self, head, have)
    }

    #[inline]
    fn finish_direct(&self, from: Rank, direct: tcp::DirectPut, settles: &mut tcp::Settles) {
        direct.finish(self, from, settles)
    }

    #[inline]
    fn answer(&self, from: Rank, mut settles: tcp::Settles, reader: Reader) {
        match reader {
            Reader::Engine => settles.flush(self, from),
            Reader::Waiter => settles.stash(self, from),
        }
    }
}

fn handle(
    from: Rank,
    said_goodbye: &mut bool,
    msg: Message,
    inner: &Inner,
    settles: &mut tcp::Settles,
) {
    match msg {
        Message::Register { token, seg, desc } => {
            let result = inner
                .attach(from, seg as usize, &desc)
                .map_err(|e| e.to_string());
            if let Err(e) = &result {
                tracing::warn!("could not map {} of {from}: {e}", crate::SegId(seg));
            }
            let _ = inner
                .base
                .peers
                .send(from, &Message::Reply { token, result });
        }
        Message::Unregister { token, seg } => {
            inner.detach(from, seg as usize);
            let _ = inner.base.peers.send(
                from,
                &Message::Reply {
                    token,
                    result: Ok(()),
                },
            );
        }
        Message::Reply { token, result } => {
            if !tcp::fence_answered(inner, token) {
                inner.base.peers.complete(token, result.map(|()| 0))
            }
        }
        Message::Put {
            queue,
            seg,
            offset,
            data,
            notify,
        } => {
            let put = crate::net::frame::PutRef {
                queue,
                seg,
                offset,
                data: &data,
                notify,
            };
            tcp::put(inner, from, &put, settles)
        }
        Message::Notify {
            queue,
            seg,
            id,
            value,
        } => tcp::notify(inner, from, queue, seg, id, value, settles),
        Message::Get {
            token,
            seg,
            offset,
            len,
            into,
        } => tcp::get(inner, from, token, seg, offset, len, into, settles),
        Message::Data { token, result } => tcp::data(inner, from, token, result),
        Message::Fence { token } => tcp::fence(inner, from, token, settles),
        Message::Settled {
            queue,
            count,
            failure,
        } => tcp::settled(inner, from, queue, count, failure),
        Message::ValueReply { token, result } => inner.base.peers.complete(token, result),
        Message::Atomic {
            token,
            seg,
            offset,
            op,
        } => {
            let result = inner
                .owner_atomic(crate::SegId(seg), offset, op)
                .map_err(|e| e.to_string());
            let _ = inner
                .base
                .peers
                .send(from, &Message::ValueReply { token, result });
        }
        Message::Ping { token } => {
            let _ = inner.base.peers.send(
                from,
                &Message::Reply {
                    token,
                    result: Ok(()),
                },
            );
        }
        Message::GroupCommit { group, hash } => inner.groups.commit_received(group, from, hash),
        Message::Passive { data } => {
            if let Err(why) = inner.passive.push(from, data) {
                tracing::warn!("dropped {why}");
            }
        }
        Message::Goodbye => *said_goodbye = true,
        // A rank that ended in order, reported by a third: a rank connected
        // to it learns it from its own connection, after everything the
        // rank sent it (a signal still in flight must not be overtaken by
        // the news); the others take the news.
        Message::PeerGone {
            rank,
            terminated: true,
        } if rank < inner.base.size
            && rank != inner.base.rank.0
            && inner.base.peers[Rank(rank)].control.get().is_some() =>
        {
            tracing::debug!("{from} reports rank {rank} terminated; its own connection will say");
        }
        // An orderly end of a rank not connected here (yet): it may have
        // connected a moment ago, its connection still in its handshake at
        // the engine with frames it sent before its end. The engine
        // decides once no handshake is pending.
        Message::PeerGone {
            rank,
            terminated: true,
        } if rank < inner.base.size && rank != inner.base.rank.0 => {
            tracing::debug!("{from} reports rank {rank} terminated; the engine decides");
            inner
                .base
                .peers
                .relayed_ends
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Rank(rank));
            inner.base.peers.wake_engine();
        }
        Message::PeerGone { rank, .. } if rank < inner.base.size && rank != inner.base.rank.0 => {
            tracing::debug!("{from} reports rank {rank} dead");
            inner.base.peers.mark_gone(Rank(rank), RankState::Corrupt);
        }
        Message::PeerGone { rank, .. } => {
            tracing::warn!("{from} reports an impossible rank {rank} gone; ignored")
        }
        Message::Heartbeat => {}
        Message::Kill => {
            tracing::warn!("killed by {from} (proc_kill)");
            // SAFETY: raising SIGKILL on ourselves has no memory-safety
            // implications; the process ends at once, as proc_kill promises.
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        }
    }
}
