//! Starting a job: who am I, where are the others, and a connection to each.
//!
//! 1. [`launch_env`] reads rank, size, rendezvous address and job key from
//!    whatever launched the process.
//! 2. [`exchange_endpoints`]: every rank connects to rank 0, proves the job
//!    key ([`auth`]) and sends its [`Endpoint`]; rank 0 answers everyone with
//!    the full table and closes the rendezvous. Rank 0 then takes no further
//!    special part.
//! 3. [`connect_mesh`]: rank `i` connects to every rank `j < i` and accepts
//!    from every `j > i`, again proving the key. These control connections
//!    go to the progress engines; a connection that closes tells that its
//!    peer is gone.
//!
//! The listeners accept through [`handshake`]: every connection gets a few
//! seconds of its own to prove the key while acceptance goes on, so one
//! that connects and says nothing costs the job nothing. They listen on
//! the address the job uses ([`control_listener`]), loopback for a job on
//! one host.

pub(crate) mod auth;
mod handshake;
mod launch_env;

pub use launch_env::{first_slurm_node, LaunchInfo, Launcher};

use crate::error::{Error, Result};
use crate::segment::SegmentDescriptor;
use crate::wire::{read_frame, write_frame};
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
pub(crate) fn exchange_endpoints(
    info: &LaunchInfo,
    me: Endpoint,
    deadline: Instant,
) -> Result<Vec<Endpoint>> {
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
        for (s, _) in accepted {
            blocking(&s, deadline)?;
            conns.push(s);
        }
        table[0] = Some(me);
        let table: Vec<Endpoint> = table
            .into_iter()
            .map(|e| e.expect("all ranks checked in"))
            .collect();
        for mut s in conns {
            // A control listener on every interface: tell each peer rank
            // 0's address as seen from that peer.
            let mut t = table.clone();
            if t[0].control.ip().is_unspecified() {
                if let Ok(local) = s.local_addr() {
                    t[0].control.set_ip(local.ip());
                }
            }
            write_frame(&mut s, &t)?;
        }
        Ok(table)
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
            Error::Bootstrap(format!(
                "rank 0 did not send the endpoint table ({e}); wrong job key?"
            ))
        })?;
        if table.len() != n {
            return Err(Error::Bootstrap(format!(
                "rank 0 sent {} endpoints for a job of {n}",
                table.len()
            )));
        }
        Ok(table)
    }
}

/// Opens the authenticated control connection to every other rank.
pub(crate) fn connect_mesh(
    rank: u32,
    table: &[Endpoint],
    listener: &TcpListener,
    key: &[u8],
    deadline: Instant,
) -> Result<Vec<Option<TcpStream>>> {
    let n = table.len();
    let mut conns: Vec<Option<TcpStream>> = (0..n).map(|_| None).collect();
    for (j, ep) in table.iter().enumerate().take(rank as usize) {
        let mut s = connect_until(ep.control, deadline, &format!("rank {j}"))?;
        blocking(&s, deadline)?;
        auth::answer(&mut s, key, MESH, &(rank, j as u32))?;
        conns[j] = Some(s);
    }
    let expected = n - 1 - rank as usize;
    if expected > 0 {
        let mut seen = vec![false; n];
        let accepted = handshake::accept_authenticated(
            listener,
            key,
            MESH,
            expected,
            deadline,
            "connections from higher ranks",
            |&(from, to): &(u32, u32)| {
                let f = from as usize;
                if to != rank || f <= rank as usize || f >= n || seen[f] {
                    return Err(Error::Bootstrap(format!(
                        "unexpected control connection from rank {from} to rank {to}"
                    )));
                }
                seen[f] = true;
                Ok(())
            },
        )?;
        for (s, (from, _)) in accepted {
            blocking(&s, deadline)?;
            conns[from as usize] = Some(s);
        }
    }
    Ok(conns)
}
