//! Starting a job: who am I, where are the others, and a connection to each.
//!
//! 1. `gaspi_launch::LaunchInfo::from_env` (the launch crate) reads rank,
//!    size, rendezvous address and job key from whatever launched the
//!    process.
//! 2. `exchange_endpoints`: every rank connects to rank 0, proves the job
//!    key (`auth`) and sends its `Endpoint`. In a small job rank 0 answers
//!    everyone with the full table; above `GASPI_ENDPOINTS_EAGER_MAX` ranks
//!    only with the endpoint of the rank's parent in the start-up tree
//!    ([`Tree`]), and the others are looked up at rank 0's directory on
//!    first use ([`Directory`], [`DirectoryServer`]; decision 0065).
//!    Each rank connects to its parent in the tree (rank 0's children keep
//!    their rendezvous connection). The tree's connections stay open: they
//!    are control connections, over which the start barrier
//!    ([`finish_start`]) runs and the news of a rank's death reaches every
//!    survivor. With at most `fanout + 1` ranks the tree is a star around
//!    rank 0.
//! 3. Every other pair connects on first use (`connect_peer`): the rank
//!    that first sends to another connects to its control listener, which
//!    the progress engine serves (`handshake::Pending`), and proves the
//!    key again. A job of N ranks holds N - 1 connections at start-up, not
//!    N(N - 1) / 2 (decision 0022), and rank 0 holds `fanout` of them, not
//!    N - 1; these control connections go to the progress engines, and one
//!    that closes tells that its peer is gone.
//!
//! The listeners accept through `handshake`: every connection gets a few
//! seconds of its own to prove the key while acceptance goes on, so one
//! that connects and says nothing costs the job nothing. They listen on
//! the address the job uses (`control_listener`), loopback for a job on
//! one host.

use super::frame::read_frame;
use super::{auth, handshake};
use crate::model::descriptor::SegmentDescriptor;
use crate::model::error::{Error, Result};
use crate::model::ids::Rank;
use gaspi_launch::LaunchInfo;
use gaspi_segments::HostId;
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::FromRawFd;
use std::time::{Duration, Instant};

/// What every rank tells the others about itself at start-up.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Endpoint {
    pub rank: u32,
    pub host: HostId,
    pub hostname: String,
    pub pid: u32,
    /// Where this rank's progress engine accepts control connections.
    pub control: SocketAddr,
    /// The internal segment that carries collectives' notifications.
    pub system: SegmentDescriptor,
    /// What this rank's network transports publish for peers to connect
    /// (name, bytes packed by the transport; `transport/registry.rs`);
    /// empty: TCP only.
    #[serde(default)]
    pub transports: Vec<(String, Vec<u8>)>,
}

const RENDEZVOUS: &str = "gaspi-rendezvous-v1";
const MESH: &str = "gaspi-mesh-v1";

fn left(deadline: Instant) -> Result<Duration> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
        .ok_or_else(|| Error::Bootstrap("timed out waiting for the other ranks".into()))
}

fn blocking(stream: &TcpStream, deadline: Instant) -> Result<()> {
    let d = left(deadline)?;
    stream
        .set_nonblocking(false)
        .and_then(|_| stream.set_read_timeout(Some(d)))
        .and_then(|_| stream.set_write_timeout(Some(d)))
        .and_then(|_| stream.set_nodelay(true))
        .map_err(|e| Error::io("configuring a bootstrap socket", e))
}

/// Connects to `addr`, retrying until `deadline` (the peer may not listen yet).
fn connect_until(addr: SocketAddr, deadline: Instant, what: &str) -> Result<TcpStream> {
    let mut pause = Duration::from_millis(5);
    loop {
        let d = left(deadline)
            .map_err(|_| Error::Bootstrap(format!("timed out connecting to {what} at {addr}")))?;
        match TcpStream::connect_timeout(&addr, d.min(Duration::from_secs(2))) {
            Ok(s) => return Ok(s),
            Err(_) => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(200));
            }
        }
    }
}

/// Rank 0's rendezvous socket: inherited from the launcher, or bound here.
pub(crate) fn rendezvous_listener(info: &LaunchInfo) -> Result<TcpListener> {
    if let Some(fd) = info.rendezvous_fd {
        // SAFETY: the launcher opened this descriptor as a bound, listening
        // TCP socket and passed its number in GASPI_RENDEZVOUS_FD to rank 0
        // alone; nothing else in this process owns it, so taking ownership
        // here is sound.
        return Ok(unsafe { TcpListener::from_raw_fd(fd) });
    }
    let addr = info
        .rendezvous
        .ok_or_else(|| Error::Bootstrap("no rendezvous address".into()))?;
    // Listen where the others were told to connect: that is an address of
    // this host. Where it is not (a name the others resolve differently,
    // a NAT), listen on every interface at the agreed port; the
    // connections authenticate.
    match TcpListener::bind(addr) {
        Ok(l) => Ok(l),
        Err(e) if e.kind() == std::io::ErrorKind::AddrNotAvailable => {
            let any = SocketAddr::new(unspecified(addr.ip()), addr.port());
            tracing::warn!(
                "the rendezvous address {addr} is not one of this host's; listening on {any}"
            );
            TcpListener::bind(any)
                .map_err(|e| Error::io(format!("binding the rendezvous at {any}"), e))
        }
        Err(e) => Err(Error::io(format!("binding the rendezvous at {addr}"), e)),
    }
}

fn unspecified(like: IpAddr) -> IpAddr {
    if like.is_ipv4() {
        IpAddr::from([0, 0, 0, 0])
    } else {
        IpAddr::from([0u16; 8])
    }
}

/// The address of this host that the job's traffic uses: the rendezvous
/// address itself when it is loopback (a job on one host), else the source
/// address of the route to it (found with an unconnected UDP socket; nothing
/// is sent). `None` when there is no route.
fn job_ip(info: &LaunchInfo) -> Option<IpAddr> {
    let Some(rv) = info.rendezvous else {
        return Some(IpAddr::from([127, 0, 0, 1]));
    };
    if rv.ip().is_loopback() {
        return Some(rv.ip());
    }
    let probe = UdpSocket::bind(SocketAddr::new(unspecified(rv.ip()), 0)).ok()?;
    probe.connect(rv).ok()?;
    let ip = probe.local_addr().ok()?.ip();
    (!ip.is_unspecified()).then_some(ip)
}

/// An address of this host that other hosts can reach, for a job that has
/// no rendezvous address to find the route to (the PMIx bootstrap): the
/// source address of the default route, else the first address of an
/// interface that is up and not loopback (IPv4 first).
fn reachable_ip() -> Option<IpAddr> {
    let routed = UdpSocket::bind("0.0.0.0:0")
        .and_then(|s| {
            // TEST-NET-1: never answered; connect only picks the route.
            s.connect("192.0.2.1:9")?;
            s.local_addr()
        })
        .ok()
        .map(|a| a.ip())
        .filter(|ip| !ip.is_unspecified() && !ip.is_loopback());
    if routed.is_some() {
        return routed;
    }
    let mut found: Vec<IpAddr> = nix::ifaddrs::getifaddrs()
        .ok()?
        .filter(|i| {
            i.flags.contains(nix::net::if_::InterfaceFlags::IFF_UP)
                && !i
                    .flags
                    .contains(nix::net::if_::InterfaceFlags::IFF_LOOPBACK)
        })
        .filter_map(|i| {
            let a = i.address?;
            a.as_sockaddr_in()
                .map(|v4| IpAddr::V4(v4.ip()))
                .or_else(|| a.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip())))
        })
        .filter(|ip| !ip.is_loopback() && !ip.is_unspecified())
        .filter(|ip| !matches!(ip, IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80))
        .collect();
    found.sort_by_key(|ip| ip.is_ipv6());
    found.into_iter().next()
}

/// This rank's control listener and the address peers are told to reach
/// it at. Under the PMIx bootstrap, whose job has no rendezvous address:
/// loopback when every rank is on this host, else every interface,
/// told as [`reachable_ip`].
pub(crate) fn control_listener_for(info: &LaunchInfo) -> Result<(TcpListener, SocketAddr)> {
    if info.launcher == gaspi_launch::Launcher::Pmix && info.local_size < info.size {
        let ip = reachable_ip().ok_or_else(|| {
            Error::Bootstrap(
                "the ranks span several hosts and this host has no address but loopback".into(),
            )
        })?;
        let listener = TcpListener::bind(SocketAddr::new(unspecified(ip), 0))
            .map_err(|e| Error::io("binding the control listener", e))?;
        let port = listener
            .local_addr()
            .map_err(|e| Error::io("control listener address", e))?
            .port();
        tracing::debug!(
            rank = info.rank,
            "control listener on port {port}, told as {ip}"
        );
        return Ok((listener, SocketAddr::new(ip, port)));
    }
    let listener = control_listener(info)?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::io("control listener address", e))?;
    Ok((listener, addr))
}

/// This rank's control listener, on the address of this host the job uses
/// (see [`job_ip`]); on every interface only when that cannot be found.
pub(crate) fn control_listener(info: &LaunchInfo) -> Result<TcpListener> {
    let ip = job_ip(info).unwrap_or_else(|| {
        let any = unspecified(
            info.rendezvous
                .map_or(IpAddr::from([0, 0, 0, 0]), |a| a.ip()),
        );
        tracing::warn!(
            "no route to the rendezvous {:?}; the control listener takes every interface",
            info.rendezvous
        );
        any
    });
    let listener = TcpListener::bind(SocketAddr::new(ip, 0))
        .map_err(|e| Error::io(format!("binding the control listener on {ip}"), e))?;
    if let Ok(a) = listener.local_addr() {
        tracing::debug!(rank = info.rank, "control listener on {a}");
    }
    Ok(listener)
}

/// Encodes one start-up message as a frame: the one place the bootstrap's
/// own messages are encoded (with [`recv_msg`] the one place they are
/// decoded), so that a change of encoding is made here.
fn encode_msg<T: Serialize>(msg: &T) -> Result<Vec<u8>> {
    crate::net::frame::encode(msg)
}

/// Sends one start-up message on a blocking stream.
fn send_msg<T: Serialize>(s: &mut TcpStream, msg: &T) -> Result<()> {
    let frame = encode_msg(msg)?;
    std::io::Write::write_all(s, &frame).map_err(|e| Error::io("sending a frame", e))
}

/// Receives one start-up message from a blocking stream.
fn recv_msg<T: serde::de::DeserializeOwned>(s: &mut TcpStream) -> Result<T> {
    read_frame(s)
}

/// The start-up tree over which the start barrier and the news of deaths
/// travel: rank `r`'s parent is `(r - 1) / k`, its children
/// `k r + 1 ..= k r + k` (those below the job's size). With `k >= n - 1`
/// it is the star around rank 0 that every job had before (decision 0065).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tree {
    /// Ranks in the job.
    pub size: u32,
    /// Children per rank.
    pub fanout: u32,
}

impl Tree {
    /// The parent of `r` (none for rank 0).
    pub fn parent(&self, r: u32) -> Option<u32> {
        (r > 0).then(|| (r - 1) / self.fanout.max(1))
    }

    /// The children of `r`.
    pub fn children(&self, r: u32) -> std::ops::Range<u32> {
        let k = self.fanout.max(1) as u64;
        let lo = (r as u64 * k + 1).min(self.size as u64) as u32;
        let hi = (r as u64 * k + k + 1).min(self.size as u64) as u32;
        lo..hi
    }
}

/// Bytes of the bootstrap through this rank (start-up and, on rank 0, the
/// endpoint directory's answers), counted by the kernel per socket
/// (`TCP_INFO`) before each socket is closed or handed on.
#[derive(Debug, Default)]
pub(crate) struct Traffic {
    /// Bytes this rank wrote.
    pub sent: std::sync::atomic::AtomicU64,
    /// Bytes this rank read.
    pub received: std::sync::atomic::AtomicU64,
}

impl Traffic {
    /// Adds what `s` carried so far.
    pub fn add(&self, s: &TcpStream) {
        use std::sync::atomic::Ordering::Relaxed;
        if let Some((tx, rx)) = socket_bytes(s) {
            self.sent.fetch_add(tx, Relaxed);
            self.received.fetch_add(rx, Relaxed);
        }
    }
}

/// Bytes written to and read from `s` so far, as the kernel counts them.
fn socket_bytes(s: &TcpStream) -> Option<(u64, u64)> {
    use std::os::fd::AsRawFd;
    // SAFETY: tcp_info is plain old data; all zeroes is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` is writable for `len` bytes and outlives the call; the
    // descriptor belongs to `s`, alive across it.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    (rc == 0).then(|| {
        (
            info.tcpi_bytes_sent
                .saturating_sub(info.tcpi_bytes_retrans)
                .saturating_add(info.tcpi_notsent_bytes as u64),
            info.tcpi_bytes_received,
        )
    })
}

/// What the rendezvous leaves a rank with.
pub(crate) struct Start {
    /// Every endpoint this rank knows, indexed by rank: all of them on
    /// rank 0 and in a job of at most `endpoints_eager_max` ranks; else its
    /// own, its parent's and its children's (the rest come from the
    /// directory on first use, [`Directory`]).
    pub table: Vec<Option<Endpoint>>,
    /// Whether every rank got the whole table (a job of at most
    /// `endpoints_eager_max` ranks); rank 0 has it in any case.
    pub whole: bool,
    /// The start-up tree's connections of this rank, `(peer, stream)`,
    /// blocking: its parent's first (none on rank 0), then its children's.
    pub tree: StarConnections,
    /// Rank 0's directory, to serve once the start-up is through (jobs
    /// that do not get the whole table).
    pub directory: Option<DirectoryServer>,
}

/// Rank 0's answer at the rendezvous.
#[derive(Debug, Serialize, Deserialize)]
enum Welcome {
    /// Every rank's endpoint, indexed by rank.
    Table(Vec<Endpoint>),
    /// The endpoints of this rank's parent in the start-up tree and of
    /// rank 0 (one when they are the same); the others come from the
    /// directory on first use.
    Parent(Vec<Endpoint>),
    /// Why the job does not start (rank 0 timed out waiting for others).
    Abort(String),
}

/// Meets the other ranks: every rank checks in with rank 0 (its endpoint,
/// after proving the job key); once all have, rank 0 answers each with the
/// whole table (a job of at most `eager_max` ranks) or only the endpoint of
/// its parent in the start-up tree ([`Tree`]). Each rank then connects to
/// its parent (rank 0's children keep their rendezvous connection) and
/// takes its children's connections on its control listener (`control`).
/// Rank 0 sends O(N) bytes in all when the table is not whole, and holds
/// `fanout` connections once through, not N - 1 (decision 0065). Rank 0
/// passes its rendezvous listener ([`rendezvous_listener`]), bound before
/// any port of its own.
#[allow(clippy::too_many_arguments)]
pub(crate) fn exchange_endpoints(
    info: &LaunchInfo,
    me: Endpoint,
    rendezvous: Option<TcpListener>,
    control: &TcpListener,
    tree: Tree,
    eager_max: u32,
    traffic: &std::sync::Arc<Traffic>,
    deadline: Instant,
) -> Result<Start> {
    let n = info.size as usize;
    let whole = info.size <= eager_max;
    if info.rank == 0 {
        // Binding it here, after this rank's other ports, is what once
        // lost the probed port to the control listener: no fallback.
        let Some(listener) = rendezvous else {
            return Err(Error::Protocol(
                "rank 0 exchanges endpoints without its rendezvous listener".into(),
            ));
        };
        if let Ok(a) = listener.local_addr() {
            tracing::debug!("rendezvous listening on {a}");
        }
        let started = Instant::now();
        let mut table: Vec<Option<Endpoint>> = vec![None; n];
        let mut accepted = Vec::with_capacity(n - 1);
        let checked_in = handshake::accept_authenticated(
            &listener,
            &info.job_key,
            RENDEZVOUS,
            n - 1,
            // Every other rank may be at the door at once (srun starts
            // them all within a second; decision 0089).
            n - 1,
            deadline,
            "the other ranks at the rendezvous",
            |ep: &Endpoint| {
                let r = ep.rank as usize;
                if r == 0 || r >= n || table[r].is_some() {
                    return Err(Error::Bootstrap(format!(
                        "rendezvous: a second or impossible rank {r} checked in"
                    )));
                }
                table[r] = Some(ep.clone());
                Ok(())
            },
            &mut accepted,
        );
        if let Err(e) = checked_in {
            // Those that checked in learn why no table comes, rather than
            // wait for their own deadline or guess from a closed socket.
            let missing: Vec<usize> = (1..n).filter(|&r| table[r].is_none()).collect();
            let why = if Instant::now() >= deadline {
                format!(
                    "rank 0 timed out after {:.1?} waiting for {} to check in at the \
                     rendezvous (GASPI_INIT_TIMEOUT_MS raises the limit)",
                    started.elapsed(),
                    rank_list(&missing)
                )
            } else {
                format!("rank 0 could not complete the rendezvous: {e}")
            };
            for (s, _) in accepted.iter_mut() {
                let _ = s
                    .set_nonblocking(false)
                    .and_then(|_| s.set_write_timeout(Some(Duration::from_millis(200))));
                let _ = send_msg(s, &Welcome::Abort(why.clone()));
            }
            return Err(Error::Bootstrap(why));
        }
        let mut conns = Vec::with_capacity(n - 1);
        for (s, ep) in accepted {
            blocking(&s, deadline)?;
            conns.push((ep.rank, s));
        }
        table[0] = Some(me);
        let table: Vec<Endpoint> = table
            .into_iter()
            .map(|e| e.expect("all ranks checked in"))
            .collect();
        // One frame for all (N frames of N endpoints each: encoded once),
        // unless rank 0's control listener is on every interface: then
        // each peer is told rank 0's address as seen from that peer.
        let rank0_anywhere = table[0].control.ip().is_unspecified();
        let shared = match (whole, rank0_anywhere) {
            (true, false) => Some(encode_msg(&Welcome::Table(table.clone()))?),
            _ => None,
        };
        let mut tree_conns = Vec::with_capacity(tree.children(0).len());
        for (r, mut s) in conns {
            let own;
            let frame: &[u8] = match &shared {
                Some(f) => f,
                None => {
                    let seen = |mut ep: Endpoint| {
                        if ep.rank == 0 && rank0_anywhere {
                            if let Ok(local) = s.local_addr() {
                                ep.control.set_ip(local.ip());
                            }
                        }
                        ep
                    };
                    let welcome = match whole {
                        true => Welcome::Table(table.iter().cloned().map(seen).collect()),
                        false => {
                            let p = tree.parent(r).expect("rank 0 answers other ranks");
                            let mut known = vec![seen(table[p as usize].clone())];
                            if p != 0 {
                                known.push(seen(table[0].clone()));
                            }
                            Welcome::Parent(known)
                        }
                    };
                    own = encode_msg(&welcome)?;
                    &own
                }
            };
            std::io::Write::write_all(&mut s, frame)
                .map_err(|e| Error::io("sending the endpoint table", e))?;
            if tree.parent(r) == Some(0) {
                tree_conns.push((r, s));
            } else {
                traffic.add(&s);
            }
        }
        let directory = (!whole).then(|| DirectoryServer {
            listener,
            table: table.clone(),
            key: info.job_key.clone(),
            traffic: traffic.clone(),
        });
        Ok(Start {
            table: table.into_iter().map(Some).collect(),
            whole,
            tree: tree_conns,
            directory,
        })
    } else {
        let addr = info
            .rendezvous
            .ok_or_else(|| Error::Bootstrap("no rendezvous address".into()))?;
        let started = Instant::now();
        let mut s = connect_until(addr, deadline, "rank 0's rendezvous")?;
        blocking(&s, deadline)?;
        let mut me = me;
        if me.control.ip().is_unspecified() {
            if let Ok(local) = s.local_addr() {
                me.control.set_ip(local.ip());
            }
        }
        auth::answer(&mut s, &info.job_key, RENDEZVOUS, &me)?;
        let answer: Welcome = recv_msg(&mut s).map_err(|e| match Failure::of(&e) {
            Failure::TimedOut => Error::Bootstrap(format!(
                "timed out after {:.1?} waiting for the endpoint table from rank 0 \
                 (it has not heard from every rank yet; GASPI_INIT_TIMEOUT_MS raises the limit)",
                started.elapsed()
            )),
            // Rank 0 drops a connection that cannot prove the job key
            // without a word; so does a rank 0 that failed.
            Failure::Closed => Error::Bootstrap(format!(
                "rank 0 closed the rendezvous connection without sending the endpoint table \
                 ({e}): it refuses ranks that cannot prove its job key (a different job key?), \
                 or it failed"
            )),
            Failure::Other => {
                Error::Bootstrap(format!("receiving the endpoint table from rank 0: {e}"))
            }
        })?;
        let rank = info.rank;
        let parent = tree.parent(rank).expect("not rank 0");
        let mut table: Vec<Option<Endpoint>> = vec![None; n];
        let whole = match answer {
            Welcome::Table(t) => {
                if t.len() != n {
                    return Err(Error::Bootstrap(format!(
                        "rank 0 sent {} endpoints for a job of {n}",
                        t.len()
                    )));
                }
                table = t.into_iter().map(Some).collect();
                true
            }
            Welcome::Parent(known) => {
                if known.first().map(|p| p.rank) != Some(parent)
                    || known.iter().any(|e| e.rank >= info.size)
                {
                    return Err(Error::Bootstrap(format!(
                        "rank 0 did not name rank {parent} as the parent of rank {rank}"
                    )));
                }
                for e in known {
                    let r = e.rank as usize;
                    table[r] = Some(e);
                }
                false
            }
            Welcome::Abort(why) => return Err(Error::Bootstrap(why)),
        };
        table[rank as usize] = Some(me.clone());
        let mut conns: StarConnections = Vec::with_capacity(1 + tree.children(rank).len());
        if parent == 0 {
            conns.push((0, s));
        } else {
            traffic.add(&s);
            drop(s);
            let p = table[parent as usize]
                .as_ref()
                .expect("the parent's endpoint came with the welcome");
            conns.push((parent, connect_parent(info, &me, p, deadline)?));
        }
        accept_children(info, control, tree, deadline, &mut table, &mut conns)?;
        Ok(Start {
            table,
            whole,
            tree: conns,
            directory: None,
        })
    }
}

/// Connects this rank to its parent `p` in the start-up tree (on the
/// parent's control listener, proving the job key with this rank's
/// endpoint).
fn connect_parent(
    info: &LaunchInfo,
    me: &Endpoint,
    p: &Endpoint,
    deadline: Instant,
) -> Result<TcpStream> {
    let mut up = connect_until(p.control, deadline, &format!("rank {}", p.rank))?;
    blocking(&up, deadline)?;
    auth::answer(&mut up, &info.job_key, TREE, me)?;
    Ok(up)
}

/// Takes the connections of this rank's children in the start-up tree on
/// its control listener, learning their endpoints into `table`, the
/// streams (blocking) appended to `conns`.
fn accept_children(
    info: &LaunchInfo,
    control: &TcpListener,
    tree: Tree,
    deadline: Instant,
    table: &mut [Option<Endpoint>],
    conns: &mut StarConnections,
) -> Result<()> {
    let rank = info.rank;
    {
        let children = tree.children(rank);
        if !children.is_empty() {
            let mut accepted = Vec::with_capacity(children.len());
            let mut seen = vec![false; children.len()];
            handshake::accept_authenticated(
                control,
                &info.job_key,
                TREE,
                children.len(),
                handshake::MAX_PENDING,
                deadline,
                "this rank's children in the start-up tree",
                |ep: &Endpoint| {
                    let ok =
                        children.contains(&ep.rank) && !seen[(ep.rank - children.start) as usize];
                    if !ok {
                        return Err(Error::Bootstrap(format!(
                            "start-up tree: rank {} is not a child of rank {rank} \
                             (or checked in twice)",
                            ep.rank
                        )));
                    }
                    seen[(ep.rank - children.start) as usize] = true;
                    Ok(())
                },
                &mut accepted,
            )
            .map_err(|e| {
                Error::Bootstrap(format!(
                    "waiting for this rank's children {children:?} in the start-up tree: {e} \
                     (GASPI_INIT_TIMEOUT_MS raises the limit)"
                ))
            })?;
            for (c, ep) in accepted {
                blocking(&c, deadline)?;
                let r = ep.rank;
                table[r as usize] = Some(ep);
                conns.push((r, c));
            }
        }
    }
    Ok(())
}

/// Joins the start-up tree under the PMIx bootstrap (decision 0084): the
/// endpoints are in PMIx already (`publish`ed by every rank), so nobody
/// checks in with rank 0. A rank fetches its parent's endpoint
/// (`parent_endpoint`, a `PMIx_Get` that waits for the parent to commit),
/// connects to the parent's control listener, and takes its children's
/// connections on its own: each rank holds at most `fanout + 1` start-up
/// connections, rank 0 `fanout`, and nothing passes through rank 0. The
/// streams come back as [`exchange_endpoints`]'s do, for
/// [`finish_start`]. Other endpoints are fetched on first use.
#[cfg_attr(not(feature = "pmix"), allow(dead_code))]
pub(crate) fn join_tree(
    info: &LaunchInfo,
    me: Endpoint,
    parent_endpoint: impl FnOnce(u32) -> Result<Endpoint>,
    control: &TcpListener,
    tree: Tree,
    deadline: Instant,
) -> Result<Start> {
    let n = info.size as usize;
    let mut table: Vec<Option<Endpoint>> = vec![None; n];
    let mut conns: StarConnections = Vec::with_capacity(1 + tree.children(info.rank).len());
    if let Some(parent) = tree.parent(info.rank) {
        let p = parent_endpoint(parent)?;
        if p.rank != parent {
            return Err(Error::Bootstrap(format!(
                "asked for rank {parent}'s endpoint, got rank {}'s",
                p.rank
            )));
        }
        conns.push((parent, connect_parent(info, &me, &p, deadline)?));
        table[parent as usize] = Some(p);
    }
    table[info.rank as usize] = Some(me);
    accept_children(info, control, tree, deadline, &mut table, &mut conns)?;
    Ok(Start {
        table,
        whole: false,
        tree: conns,
        directory: None,
    })
}

/// How a blocking read on a start-up connection failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// Its read timeout (the start-up deadline) passed.
    TimedOut,
    /// The other end closed the connection (or its process ended).
    Closed,
    /// Anything else (a malformed frame, a socket error).
    Other,
}

impl Failure {
    fn of(e: &Error) -> Failure {
        use std::io::ErrorKind as K;
        match e {
            Error::Io { source, .. } => match source.kind() {
                K::WouldBlock | K::TimedOut => Failure::TimedOut,
                K::UnexpectedEof | K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe => {
                    Failure::Closed
                }
                _ => Failure::Other,
            },
            _ => Failure::Other,
        }
    }
}

/// What a rank tells its parent in the start-up tree at the end of its
/// start-up, for itself and the ranks below it.
#[derive(Debug, Serialize, Deserialize)]
enum StartReport {
    /// This rank and every rank below it mapped what they map of their
    /// peers; they can be reached.
    Ready,
    /// This rank cannot start (the reason); it leaves.
    Failed(String),
    /// A rank below this one cannot start (the whole reason, naming it).
    Below(String),
}

/// The root's answer, passed down the start-up tree once every rank has
/// reported.
#[derive(Debug, Serialize, Deserialize)]
enum StartVerdict {
    /// Every rank is ready: `init` returns.
    Go,
    /// Some rank cannot start (the reason): the job does not.
    Abort(String),
}

/// The last step of start-up, a barrier over the start-up tree (decisions
/// 0028, 0065): every rank reports to its parent, once its children have
/// reported to it, whether it (and they) mapped what they map of their
/// peers (`mine`: this rank's own outcome); rank 0 sends a go-ahead down
/// the tree once every rank is ready, or the first failure. So no rank
/// returns from `init`, and none can leave the job, before every rank has
/// mapped what it maps at start-up, and when `init` returns every rank is
/// reachable. In a job whose tree is the star around rank 0 (at most
/// `fanout + 1` ranks) this is the barrier of old, message for message.
///
/// `tree` are the streams [`exchange_endpoints`] returned, still blocking
/// (the parent's first, except on rank 0); nothing else has been sent on
/// them. Fails, naming the rank, when a rank reports a failure, ends, or
/// does not report by `deadline`; a failure is passed on to the ranks
/// below before this returns.
pub(crate) fn finish_start(
    info: &LaunchInfo,
    tree: &mut [(u32, TcpStream)],
    mine: Result<()>,
    deadline: Instant,
) -> Result<()> {
    let started = Instant::now();
    let (mut parent, children) = match info.rank {
        0 => (None, tree),
        _ => match tree.split_first_mut() {
            Some((p, c)) => (Some(p), c),
            None => return mine,
        },
    };
    if let (Err(e), Some(p)) = (&mine, parent.as_mut()) {
        // A failed rank reports and leaves; rank 0 passes it on, and the
        // ranks below learn it from here.
        let why = e.to_string();
        let s = &mut p.1;
        let _ = blocking(s, deadline).and_then(|_| send_msg(s, &StartReport::Failed(why.clone())));
        let below = StartVerdict::Abort(format!("rank {} could not start: {why}", info.rank));
        for (_, c) in children.iter_mut() {
            let _ = blocking(c, deadline).and_then(|_| send_msg(c, &below));
        }
        return mine;
    }
    // Every child's report (each for the ranks below it too).
    let mut failure: Option<String> = mine.as_ref().err().map(|e| format!("rank 0: {e}"));
    if failure.is_none() {
        for (r, s) in children.iter_mut() {
            let timed_out = || {
                format!(
                    "timed out after {:.1?} waiting for rank {r} to finish its start-up \
                     (GASPI_INIT_TIMEOUT_MS raises the limit)",
                    started.elapsed()
                )
            };
            let report = match blocking(s, deadline) {
                Ok(()) => recv_msg::<StartReport>(s),
                Err(_) => {
                    failure = Some(timed_out());
                    break;
                }
            };
            let why = match report {
                Ok(StartReport::Ready) => continue,
                Ok(StartReport::Failed(why)) => format!("rank {r} could not start: {why}"),
                Ok(StartReport::Below(why)) => why,
                Err(e) => match Failure::of(&e) {
                    Failure::TimedOut => timed_out(),
                    Failure::Closed => format!("rank {r} ended during the start-up ({e})"),
                    Failure::Other => format!("receiving rank {r}'s start-up report: {e}"),
                },
            };
            failure = Some(why);
            break;
        }
    }
    // Up, then the verdict from above (rank 0 decides).
    let mut verdict = match &failure {
        None => StartVerdict::Go,
        Some(why) => StartVerdict::Abort(why.clone()),
    };
    if let Some((p, s)) = parent {
        let p = *p;
        let report = match &failure {
            None => StartReport::Ready,
            Some(why) => StartReport::Below(why.clone()),
        };
        let sent = blocking(s, deadline).and_then(|_| send_msg(s, &report));
        let answer = sent
            .map_err(|e| Error::Bootstrap(format!("telling rank {p} this rank is ready: {e}")))
            .and_then(|_| {
                recv_msg::<StartVerdict>(s).map_err(|e| {
                    Error::Bootstrap(match Failure::of(&e) {
                        Failure::TimedOut => format!(
                            "timed out after {:.1?} waiting for rank 0's go-ahead (some rank \
                             has not finished its start-up; GASPI_INIT_TIMEOUT_MS raises the \
                             limit)",
                            started.elapsed()
                        ),
                        Failure::Closed if p == 0 => {
                            format!("rank 0 ended during the start-up, before its go-ahead ({e})")
                        }
                        Failure::Closed => format!(
                            "rank {p} (this rank's parent in the start-up tree) ended during the \
                             start-up, before the go-ahead ({e})"
                        ),
                        Failure::Other => format!("receiving rank 0's go-ahead: {e}"),
                    })
                })
            });
        verdict = match answer {
            Ok(v) => v,
            Err(e) => {
                // The ranks below learn it and leave too.
                let below = StartVerdict::Abort(e.to_string());
                for (_, c) in children.iter_mut() {
                    let _ = blocking(c, deadline).and_then(|_| send_msg(c, &below));
                }
                return Err(e);
            }
        };
    }
    let mut failure = match &verdict {
        StartVerdict::Go => None,
        StartVerdict::Abort(why) => Some(why.clone()),
    };
    for (r, s) in children.iter_mut() {
        // The go-ahead reaches every rank within the deadline or the
        // start-up fails; an abort is best effort (the rank may be gone,
        // and it would time out anyway).
        let sent = blocking(s, deadline).and_then(|_| send_msg(s, &verdict));
        if let (Err(e), None) = (sent, &failure) {
            failure = Some(format!("sending rank {r} the go-ahead: {e}"));
        }
    }
    mine?;
    match failure {
        None => Ok(()),
        Some(why) => Err(Error::Bootstrap(why)),
    }
}

/// Purpose string of the proof on start-up tree connections.
const TREE: &str = "gaspi-tree-v1";

/// Purpose string of the proof on a lookup at rank 0's directory.
const DIRECTORY: &str = "gaspi-directory-v1";

/// Most endpoints one lookup may ask for.
const LOOKUP_MAX: usize = 4096;

/// How long the directory waits on one lookup's connection (a rank asks
/// at once; a stranger costs no more than this).
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(2);

/// Rank 0's endpoint directory in a job whose ranks do not get the whole
/// table: it answers lookups on the rendezvous listener, on a thread of its
/// own, until the rank terminates ([`DirectoryServer::serve`]).
pub(crate) struct DirectoryServer {
    listener: TcpListener,
    table: Vec<Endpoint>,
    key: Vec<u8>,
    traffic: std::sync::Arc<Traffic>,
}

/// The running directory; stopped (and its port released) on drop.
pub(crate) struct DirectoryThread {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for DirectoryThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectoryThread").finish_non_exhaustive()
    }
}

impl Drop for DirectoryThread {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl DirectoryServer {
    /// Serves lookups until the returned handle is dropped: each a
    /// connection, the job key proved with the ranks asked for as payload
    /// ([`handshake::Pending`], every pending lookup advancing under one
    /// `poll`, so a slow or silent asker holds up no other), their
    /// endpoints as the answer, closed.
    pub fn serve(self) -> Result<DirectoryThread> {
        use std::os::fd::AsRawFd;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        self.listener
            .set_nonblocking(true)
            .map_err(|e| Error::io("configuring the directory's listener", e))?;
        let thread = std::thread::Builder::new()
            .name("gaspi-directory".into())
            .spawn(move || {
                let mut failed = crate::net::log_tally::Tally::new("lookups refused");
                let mut pending: Vec<handshake::Pending> = Vec::new();
                while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                    let now = Instant::now();
                    pending.retain(|p| {
                        if now >= p.until() {
                            failed.warn(format_args!(
                                "endpoint directory: {} asked nothing within {LOOKUP_TIMEOUT:?}",
                                p.peer()
                            ));
                        }
                        now < p.until()
                    });
                    let mut fds: Vec<libc::pollfd> = std::iter::once(libc::pollfd {
                        fd: self.listener.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    })
                    .chain(pending.iter().map(|p| libc::pollfd {
                        fd: p.stream().as_raw_fd(),
                        events: p.events(),
                        revents: 0,
                    }))
                    .collect();
                    // SAFETY: `fds` is a valid array of `fds.len()` pollfds,
                    // alive across the call; its descriptors belong to the
                    // listener and `pending`, owned by this thread.
                    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 100) };
                    if n <= 0 {
                        continue;
                    }
                    for i in (0..pending.len()).rev() {
                        if fds[i + 1].revents == 0 {
                            continue;
                        }
                        match pending[i].advance() {
                            handshake::Step::Wait => {}
                            handshake::Step::Drop(why) => {
                                let p = pending.remove(i);
                                failed.warn(format_args!("endpoint directory: {} {why}", p.peer()));
                            }
                            handshake::Step::Answered(body) => {
                                let p = pending.remove(i);
                                if let Err(e) = self.answer(p, &body) {
                                    failed.warn(format_args!("endpoint directory: {e}"));
                                }
                            }
                        }
                    }
                    if fds[0].revents == 0 {
                        continue;
                    }
                    while let Ok((s, _)) = self.listener.accept() {
                        if pending.len() >= handshake::MAX_PENDING * 16 {
                            let old = pending.remove(0);
                            failed.warn(format_args!(
                                "endpoint directory: too many lookups pending; dropped the \
                                 oldest, from {}",
                                old.peer()
                            ));
                        }
                        match handshake::Pending::new(s, Instant::now() + LOOKUP_TIMEOUT) {
                            Ok(p) => pending.push(p),
                            Err(e) => failed.warn(format_args!("endpoint directory: {e}")),
                        }
                    }
                }
            })
            .map_err(|e| Error::io("starting the endpoint directory", e))?;
        Ok(DirectoryThread {
            stop,
            thread: Some(thread),
        })
    }

    /// Answers one lookup whose proof (`body`) came in.
    fn answer(&self, p: handshake::Pending, body: &[u8]) -> Result<()> {
        let peer = p.peer().to_string();
        let (mut s, ranks) = p.finish::<Vec<u32>>(body, &self.key, DIRECTORY)?;
        if ranks.len() > LOOKUP_MAX {
            return Err(Error::Bootstrap(format!(
                "a lookup from {peer} asked for {} endpoints",
                ranks.len()
            )));
        }
        let mut found = Vec::with_capacity(ranks.len());
        for r in ranks {
            let Some(ep) = self.table.get(r as usize) else {
                return Err(Error::Bootstrap(format!(
                    "a lookup from {peer} asked for rank {r} of {}",
                    self.table.len()
                )));
            };
            let mut ep = ep.clone();
            if ep.control.ip().is_unspecified() {
                if let Ok(local) = s.local_addr() {
                    ep.control.set_ip(local.ip());
                }
            }
            found.push(ep);
        }
        // The answer is small: it fits the socket's buffer at once.
        s.set_nonblocking(false)
            .and_then(|_| s.set_write_timeout(Some(LOOKUP_TIMEOUT)))
            .map_err(|e| Error::io("configuring a lookup connection", e))?;
        send_msg(&mut s, &found)?;
        self.traffic.add(&s);
        Ok(())
    }
}

/// Where a rank finds the endpoints it did not learn at start-up: rank
/// 0's directory under our own rendezvous ([`Directory`]), the PMIx
/// server under the PMIx bootstrap (`net::pmix::PmixEndpoints`).
pub(crate) trait EndpointSource: Send + Sync + std::fmt::Debug {
    /// The endpoints of `ranks`, in that order, within `timeout`.
    fn lookup(&self, ranks: &[u32], timeout: Duration) -> Result<Vec<Endpoint>>;
}

impl EndpointSource for Directory {
    fn lookup(&self, ranks: &[u32], timeout: Duration) -> Result<Vec<Endpoint>> {
        Directory::lookup(self, ranks, timeout)
    }
}

/// How a rank asks rank 0's directory for endpoints it does not know.
#[derive(Debug, Clone)]
pub(crate) struct Directory {
    /// Rank 0's rendezvous address.
    pub addr: SocketAddr,
    /// The job key.
    pub key: Vec<u8>,
    /// This rank's bootstrap traffic, which lookups add to.
    pub traffic: std::sync::Arc<Traffic>,
}

impl Directory {
    /// The endpoints of `ranks`, in that order, within `timeout`. A refused
    /// connection fails at once: nobody answers there any more (rank 0 has
    /// ended).
    pub fn lookup(&self, ranks: &[u32], timeout: Duration) -> Result<Vec<Endpoint>> {
        let deadline = Instant::now() + timeout;
        let mut pause = Duration::from_millis(5);
        let mut s = loop {
            let d = left(deadline).map_err(|_| {
                Error::Bootstrap(format!(
                    "timed out asking rank 0's endpoint directory at {}",
                    self.addr
                ))
            })?;
            match TcpStream::connect_timeout(&self.addr, d.min(Duration::from_secs(2))) {
                Ok(s) => break s,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    return Err(Error::Bootstrap(format!(
                        "rank 0's endpoint directory at {} refused a lookup ({e}): rank 0 has \
                         ended, and this rank never learnt the endpoints of {}",
                        self.addr,
                        rank_list(&ranks.iter().map(|&r| r as usize).collect::<Vec<_>>())
                    )))
                }
                Err(_) => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(200));
                }
            }
        };
        blocking(&s, deadline)?;
        auth::answer(&mut s, &self.key, DIRECTORY, &ranks.to_vec())?;
        let found: Vec<Endpoint> = recv_msg(&mut s)
            .map_err(|e| Error::Bootstrap(format!("asking rank 0's endpoint directory: {e}")))?;
        self.traffic.add(&s);
        if found.len() != ranks.len() || found.iter().zip(ranks).any(|(e, &r)| e.rank != r) {
            return Err(Error::Bootstrap(
                "rank 0's endpoint directory answered for other ranks".into(),
            ));
        }
        Ok(found)
    }
}

/// "rank 2", "ranks 2, 3, 5", "ranks 2, 3, ... (40 ranks)".
fn rank_list(ranks: &[usize]) -> String {
    match ranks {
        [r] => format!("rank {r}"),
        _ => {
            let shown: Vec<String> = ranks.iter().take(8).map(|r| r.to_string()).collect();
            if ranks.len() > 8 {
                format!("ranks {}, ... ({} ranks)", shown.join(", "), ranks.len())
            } else {
                format!("ranks {}", shown.join(", "))
            }
        }
    }
}

/// The connections between rank 0 and each other rank that the rendezvous
/// leaves open, as `(peer, stream)`.
pub(crate) type StarConnections = Vec<(u32, TcpStream)>;

/// Purpose string of the proof on control connections made on first use.
pub(crate) const MESH_PURPOSE: &str = MESH;

/// What a rank proves the job key with when it connects on first use:
/// its rank, the peer's, and its own endpoint (so that the peer need not
/// look it up, decision 0065).
pub(crate) type MeshHello = (u32, u32, Option<Endpoint>);

/// Opens the control connection from rank `me` to `peer` (on first use):
/// connects to its control listener and answers its challenge, within
/// `deadline` (`None`: for as long as `alive` says the peer may still
/// answer; it is asked every 50 ms). A refused connection means nobody
/// listens there any more: the peer's process is gone.
///
/// The peer's progress engine answers the challenge, so a stopped peer
/// holds this until it runs again or the deadline passes (its connection
/// made again every [`CONNECT_TRY`] meanwhile). A peer whose
/// engine has as many handshakes pending as it runs at once (strangers at
/// its door) closes a newcomer before its challenge (decision 0034): that
/// connection is tried again, after a nap that grows to 200 ms, until the
/// deadline.
///
/// An attempt that nobody answers (its SYN or the SYN-ACK lost on a lossy
/// link, or a link briefly down: each try lasts at most
/// [`CONNECT_TRY`], while the kernel resends a lost SYN only after 1 s and
/// then 3 s) is tried again too, until attempts have gone unanswered for
/// `reach_for` in a row (the peer timeout: a partition shorter than it is
/// not death, decision 0033); only then does its error come back. Before, one unanswered try
/// failed the call: about one job in twelve over a link losing 5% of its
/// packets (`a_lossy_slow_link_delivers_whole_data_in_order`).
pub(crate) fn connect_peer(
    me: &Endpoint,
    peer: &Endpoint,
    key: &[u8],
    deadline: Option<Instant>,
    reach_for: Duration,
    alive: impl Fn() -> Result<()>,
) -> Result<TcpStream> {
    let mut nap = Duration::from_millis(5);
    // Since when every attempt went unanswered (None: the last one reached
    // the peer's host).
    let mut unanswered_since: Option<Instant> = None;
    loop {
        let attempt_at = Instant::now();
        match connect_peer_once(me, peer, key, deadline, &alive)? {
            Attempt::Connected(s) => return Ok(s),
            Attempt::Closed => {
                unanswered_since = None;
                tracing::debug!(
                    "rank {} closed a connection before its challenge; trying again",
                    peer.rank
                )
            }
            // Its host answered: the rank lives (maybe stopped or busy), so
            // this bounds nothing but the deadline, as before.
            Attempt::Silent => {
                unanswered_since = None;
                tracing::debug!(
                    "rank {}: connected, but no challenge within {CONNECT_TRY:?}; trying again",
                    peer.rank
                )
            }
            Attempt::Unanswered(e) => {
                let since = *unanswered_since.get_or_insert(attempt_at);
                if since.elapsed() >= reach_for {
                    return Err(Error::io(
                        format!(
                            "connecting to rank {} at {} (unanswered for {:?})",
                            peer.rank,
                            peer.control,
                            since.elapsed()
                        ),
                        e,
                    ));
                }
                tracing::debug!(
                    "connecting to rank {} at {}: {e}; trying again",
                    peer.rank,
                    peer.control
                );
            }
        }
        alive()?;
        if deadline.is_some_and(|d| Instant::now() + nap >= d) {
            return Err(Error::Timeout {
                op: "connecting to a peer",
                peer: Some(Rank(peer.rank)),
            });
        }
        std::thread::sleep(nap);
        nap = (nap * 2).min(Duration::from_millis(200));
    }
}

/// Longest one connection attempt of [`connect_peer`] waits for an answer.
const CONNECT_TRY: Duration = Duration::from_secs(2);

/// How one try of [`connect_peer`] ended, when not with an error.
enum Attempt {
    /// Connected and authenticated.
    Connected(TcpStream),
    /// The peer closed the connection before its challenge (too many
    /// handshakes pending there).
    Closed,
    /// Nobody answered the connection request in time, or the network
    /// said it has no way there at the moment.
    Unanswered(std::io::Error),
    /// Connected, but no challenge came within [`CONNECT_TRY`].
    Silent,
}

/// One try of [`connect_peer`].
fn connect_peer_once(
    me: &Endpoint,
    peer: &Endpoint,
    key: &[u8],
    deadline: Option<Instant>,
    alive: &impl Fn() -> Result<()>,
) -> Result<Attempt> {
    use std::io::{Read, Write};
    let timed_out = || Error::Timeout {
        op: "connecting to a peer",
        peer: Some(Rank(peer.rank)),
    };
    let left = || match deadline {
        Some(d) => d
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(timed_out),
        None => Ok(Duration::from_secs(3600)),
    };
    let addr = peer.control;
    let mut s = match TcpStream::connect_timeout(&addr, left()?.min(CONNECT_TRY)) {
        Ok(s) => s,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::TimedOut
                    | std::io::ErrorKind::HostUnreachable
                    | std::io::ErrorKind::NetworkUnreachable
            ) =>
        {
            return Ok(Attempt::Unanswered(e))
        }
        Err(e) => {
            return Err(Error::io(
                format!("connecting to rank {} at {addr}", peer.rank),
                e,
            ))
        }
    };
    s.set_nodelay(true)
        .map_err(|e| Error::io("configuring a control connection", e))?;
    // The challenge: one frame, read exactly (what follows is the peer's).
    // The peer's engine sends it as soon as it takes the connection; a
    // connection that brought nothing within CONNECT_TRY is given up and
    // made again (seen over a lossy link: once in about 150 jobs a
    // connection got no challenge for a minute while a fresh one would
    // have).
    let connected = Instant::now();
    let mut frame = Vec::new();
    let mut need = 4usize;
    while frame.len() < need {
        alive()?;
        if frame.is_empty() && connected.elapsed() >= CONNECT_TRY {
            return Ok(Attempt::Silent);
        }
        s.set_read_timeout(Some(left()?.min(Duration::from_millis(50))))
            .map_err(|e| Error::io("configuring a control connection", e))?;
        let mut chunk = vec![0u8; need - frame.len()];
        match s.read(&mut chunk) {
            Ok(0) if frame.is_empty() => return Ok(Attempt::Closed),
            Ok(0) => {
                return Err(Error::Bootstrap(format!(
                    "rank {} closed the connection during its challenge",
                    peer.rank
                )))
            }
            Ok(n) => frame.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) => {
                return Err(Error::io(
                    format!("reading rank {}'s challenge", peer.rank),
                    e,
                ))
            }
        }
        if frame.len() == 4 {
            let len = u32::from_le_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
            if len > 1024 {
                return Err(Error::Bootstrap(format!(
                    "rank {} sent a challenge of {len} bytes",
                    peer.rank
                )));
            }
            need = 4 + len;
        }
    }
    let nonce: Vec<u8> = crate::net::frame::decode(&frame[4..])?;
    let hello: MeshHello = (me.rank, peer.rank, Some(me.clone()));
    let answer = auth::answer_frame(key, MESH, &nonce, &hello)?;
    s.set_write_timeout(Some(left()?))
        .and_then(|_| s.write_all(&answer))
        .map_err(|e| Error::io(format!("answering rank {}'s challenge", peer.rank), e))?;
    s.set_read_timeout(None)
        .and_then(|_| s.set_write_timeout(None))
        .map_err(|e| Error::io("configuring a control connection", e))?;
    Ok(Attempt::Connected(s))
}

/// The start-up messages as they arrive from another rank, for the fuzz
/// target `rendezvous` (`crate::fuzzing`): each type decoded from `data`
/// must encode back to bytes that decode to the same encoding.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn fuzz_messages(data: &[u8]) {
    fn round_trip<T: Serialize + serde::de::DeserializeOwned>(data: &[u8]) {
        let Ok(v) = crate::net::frame::decode::<T>(data) else {
            return;
        };
        let once = crate::net::frame::encode_body(&v).expect("a decoded message encodes");
        let twice = crate::net::frame::encode_body(
            &crate::net::frame::decode::<T>(&once).expect("its encoding decodes"),
        )
        .expect("encodes");
        assert_eq!(once, twice, "no round trip");
        if once.len() == data.len() {
            assert_eq!(once, data, "other bytes of the same length");
        }
    }
    round_trip::<Endpoint>(data);
    round_trip::<Welcome>(data);
    round_trip::<StartReport>(data);
    round_trip::<StartVerdict>(data);
    round_trip::<(u32, u32)>(data);
}

#[cfg(test)]
mod tests {
    use super::Tree;

    #[test]
    fn every_rank_but_0_is_the_child_of_its_parent_and_of_no_other() {
        for size in [1u32, 2, 3, 16, 17, 18, 100, 1000] {
            for fanout in [1u32, 2, 3, 16, 2000] {
                let t = Tree { size, fanout };
                let mut seen = vec![0u32; size as usize];
                for r in 0..size {
                    assert!(t.children(r).len() <= fanout as usize);
                    for c in t.children(r) {
                        assert_eq!(t.parent(c), Some(r), "size {size} fanout {fanout}");
                        seen[c as usize] += 1;
                    }
                }
                assert_eq!(t.parent(0), None);
                assert!(seen.iter().skip(1).all(|&k| k == 1));
                assert_eq!(seen[0], 0);
            }
        }
    }

    #[test]
    fn a_tree_with_a_fanout_of_the_job_is_the_star_around_rank_0() {
        let t = Tree {
            size: 17,
            fanout: 16,
        };
        assert_eq!(t.children(0), 1..17);
        assert!((1..17).all(|r| t.parent(r) == Some(0) && t.children(r).is_empty()));
    }

    /// The start-up as rank 0 runs it, against `n - 1` simulated peers:
    /// rank 0 runs the real `exchange_endpoints` and `finish_start`; the
    /// peers (threads of this process, `threads` of them, each playing
    /// many ranks) run the real client side of the check-in (the job key's
    /// proof, an endpoint as large as a real one) and of the barrier of
    /// rank 0's children. Returns rank 0's seconds in the rendezvous and
    /// in the barrier, and its bytes sent and received.
    fn simulate_rank0(n: u32, fanout: u32, threads: u32) -> (f64, f64, u64, u64) {
        use super::*;
        use std::sync::Arc;
        let key = b"model-key".to_vec();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let control = TcpListener::bind("127.0.0.1:0").unwrap();
        let system = crate::segments::LocalSegment::alloc_host(
            crate::model::ids::SegId(255),
            4096,
            64,
            Duration::ZERO,
        )
        .unwrap();
        let endpoint = |rank: u32| Endpoint {
            rank,
            host: HostId::current().unwrap(),
            hostname: "node-0001.cluster.example".into(),
            pid: 4_000_000 + rank,
            control: control.local_addr().unwrap(),
            system: system.descriptor.clone(),
            transports: Vec::new(),
        };
        let info = LaunchInfo {
            launcher: gaspi_launch::Launcher::GaspiRun,
            rank: 0,
            size: n,
            local_rank: 0,
            local_size: n,
            rendezvous: Some(addr),
            rendezvous_fd: None,
            job_key: key.clone(),
            pmix_server: false,
        };
        let tree = Tree { size: n, fanout };
        let peers: Vec<std::thread::JoinHandle<()>> = (0..threads)
            .map(|t| {
                let key = key.clone();
                let eps: Vec<Endpoint> =
                    (1..n).filter(|r| r % threads == t).map(endpoint).collect();
                std::thread::spawn(move || {
                    let deadline = Instant::now() + Duration::from_secs(600);
                    let mut open = Vec::new();
                    for ep in eps {
                        let mut s = connect_until(addr, deadline, "rank 0").unwrap();
                        blocking(&s, deadline).unwrap();
                        auth::answer(&mut s, &key, RENDEZVOUS, &ep).unwrap();
                        open.push((ep.rank, s));
                    }
                    // Every welcome (and rank 0's children report ready),
                    // then the children's verdicts.
                    let mut children = Vec::new();
                    for (r, mut s) in open {
                        match recv_msg::<Welcome>(&mut s).unwrap() {
                            Welcome::Parent(p) => assert_eq!(Some(p[0].rank), tree.parent(r)),
                            other => panic!("rank {r}: {other:?}"),
                        }
                        if tree.parent(r) == Some(0) {
                            send_msg(&mut s, &StartReport::Ready).unwrap();
                            children.push(s);
                        }
                    }
                    for mut s in children {
                        let v: StartVerdict = recv_msg(&mut s).unwrap();
                        assert!(matches!(v, StartVerdict::Go));
                    }
                })
            })
            .collect();
        let traffic = Arc::new(Traffic::default());
        let deadline = Instant::now() + Duration::from_secs(600);
        let t = Instant::now();
        let mut start = exchange_endpoints(
            &info,
            endpoint(0),
            Some(listener),
            &control,
            tree,
            16,
            &traffic,
            deadline,
        )
        .unwrap();
        let rendezvous_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        finish_start(&info, &mut start.tree, Ok(()), deadline).unwrap();
        let barrier_s = t.elapsed().as_secs_f64();
        for (_, s) in &start.tree {
            traffic.add(s);
        }
        for p in peers {
            p.join().unwrap();
        }
        use std::sync::atomic::Ordering::Relaxed;
        (
            rendezvous_s,
            barrier_s,
            traffic.sent.load(Relaxed),
            traffic.received.load(Relaxed),
        )
    }

    /// The PMIx path's tree (decision 0084) with a table standing in for
    /// PMIx: `n` ranks as threads, each publishing its endpoint and taking
    /// its parent's from the table once published, join the tree and pass
    /// the start barrier; every rank holds its parent and children and no
    /// more, and rank 0 connects to nobody.
    #[test]
    fn ranks_join_the_start_up_tree_through_their_parents_published_endpoints() {
        use super::*;
        use std::sync::{Arc, Condvar, Mutex};
        let (n, fanout) = (40u32, 4u32);
        let tree = Tree { size: n, fanout };
        let published: Arc<(Mutex<Vec<Option<Endpoint>>>, Condvar)> =
            Arc::new((Mutex::new(vec![None; n as usize]), Condvar::new()));
        let ranks: Vec<std::thread::JoinHandle<Vec<u32>>> = (0..n)
            .map(|rank| {
                let published = published.clone();
                std::thread::spawn(move || {
                    let info = LaunchInfo {
                        launcher: gaspi_launch::Launcher::Pmix,
                        rank,
                        size: n,
                        local_rank: rank,
                        local_size: n,
                        rendezvous: None,
                        rendezvous_fd: None,
                        job_key: b"tree-key".to_vec(),
                        pmix_server: true,
                    };
                    let (control, addr) = control_listener_for(&info).unwrap();
                    assert!(addr.ip().is_loopback(), "one host: {addr}");
                    let system = crate::segments::LocalSegment::alloc_host(
                        crate::model::ids::SegId(255),
                        4096,
                        64,
                        Duration::ZERO,
                    )
                    .unwrap();
                    let me = Endpoint {
                        rank,
                        host: HostId::current().unwrap(),
                        hostname: "node".into(),
                        pid: rank,
                        control: addr,
                        system: system.descriptor.clone(),
                        transports: Vec::new(),
                    };
                    {
                        let (table, cv) = &*published;
                        table.lock().unwrap()[rank as usize] = Some(me.clone());
                        cv.notify_all();
                    }
                    let deadline = Instant::now() + Duration::from_secs(60);
                    let parent_endpoint = |p: u32| -> Result<Endpoint> {
                        let (table, cv) = &*published;
                        let mut t = table.lock().unwrap();
                        loop {
                            if let Some(ep) = &t[p as usize] {
                                return Ok(ep.clone());
                            }
                            t = cv.wait(t).unwrap();
                        }
                    };
                    let mut start =
                        join_tree(&info, me, parent_endpoint, &control, tree, deadline).unwrap();
                    assert!(!start.whole && start.directory.is_none());
                    finish_start(&info, &mut start.tree, Ok(()), deadline).unwrap();
                    let known: Vec<u32> = (0..n)
                        .filter(|&r| start.table[r as usize].is_some())
                        .collect();
                    let mut held: Vec<u32> = start.tree.iter().map(|(r, _)| *r).collect();
                    held.sort_unstable();
                    let mut want: Vec<u32> = tree
                        .parent(rank)
                        .into_iter()
                        .chain(tree.children(rank))
                        .collect();
                    want.sort_unstable();
                    assert_eq!(held, want, "rank {rank}'s start-up connections");
                    known
                })
            })
            .collect();
        for (rank, t) in ranks.into_iter().enumerate() {
            let known = t.join().unwrap();
            let rank = rank as u32;
            let mut want: Vec<u32> = std::iter::once(rank)
                .chain(tree.parent(rank))
                .chain(tree.children(rank))
                .collect();
            want.sort_unstable();
            assert_eq!(known, want, "rank {rank} knows its tree neighbours only");
        }
    }

    #[test]
    fn rank_0_starts_a_job_of_simulated_peers_and_its_traffic_is_linear() {
        let (_, _, sent_a, received_a) = simulate_rank0(100, 16, 4);
        let (_, _, sent_b, received_b) = simulate_rank0(400, 16, 4);
        // Four times the ranks, four times the bytes (give or take the
        // constant part), not sixteen.
        for (a, b) in [(sent_a, sent_b), (received_a, received_b)] {
            let ratio = b as f64 / a as f64;
            assert!((3.5..4.5).contains(&ratio), "{a} -> {b} bytes: x{ratio:.2}");
        }
    }

    /// The model run of issue 43 (docs/startup-model.md):
    /// `GASPI_MODEL_SIZES=1024,16384 cargo test --release -p gaspi --lib
    /// model_run -- --ignored --nocapture`.
    #[test]
    #[ignore = "a model run, minutes long: see docs/startup-model.md"]
    fn model_run() {
        let sizes: Vec<u32> = std::env::var("GASPI_MODEL_SIZES")
            .unwrap_or_else(|_| "1024,4096,16384".into())
            .split(',')
            .map(|v| v.trim().parse().unwrap())
            .collect();
        for n in sizes {
            let (r, b, sent, received) = simulate_rank0(n, 16, 8);
            println!(
                "{{\"model\":\"rank0-simulated-peers\",\"ranks\":{n},\"rendezvous_s\":{r:.3},\
                 \"barrier_s\":{b:.4},\"rank0_sent_bytes\":{sent},\"rank0_received_bytes\":{received}}}"
            );
        }
    }
}
