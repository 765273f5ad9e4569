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

pub(crate) mod auth;
mod launch_env;

pub use launch_env::{first_slurm_node, LaunchInfo, Launcher};

use crate::error::{Error, Result};
use crate::segment::SegmentDescriptor;
use crate::wire::{read_frame, write_frame};
use gaspi_segments::HostId;
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
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

/// Accepts one connection before `deadline` (polling: this is start-up only).
fn accept_until(listener: &TcpListener, deadline: Instant, what: &str) -> Result<TcpStream> {
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::io("configuring a listener", e))?;
    loop {
        match listener.accept() {
            Ok((s, _)) => return Ok(s),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Err(Error::Bootstrap(format!("timed out waiting for {what}")));
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(Error::io(format!("accepting {what}"), e)),
        }
    }
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
    // Listen on every interface at the agreed port: rank 0's own address may
    // differ from the name the others resolve (the connections authenticate).
    let any = SocketAddr::new(
        if addr.is_ipv4() {
            IpAddr::from([0, 0, 0, 0])
        } else {
            IpAddr::from([0u16; 8])
        },
        addr.port(),
    );
    TcpListener::bind(any).map_err(|e| Error::io(format!("binding the rendezvous at {any}"), e))
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
        let mut table: Vec<Option<Endpoint>> = vec![None; n];
        let mut conns = Vec::with_capacity(n - 1);
        while conns.len() < n - 1 {
            let mut s = accept_until(&listener, deadline, "the other ranks at the rendezvous")?;
            blocking(&s, deadline)?;
            let ep: Endpoint = match auth::challenge(&mut s, &info.job_key, RENDEZVOUS) {
                Ok(ep) => ep,
                Err(e) => {
                    tracing::warn!("rendezvous: {e}");
                    continue;
                }
            };
            let r = ep.rank as usize;
            if r == 0 || r >= n || table[r].is_some() {
                return Err(Error::Bootstrap(format!(
                    "rendezvous: a second or impossible rank {r} checked in"
                )));
            }
            table[r] = Some(ep);
            conns.push(s);
        }
        table[0] = Some(me);
        let table: Vec<Endpoint> = table
            .into_iter()
            .map(|e| e.expect("all ranks checked in"))
            .collect();
        for mut s in conns {
            // Tell each peer rank 0's address as seen from that peer.
            let mut t = table.clone();
            if let Ok(local) = s.local_addr() {
                t[0].control.set_ip(local.ip());
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
        if let Ok(local) = s.local_addr() {
            me.control.set_ip(local.ip());
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
    let mut expected = n - 1 - rank as usize;
    while expected > 0 {
        let mut s = accept_until(listener, deadline, "connections from higher ranks")?;
        blocking(&s, deadline)?;
        let (from, to): (u32, u32) = match auth::challenge(&mut s, key, MESH) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!("control connection: {e}");
                continue;
            }
        };
        let f = from as usize;
        if to != rank || f <= rank as usize || f >= n || conns[f].is_some() {
            return Err(Error::Bootstrap(format!(
                "unexpected control connection from rank {from} to rank {to}"
            )));
        }
        conns[f] = Some(s);
        expected -= 1;
    }
    Ok(conns)
}
