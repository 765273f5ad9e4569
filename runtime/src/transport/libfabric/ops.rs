//! Operations on an endpoint: write, notify, read, u64 atomics, and
//! reading their completions.
//!
//! Every operation takes a [`Token`]-`id` and produces exactly one
//! [`Event`] carrying `Token { peer, id }` when it completes (or fails),
//! read with [`Endpoint::poll`]. The token travels as the operation's
//! libfabric context (`op_context`), so nothing is allocated per
//! operation.
//!
//! A full endpoint (`-FI_EAGAIN`) is retried after reading completions
//! (which is also what frees room under manual progress); completions read
//! meanwhile are kept and handed out by the next `poll`.

use super::error::{is_again, strerror, FabricError, Result};
use super::info::NotifyOrder;
use super::memory::{LocalSlice, RemoteMemory};
use super::objects::{Deferred, Endpoint, Event, Peer, PeerOrder, Raw, Token, UNKNOWN_RANK};
use gaspi_libfabric_sys as sys;
use std::collections::{HashMap, VecDeque};
use std::ffi::c_void;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long posting may find the endpoint full before it gives up.
const POST_TIMEOUT: Duration = Duration::from_secs(30);

/// Set in every context: libfabric never sees a null one.
const VALID: u64 = 1 << 62;
/// Set in the context of a write the layer tracks (DeliveryComplete).
const TRACKED: u64 = 1 << 63;
/// Ranks fit 31 bits (the two bits above are the flags).
pub(crate) const MAX_RANK: u32 = (1 << 30) - 1;

fn context(token: Token, tracked: bool) -> *mut c_void {
    let mut c = VALID | ((token.peer as u64) << 32) | token.id as u64;
    if tracked {
        c |= TRACKED;
    }
    c as *mut c_void
}

/// One contiguous local buffer against one remote range: the single-element
/// `fi_msg_rma` that every write, notification and read here posts.
struct OneRange {
    local: *mut c_void,
    len: usize,
    desc: *mut c_void,
    remote: u64,
    key: u64,
    peer: sys::fi_addr_t,
    context: *mut c_void,
    data: u64,
}

/// Builds `range`'s message on the stack and hands it to `post`; the
/// message and what it points to live until `post` returns (libfabric
/// copies them during the call).
fn with_msg(range: OneRange, post: impl FnOnce(&sys::fi_msg_rma) -> isize) -> isize {
    let iov = sys::iovec {
        iov_base: range.local,
        iov_len: range.len,
    };
    let mut desc = range.desc;
    let rma = sys::fi_rma_iov {
        addr: range.remote,
        len: range.len,
        key: range.key,
    };
    let msg = sys::fi_msg_rma {
        msg_iov: &iov,
        desc: &mut desc,
        iov_count: 1,
        addr: range.peer,
        rma_iov: &rma,
        rma_iov_count: 1,
        context: range.context,
        data: range.data,
    };
    post(&msg)
}

fn decode(context: *mut c_void) -> (Token, bool) {
    let c = context as u64;
    (
        Token {
            peer: ((c >> 32) as u32) & MAX_RANK,
            id: c as u32,
        },
        c & TRACKED != 0,
    )
}

impl Endpoint {
    fn order(&self) -> NotifyOrder {
        self.attributes().order
    }

    /// Calls `post` until it does not report a full endpoint, reading
    /// completions in between (into the backlog).
    fn post(&self, peer: Peer, what: &'static str, mut post: impl FnMut() -> isize) -> Result<()> {
        let mut deadline = None;
        loop {
            let rc = post();
            if rc >= 0 {
                return Ok(());
            }
            if !is_again(rc) {
                let code = (-rc) as i32;
                return Err(FabricError::Peer {
                    peer: peer.rank,
                    code,
                    prov_errno: 0,
                    message: format!("{what}: {}", strerror(code)),
                });
            }
            let deadline = *deadline.get_or_insert_with(|| Instant::now() + POST_TIMEOUT);
            let mut read = Vec::new();
            let got = {
                let _in_order = self.reading_in_order();
                self.read_completions(&mut read)?;
                let got = !read.is_empty();
                self.state.backlog.lock().expect("backlog").extend(read);
                got
            };
            if !got && Instant::now() > deadline {
                return Err(FabricError::Timeout {
                    peer: peer.rank,
                    what,
                    timeout: POST_TIMEOUT,
                });
            }
        }
    }

    /// Writes `src` to `offset` of the peer's registration `dst`.
    pub(crate) fn write(
        &self,
        peer: Peer,
        src: LocalSlice<'_>,
        dst: &RemoteMemory,
        offset: u64,
        id: u32,
    ) -> Result<()> {
        let addr = dst.at(offset, src.len)?;
        let max = self.attributes().max_write;
        if src.len == 0 || src.len > max {
            return Err(FabricError::Invalid(format!(
                "a write of {} bytes (1 to {max} in one operation)",
                src.len
            )));
        }
        let token = Token {
            peer: peer.rank,
            id,
        };
        let tracked = self.order() == NotifyOrder::DeliveryComplete;
        let mut flags = sys::FI_COMPLETION as u64;
        if tracked {
            flags |= sys::FI_DELIVERY_COMPLETE as u64;
            self.peer_state(peer.rank, |p| p.outstanding += 1);
        } else if src.len <= self.attributes().inject_size {
            // Copied at the call: the provider need not keep the source.
            flags |= sys::FI_INJECT as u64;
        }
        let result = self.post(peer, "fi_writemsg", || {
            let range = OneRange {
                local: src.ptr.cast(),
                len: src.len,
                desc: src.desc,
                remote: addr,
                key: dst.key,
                peer: peer.addr,
                context: context(token, tracked),
                data: 0,
            };
            with_msg(range, |msg| {
                // SAFETY: `src` is registered memory borrowed for the call and,
                // by GASPI's rule, left unchanged until the completion; the
                // message structs live through the call, which copies them.
                unsafe { sys::fi_writemsg(self.ptr, msg, flags) }
            })
        });
        if result.is_err() && tracked {
            self.peer_state(peer.rank, |p| p.outstanding -= 1);
        }
        result
    }

    /// Writes `src` to `offset` of the peer's registration `dst` carrying
    /// `data` (`FI_REMOTE_CQ_DATA`): the peer's [`Endpoint::poll`] returns
    /// [`Event::Remote`]`(data)` once the bytes are in its memory. The
    /// runtime's notification in one operation instead of two, where the
    /// provider offers remote CQ data ([`super::Attributes::cq_data_bytes`]) and
    /// the target reads its queue anyway (manual progress): the target
    /// sets the word when it reads the event. Ordered after earlier
    /// writes to the peer like [`Self::notify`] (in-order and fence only).
    pub(crate) fn write_with_data(
        &self,
        peer: Peer,
        src: LocalSlice<'_>,
        dst: &RemoteMemory,
        offset: u64,
        data: u64,
        id: u32,
    ) -> Result<()> {
        let mut flags = self.with_data_flags()?;
        let attrs = self.attributes();
        let addr = dst.at(offset, src.len)?;
        if src.len == 0 || src.len > attrs.max_write {
            return Err(FabricError::Invalid(format!(
                "a write of {} bytes (1 to {} in one operation)",
                src.len, attrs.max_write
            )));
        }
        let token = Token {
            peer: peer.rank,
            id,
        };
        if src.len <= attrs.inject_size {
            flags |= sys::FI_INJECT as u64;
        }
        self.post(peer, "fi_writemsg (with data)", || {
            let range = OneRange {
                local: src.ptr.cast(),
                len: src.len,
                desc: src.desc,
                remote: addr,
                key: dst.key,
                peer: peer.addr,
                context: context(token, false),
                data,
            };
            with_msg(range, |msg| {
                // SAFETY: as in `write`.
                unsafe { sys::fi_writemsg(self.ptr, msg, flags) }
            })
        })
    }

    /// A write of no bytes that carries `data` as remote CQ data (a
    /// notification alone, see [`Self::write_with_data`]), addressed at
    /// `offset` of the peer's registration `words`; ordered after earlier
    /// writes to the peer like them.
    pub(crate) fn notify_with_data(
        &self,
        peer: Peer,
        words: &RemoteMemory,
        offset: u64,
        data: u64,
        id: u32,
    ) -> Result<()> {
        let flags = self.with_data_flags()? | sys::FI_INJECT as u64;
        let addr = words.at(offset, 0)?;
        let token = Token {
            peer: peer.rank,
            id,
        };
        self.post(peer, "fi_writemsg (notification as data)", || {
            let range = OneRange {
                local: std::ptr::null_mut(),
                len: 0,
                desc: std::ptr::null_mut(),
                remote: addr,
                key: words.key,
                peer: peer.addr,
                context: context(token, false),
                data,
            };
            with_msg(range, |msg| {
                // SAFETY: as in `write`; no bytes are read from the
                // (null) local address.
                unsafe { sys::fi_writemsg(self.ptr, msg, flags) }
            })
        })
    }

    /// Sets the 4-byte word at `offset` of the peer's registration `words`
    /// to `value`, after every write posted before it to that peer (the
    /// provider's [`NotifyOrder`]).
    pub(crate) fn notify(
        &self,
        peer: Peer,
        words: &RemoteMemory,
        offset: u64,
        value: u32,
        id: u32,
    ) -> Result<()> {
        let addr = words.at(offset, 4)?;
        if !offset.is_multiple_of(4) {
            return Err(FabricError::Invalid(format!(
                "a notification word at offset {offset} (not 4-aligned)"
            )));
        }
        if self.attributes().inject_size < 4 {
            return Err(FabricError::Unsupported {
                provider: self.attributes().provider.clone(),
                what: "inject of 4 bytes",
            });
        }
        let word = Deferred {
            peer,
            addr,
            key: words.key,
            value,
            id,
        };
        if self.order() == NotifyOrder::DeliveryComplete {
            let mut peers = self.state.peers.lock().expect("peer order");
            let p = peers.entry(peer.rank).or_default();
            if p.outstanding > 0 || !p.deferred.is_empty() {
                p.deferred.push_back(word);
                return Ok(());
            }
        }
        self.post(peer, "fi_writemsg (notification)", || {
            self.try_notify(&word)
        })
    }

    /// One attempt at posting a notification word.
    fn try_notify(&self, word: &Deferred) -> isize {
        let token = Token {
            peer: word.peer.rank,
            id: word.id,
        };
        let mut flags = (sys::FI_INJECT | sys::FI_COMPLETION) as u64;
        if self.order() == NotifyOrder::Fence {
            flags |= sys::FI_FENCE as u64;
        }
        let value = word.value;
        let range = OneRange {
            local: (&value as *const u32).cast_mut().cast(),
            len: 4,
            desc: std::ptr::null_mut(),
            remote: word.addr,
            key: word.key,
            peer: word.peer.addr,
            context: context(token, false),
            data: 0,
        };
        with_msg(range, |msg| {
            // SAFETY: FI_INJECT: the 4 bytes are copied before the call
            // returns, so a stack value and no registration do; the structs
            // live through the call.
            unsafe { sys::fi_writemsg(self.ptr, msg, flags) }
        })
    }

    /// Reads `dst.len()` bytes at `offset` of the peer's registration
    /// `src` into `dst`.
    pub(crate) fn read(
        &self,
        peer: Peer,
        dst: LocalSlice<'_>,
        src: &RemoteMemory,
        offset: u64,
        id: u32,
    ) -> Result<()> {
        let addr = src.at(offset, dst.len)?;
        let max = self.attributes().max_write;
        if dst.len == 0 || dst.len > max {
            return Err(FabricError::Invalid(format!(
                "a read of {} bytes (1 to {max} in one operation)",
                dst.len
            )));
        }
        let token = Token {
            peer: peer.rank,
            id,
        };
        self.post(peer, "fi_readmsg", || {
            let range = OneRange {
                local: dst.ptr.cast(),
                len: dst.len,
                desc: dst.desc,
                remote: addr,
                key: src.key,
                peer: peer.addr,
                context: context(token, false),
                data: 0,
            };
            with_msg(range, |msg| {
                // SAFETY: `dst` is registered memory the caller leaves alone
                // until the completion; the structs live through the call.
                unsafe { sys::fi_readmsg(self.ptr, msg, sys::FI_COMPLETION as u64) }
            })
        })
    }

    fn atomic_args(
        &self,
        target: &RemoteMemory,
        offset: u64,
        scratch: &LocalSlice<'_>,
    ) -> Result<u64> {
        if !self.atomics {
            return Err(FabricError::Unsupported {
                provider: self.attributes().provider.clone(),
                what: "u64 fetch-add and compare-swap",
            });
        }
        if !offset.is_multiple_of(8)
            || scratch.len < 24
            || !(scratch.ptr as usize).is_multiple_of(8)
        {
            return Err(FabricError::Invalid(format!(
                "an atomic at offset {offset} (8-aligned) with {} bytes of scratch (24, 8-aligned)",
                scratch.len
            )));
        }
        target.at(offset, 8)
    }

    /// Adds `value` to the u64 at `offset` of the peer's registration
    /// `target`; the old value lands in `scratch[16..24]`. `scratch` (24
    /// registered bytes, 8-aligned: operand, unused, result) belongs to the
    /// operation until its completion.
    pub(crate) fn fetch_add(
        &self,
        peer: Peer,
        target: &RemoteMemory,
        offset: u64,
        value: u64,
        scratch: LocalSlice<'_>,
        id: u32,
    ) -> Result<()> {
        let addr = self.atomic_args(target, offset, &scratch)?;
        let token = Token {
            peer: peer.rank,
            id,
        };
        let operand = scratch.ptr.cast::<u64>();
        // SAFETY: 24 aligned bytes of registered memory (checked) that the
        // caller hands over until the completion.
        unsafe { operand.write_volatile(value) };
        self.post(peer, "fi_fetch_atomic", || {
            // SAFETY: operand and result in the scratch (see above).
            unsafe {
                sys::fi_fetch_atomic(
                    self.ptr,
                    operand.cast(),
                    1,
                    scratch.desc,
                    operand.add(2).cast(),
                    scratch.desc,
                    peer.addr,
                    addr,
                    target.key,
                    sys::FI_UINT64,
                    sys::FI_SUM,
                    context(token, false),
                )
            }
        })
    }

    /// Sets the u64 at `offset` of the peer's registration `target` to
    /// `swap` if it equals `compare`; the old value lands in
    /// `scratch[16..24]` (see [`Self::fetch_add`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn compare_swap(
        &self,
        peer: Peer,
        target: &RemoteMemory,
        offset: u64,
        compare: u64,
        swap: u64,
        scratch: LocalSlice<'_>,
        id: u32,
    ) -> Result<()> {
        let addr = self.atomic_args(target, offset, &scratch)?;
        let token = Token {
            peer: peer.rank,
            id,
        };
        let words = scratch.ptr.cast::<u64>();
        // SAFETY: as in `fetch_add`.
        unsafe {
            words.write_volatile(swap);
            words.add(1).write_volatile(compare);
        }
        self.post(peer, "fi_compare_atomic", || {
            // SAFETY: swap, compare and result in the scratch.
            unsafe {
                sys::fi_compare_atomic(
                    self.ptr,
                    words.cast(),
                    1,
                    scratch.desc,
                    words.add(1).cast(),
                    scratch.desc,
                    words.add(2).cast(),
                    scratch.desc,
                    peer.addr,
                    addr,
                    target.key,
                    sys::FI_UINT64,
                    sys::FI_CSWAP,
                    context(token, false),
                )
            }
        })
    }

    /// Reads the completions there are into `out` (returns how many).
    ///
    /// Under manual progress (`tcp;ofi_rxm`, `verbs;ofi_rxm`) this is also
    /// what applies peers' incoming writes to this process's memory and
    /// moves this side's own transfers along: the runtime must call it
    /// from its progress engine and from threads that wait for a
    /// notification word (see the module's docs).
    pub(crate) fn poll(&self, out: &mut Vec<Event>) -> Result<usize> {
        let start = out.len();
        let _in_order = self.reading_in_order();
        {
            let mut backlog = self.state.backlog.lock().expect("backlog");
            out.append(&mut backlog);
        }
        self.read_completions(out)?;
        Ok(out.len() - start)
    }

    /// The flags of a write carrying remote CQ data (a fence where that is
    /// how writes stay ordered), or why this provider cannot.
    fn with_data_flags(&self) -> Result<u64> {
        let attrs = self.attributes();
        match self.order() {
            _ if attrs.cq_data_bytes < 4 => {}
            NotifyOrder::DeliveryComplete => {}
            NotifyOrder::Fence => {
                return Ok((sys::FI_COMPLETION | sys::FI_REMOTE_CQ_DATA | sys::FI_FENCE) as u64)
            }
            NotifyOrder::InOrder => return Ok((sys::FI_COMPLETION | sys::FI_REMOTE_CQ_DATA) as u64),
        }
        Err(FabricError::Unsupported {
            provider: attrs.provider.clone(),
            what: "4 or more bytes of remote CQ data with in-order or fenced writes",
        })
    }

    /// The lock that keeps completions in the queue's order across the
    /// threads that read it (see `State::reading`); none under
    /// delivery-complete ordering.
    fn reading_in_order(&self) -> Option<std::sync::MutexGuard<'_, ()>> {
        (self.order() != NotifyOrder::DeliveryComplete)
            .then(|| self.state.reading.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn peer_state<R>(&self, rank: u32, f: impl FnOnce(&mut PeerOrder) -> R) -> R {
        let mut peers = self.state.peers.lock().expect("peer order");
        f(peers.entry(rank).or_default())
    }

    /// Reads raw completions, applies the DeliveryComplete bookkeeping
    /// (posting notifications whose writes are all delivered), and turns
    /// them into events.
    fn read_completions(&self, out: &mut Vec<Event>) -> Result<()> {
        let mut raw = Vec::new();
        while self.cq.read_raw(&mut raw, 32)? == 32 {}
        let mut settled = Vec::new();
        for r in raw {
            match r {
                Raw::Done(ctx) => {
                    let (token, tracked) = decode(ctx);
                    if tracked {
                        settled.push((token.peer, None));
                    }
                    out.push(Event::Done(token));
                }
                Raw::Remote(data) => out.push(Event::Remote(data)),
                Raw::Failed(ctx, mut error) => {
                    let (token, tracked) = decode(ctx);
                    if let FabricError::Peer { peer, .. } = &mut error {
                        if *peer == UNKNOWN_RANK {
                            *peer = token.peer;
                        }
                    }
                    if tracked {
                        settled.push((token.peer, Some(error.clone())));
                    }
                    out.push(Event::Failed(token, error));
                }
            }
        }
        if self.order() == NotifyOrder::DeliveryComplete {
            self.release_deferred(settled, out);
        }
        Ok(())
    }

    /// Counts delivered writes and posts the notifications they held back
    /// (those of a peer whose write failed fail with it).
    fn release_deferred(&self, settled: Vec<(u32, Option<FabricError>)>, out: &mut Vec<Event>) {
        let mut peers = self.state.peers.lock().expect("peer order");
        for (rank, failed) in settled {
            let p = peers.entry(rank).or_default();
            p.outstanding = p.outstanding.saturating_sub(1);
            if let Some(error) = failed {
                for word in p.deferred.drain(..) {
                    let token = Token {
                        peer: rank,
                        id: word.id,
                    };
                    out.push(Event::Failed(token, error.clone()));
                }
            }
        }
        for (&rank, p) in peers.iter_mut() {
            while p.outstanding == 0 {
                let Some(word) = p.deferred.front() else {
                    break;
                };
                let rc = self.try_notify(word);
                if is_again(rc) {
                    // Tried again at the next poll.
                    break;
                }
                let word = p.deferred.pop_front().expect("front");
                if rc < 0 {
                    let code = (-rc) as i32;
                    let token = Token {
                        peer: rank,
                        id: word.id,
                    };
                    out.push(Event::Failed(
                        token,
                        FabricError::Peer {
                            peer: rank,
                            code,
                            prov_errno: 0,
                            message: format!("fi_writemsg (notification): {}", strerror(code)),
                        },
                    ));
                }
            }
        }
    }
}
