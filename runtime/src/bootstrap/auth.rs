//! Proof of the job key: an HMAC-SHA256 over a fresh challenge.
//!
//! The side that accepts a connection sends 32 random bytes; the side that
//! connected answers with its payload and `HMAC(key, purpose || nonce ||
//! payload)`. A peer without the key cannot answer, and an answer recorded
//! on one connection is useless on the next (new nonce). The key itself
//! never crosses the wire.

use crate::error::{Error, Result};
use crate::wire::{read_frame, write_frame};
use hmac::{Hmac, Mac};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use sha2::Sha256;
use std::net::TcpStream;

#[derive(Serialize, Deserialize)]
struct Answer {
    payload: Vec<u8>,
    mac: Vec<u8>,
}

fn mac(key: &[u8], purpose: &str, nonce: &[u8], payload: &[u8]) -> Hmac<Sha256> {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes keys of any size");
    m.update(purpose.as_bytes());
    m.update(nonce);
    m.update(payload);
    m
}

/// Accepting side: challenges the peer and returns its authenticated payload.
pub(crate) fn challenge<T: DeserializeOwned>(
    stream: &mut TcpStream,
    key: &[u8],
    purpose: &str,
) -> Result<T> {
    let nonce: [u8; 32] = rand::random();
    write_frame(stream, &nonce.to_vec())?;
    let answer: Answer = read_frame(stream)?;
    mac(key, purpose, &nonce, &answer.payload)
        .verify_slice(&answer.mac)
        .map_err(|_| {
            Error::Bootstrap(format!(
                "a connection from {} did not prove the job key; dropped",
                stream
                    .peer_addr()
                    .map(|a| a.to_string())
                    .unwrap_or_else(|_| "?".into())
            ))
        })?;
    crate::wire::decode(&answer.payload)
}

/// Connecting side: answers the challenge with `payload`.
pub(crate) fn answer<T: Serialize>(
    stream: &mut TcpStream,
    key: &[u8],
    purpose: &str,
    payload: &T,
) -> Result<()> {
    let nonce: Vec<u8> = read_frame(stream)?;
    let payload =
        bincode::serialize(payload).map_err(|e| Error::Protocol(format!("encoding: {e}")))?;
    let m = mac(key, purpose, &nonce, &payload)
        .finalize()
        .into_bytes()
        .to_vec();
    write_frame(stream, &Answer { payload, mac: m })
}
