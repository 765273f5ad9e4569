//! Starting a job: who am I, where are the others, and a connection to each.
//!
//! 1. `launch_env` reads rank, size, rendezvous address and job key from
//!    whatever launched the process.
//! 2. `exchange_endpoints`: every rank connects to rank 0, proves the job
//!    key (`auth`) and sends its `Endpoint`; rank 0 answers everyone with
//!    the full table and closes the rendezvous. Rank 0 then takes no further
//!    special part.
//!    The rendezvous connections stay open: they are the control
//!    connections between rank 0 and every other rank (a star, over which
//!    news of a rank's death reaches every survivor).
//! 3. Every other pair connects on first use (`connect_peer`): the rank
//!    that first sends to another connects to its control listener, which
//!    the progress engine serves (`handshake::Pending`), and proves the
//!    key again. A job of N ranks holds N - 1 connections at start-up, not
//!    N(N - 1) / 2 (decision 0022); these control connections go to the
//!    progress engines, and one that closes tells that its peer is gone.
//!
//! The listeners accept through `handshake`: every connection gets a few
//! seconds of its own to prove the key while acceptance goes on, so one
//! that connects and says nothing costs the job nothing. They listen on
//! the address the job uses (`control_listener`), loopback for a job on
//! one host.

pub(crate) mod auth;
pub(crate) mod handshake;
mod launch_env;

pub use launch_env::{first_slurm_node, LaunchInfo, Launcher};

use crate::error::{Error, Result};
use crate::segment::SegmentDescriptor;
use crate::wire::{read_frame, write_frame};
use gaspi_segments::HostId;
pub(crate) use handshake::Pending;
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
    /// How to reach this rank over RDMA, when it opened a device (the
    /// `verbs` transport); `None`: TCP only.
    #[serde(default)]
    pub verbs: Option<VerbsEndpoint>,
}

/// A rank's RDMA address and its queue pairs, one per rank of the job
/// (entry `j` is the QP that rank `j` connects to).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct VerbsEndpoint {
    /// Device name, for logs.
    pub device: String,
    /// InfiniBand LID (0 on RoCE).
    pub lid: u16,
    /// The GID peers address (RoCE; the port GID on InfiniBand).
    pub gid: [u8; 16],
    /// QP number for each rank.
    pub qpns: Vec<u32>,
    /// Start PSN of each of those QPs.
    pub psns: Vec<u32>,
    /// A registered constant 1 (u32): the source of read_notify's READ.
    pub one_addr: u64,
    /// Remote key of that constant.
    pub one_rkey: u32,
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
fn rendezvous_listener(info: &LaunchInfo) -> Result<TcpListener> {
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

/// Exchanges endpoints through rank 0; returns them indexed by rank.
/// The connections it leaves open are the control connections between
/// rank 0 and each other rank: `(peer, stream)`, blocking.
pub(crate) fn exchange_endpoints(
    info: &LaunchInfo,
    me: Endpoint,
    deadline: Instant,
) -> Result<(Vec<Endpoint>, StarConnections)> {
    let n = info.size as usize;
    if info.rank == 0 {
        let listener = rendezvous_listener(info)?;
        if let Ok(a) = listener.local_addr() {
            tracing::debug!("rendezvous listening on {a}");
        }
        let mut table: Vec<Option<Endpoint>> = vec![None; n];
        let accepted = handshake::accept_authenticated(
            &listener,
            &info.job_key,
            RENDEZVOUS,
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
        )?;
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
        for (_, s) in conns.iter_mut() {
            // A control listener on every interface: tell each peer rank
            // 0's address as seen from that peer.
            let mut t = table.clone();
            if t[0].control.ip().is_unspecified() {
                if let Ok(local) = s.local_addr() {
                    t[0].control.set_ip(local.ip());
                }
            }
            write_frame(s, &t)?;
        }
        Ok((table, conns))
    } else {
        let addr = info
            .rendezvous
            .ok_or_else(|| Error::Bootstrap("no rendezvous address".into()))?;
        let mut s = connect_until(addr, deadline, "rank 0's rendezvous")?;
        blocking(&s, deadline)?;
        let mut me = me;
        if me.control.ip().is_unspecified() {
            if let Ok(local) = s.local_addr() {
                me.control.set_ip(local.ip());
            }
        }
        auth::answer(&mut s, &info.job_key, RENDEZVOUS, &me)?;
        let table: Vec<Endpoint> = read_frame(&mut s).map_err(|e| {
            use std::io::ErrorKind::{ConnectionReset, TimedOut, UnexpectedEof, WouldBlock};
            // A timeout is a job not complete (yet); a closed connection
            // may be rank 0 refusing the key.
            let hint = match &e {
                Error::Io { source, .. } if matches!(source.kind(), WouldBlock | TimedOut) => {
                    ": not every rank started within the init timeout (GASPI_INIT_TIMEOUT_MS)"
                }
                Error::Io { source, .. }
                    if matches!(source.kind(), UnexpectedEof | ConnectionReset) =>
                {
                    ": rank 0 closed the connection (a wrong job key, or rank 0 ended)"
                }
                _ => "",
            };
            Error::Bootstrap(format!(
                "rank 0 did not send the endpoint table ({e}){hint}"
            ))
        })?;
        if table.len() != n {
            return Err(Error::Bootstrap(format!(
                "rank 0 sent {} endpoints for a job of {n}",
                table.len()
            )));
        }
        Ok((table, vec![(0, s)]))
    }
}

/// The connections between rank 0 and each other rank that the rendezvous
/// leaves open, as `(peer, stream)`.
pub(crate) type StarConnections = Vec<(u32, TcpStream)>;

/// Purpose string of the proof on control connections made on first use.
pub(crate) const MESH_PURPOSE: &str = MESH;

/// Opens the control connection from rank `me` to `peer` (on first use):
/// connects to its control listener and answers its challenge, within
/// `deadline` (`None`: for as long as `alive` says the peer may still
/// answer; it is asked every 50 ms). A refused connection means nobody
/// listens there any more: the peer's process is gone.
///
/// The peer's progress engine answers the challenge, so a stopped peer
/// holds this until it runs again or the deadline passes.
pub(crate) fn connect_peer(
    me: u32,
    peer: &Endpoint,
    key: &[u8],
    deadline: Option<Instant>,
    alive: impl Fn() -> Result<()>,
) -> Result<TcpStream> {
    use std::io::{Read, Write};
    let timed_out = || Error::Timeout {
        op: "connecting to a peer",
    };
    let left = || match deadline {
        Some(d) => d
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(timed_out),
        None => Ok(Duration::from_secs(3600)),
    };
    let addr = peer.control;
    let mut s = TcpStream::connect_timeout(&addr, left()?.min(Duration::from_secs(2)))
        .map_err(|e| Error::io(format!("connecting to rank {} at {addr}", peer.rank), e))?;
    s.set_nodelay(true)
        .map_err(|e| Error::io("configuring a control connection", e))?;
    // The challenge: one frame, read exactly (what follows is the peer's).
    let mut frame = Vec::new();
    let mut need = 4usize;
    while frame.len() < need {
        alive()?;
        s.set_read_timeout(Some(left()?.min(Duration::from_millis(50))))
            .map_err(|e| Error::io("configuring a control connection", e))?;
        let mut chunk = vec![0u8; need - frame.len()];
        match s.read(&mut chunk) {
            Ok(0) => {
                return Err(Error::Bootstrap(format!(
                    "rank {} closed the connection before its challenge",
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
    let nonce: Vec<u8> = crate::wire::decode(&frame[4..])?;
    let answer = auth::answer_frame(key, MESH, &nonce, &(me, peer.rank))?;
    s.set_write_timeout(Some(left()?))
        .and_then(|_| s.write_all(&answer))
        .map_err(|e| Error::io(format!("answering rank {}'s challenge", peer.rank), e))?;
    s.set_read_timeout(None)
        .and_then(|_| s.set_write_timeout(None))
        .map_err(|e| Error::io("configuring a control connection", e))?;
    Ok(s)
}
