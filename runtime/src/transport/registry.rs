//! The one list of network transports, and the choice per pair of ranks.
//!
//! Ranks on the same host reach each other through shared memory (with
//! CUDA IPC for GPU segments); ranks on different hosts through TCP over
//! their control connections, which every build has. A *network
//! transport* (verbs, libfabric) is what a pair on different hosts uses in
//! place of TCP when both ends opened it. Each one lives in its own folder
//! under `transport/` and is known to the rest of the runtime only through
//! [`NetworkTransport`] (the seam, `transport/mod.rs`) and one line in [`NETWORK`]: what it publishes at
//! start-up travels as opaque bytes in the rendezvous table, packed and
//! unpacked by itself; it registers the host segments this rank creates;
//! it settles its requests on the queues' counts and asks the peers
//! whether a target lives.
//!
//! `GASPI_TRANSPORT` picks: `auto` (a network transport where both ends
//! have one, else TCP), `tcp` (none is opened), or a transport's name
//! (opening it must succeed, and every peer on another host must have it).

use super::{NetworkTransport, Transport};
use crate::model::config::{Config, TransportChoice};
use crate::model::error::{Error, Result};
use crate::model::ids::Rank;
use std::sync::Arc;

/// Opens a network transport for rank `rank` of `size`, or says why it
/// cannot here.
pub(crate) type Opener = fn(&Config, Rank, u32) -> Result<Arc<dyn NetworkTransport>>;

/// The network transports of this build, preferred first. Adding one is
/// its folder under `transport/` and a line here.
pub(crate) const NETWORK: &[(&str, Opener)] = &[
    #[cfg(feature = "verbs")]
    ("verbs", super::verbs::open),
    #[cfg(feature = "libfabric")]
    ("libfabric", super::libfabric_transport::open),
];

/// Opens the network transports `config` allows: none under
/// `GASPI_TRANSPORT=tcp`; the one named, which must open; under `auto`,
/// every one that opens (one that does not says why in a log line).
pub(crate) fn open_network(
    config: &Config,
    rank: Rank,
    size: u32,
) -> Result<Vec<Arc<dyn NetworkTransport>>> {
    if config.transport == TransportChoice::Tcp {
        return Ok(Vec::new());
    }
    if let Some(name) = required(config) {
        let Some((_, open)) = NETWORK.iter().find(|(n, _)| *n == name) else {
            return Err(Error::Config(format!(
                "GASPI_TRANSPORT={name}: this build has no {name} transport (build with --features {name})"
            )));
        };
        return Ok(vec![open(config, rank, size)?]);
    }
    let mut opened = Vec::new();
    for (name, open) in NETWORK {
        match open(config, rank, size) {
            Ok(t) => opened.push(t),
            Err(e) => tracing::info!("no {name} ({e}); other hosts are reached over TCP"),
        }
    }
    Ok(opened)
}

/// What this rank publishes of each opened network transport.
pub(crate) fn endpoints(opened: &[Arc<dyn NetworkTransport>]) -> Result<Vec<(String, Vec<u8>)>> {
    opened
        .iter()
        .map(|t| Ok((t.name().to_string(), t.endpoint()?)))
        .collect()
}

/// The network transport to `peer` on another host, connected: the first
/// this rank opened that `theirs` (the peer's published endpoints) has
/// too; `None`: TCP. Under a named `GASPI_TRANSPORT`, a peer without it
/// fails the start-up, named.
pub(crate) fn connect_pair(
    config: &Config,
    opened: &[Arc<dyn NetworkTransport>],
    me: Rank,
    peer: Rank,
    theirs: &[(String, Vec<u8>)],
) -> Result<Option<Arc<dyn Transport>>> {
    for t in opened {
        if let Some((_, bytes)) = theirs.iter().find(|(n, _)| n == t.name()) {
            return t.clone().connect(me, peer, bytes).map(Some);
        }
    }
    match required(config) {
        Some(name) => Err(Error::NoTransport {
            rank: peer,
            reason: format!(
                "GASPI_TRANSPORT={name} and it published no {name} endpoint (no device?)"
            ),
        }),
        None => Ok(None),
    }
}

/// The network transport `GASPI_TRANSPORT` names, if it names one.
fn required(config: &Config) -> Option<&'static str> {
    match config.transport {
        TransportChoice::Auto | TransportChoice::Tcp => None,
        TransportChoice::Verbs => Some("verbs"),
        TransportChoice::Libfabric => Some("libfabric"),
    }
}
