//! Proof of the job key: an HMAC-SHA256 over a fresh challenge.
//!
//! The side that accepts a connection sends 32 random bytes; the side that
//! connected answers with its payload and `HMAC(key, purpose || nonce ||
//! payload)`. A peer without the key cannot answer, and an answer recorded
//! on one connection is useless on the next (new nonce). The key itself
//! never crosses the wire.

use crate::model::error::{Error, Result};
use crate::net::frame::{read_frame, write_frame};
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

/// Accepting side, first step: a fresh challenge, sent as one frame.
pub(crate) fn new_nonce() -> [u8; 32] {
    rand::random()
}

/// Accepting side, second step: checks `answer` (the body of the peer's
/// answer frame) against the challenge `nonce` and returns the peer's
/// authenticated payload. `peer` names the connection in the error.
pub(crate) fn verify<T: DeserializeOwned>(
    key: &[u8],
    purpose: &str,
    nonce: &[u8],
    answer: &[u8],
    peer: &str,
) -> Result<T> {
    let answer: Answer = crate::net::frame::decode(answer).map_err(|e| {
        Error::Bootstrap(format!(
            "a connection from {peer} sent no answer to the challenge ({e}); dropped"
        ))
    })?;
    mac(key, purpose, nonce, &answer.payload)
        .verify_slice(&answer.mac)
        .map_err(|_| {
            Error::Bootstrap(format!(
                "a connection from {peer} did not prove the job key; dropped"
            ))
        })?;
    crate::net::frame::decode(&answer.payload)
}

/// Connecting side: the answer frame to challenge `nonce`, carrying
/// `payload`.
pub(crate) fn answer_frame<T: Serialize>(
    key: &[u8],
    purpose: &str,
    nonce: &[u8],
    payload: &T,
) -> Result<Vec<u8>> {
    let payload = crate::net::frame::encode_body(payload)?;
    let m = mac(key, purpose, nonce, &payload)
        .finalize()
        .into_bytes()
        .to_vec();
    crate::net::frame::encode(&Answer { payload, mac: m })
}

/// Connecting side: answers the challenge with `payload`.
pub(crate) fn answer<T: Serialize>(
    stream: &mut TcpStream,
    key: &[u8],
    purpose: &str,
    payload: &T,
) -> Result<()> {
    let nonce: Vec<u8> = read_frame(stream)?;
    let payload = crate::net::frame::encode_body(payload)?;
    let m = mac(key, purpose, &nonce, &payload)
        .finalize()
        .into_bytes()
        .to_vec();
    write_frame(stream, &Answer { payload, mac: m })
}
