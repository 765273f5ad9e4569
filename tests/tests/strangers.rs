//! Start-up with strangers at the door: connections to the rendezvous and
//! control ports that send nothing, garbage or a wrong key must cost the
//! job nothing, and the ports must not listen beyond the job's interface.

use gaspi_tests::{clean_env, free_port, fresh_tag, rank_bin, shm_files, Running};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

const N: u32 = 4;
/// Far above what the job needs, so that only a stall can reach it.
const INIT_TIMEOUT_MS: &str = "45000";
/// What the job may take with the strangers held open (it takes well under
/// a second unloaded); a stalled start-up takes the whole init timeout.
const BOUND: Duration = Duration::from_secs(20);

fn rank(r: u32, port: u16, key: &str, tag: &str) -> Running {
    let mut cmd = Command::new(rank_bin!());
    clean_env(&mut cmd);
    cmd.env("GASPI_RANK", r.to_string())
        .env("GASPI_SIZE", N.to_string())
        .env("GASPI_RENDEZVOUS", format!("127.0.0.1:{port}"))
        .env("GASPI_JOB_KEY", key)
        .env("GASPI_INIT_TIMEOUT_MS", INIT_TIMEOUT_MS)
        .env("GASPI_LOG", "warn,gaspi::net=debug")
        .args(["ring", "--rounds", "2", "--expect-size", &N.to_string()]);
    Running::spawn(cmd, tag)
}

/// The address after `on ` in a log line (fields and colours follow it).
fn logged_addr(line: &str) -> SocketAddr {
    line.split_once(" on ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address after \"on\" in {line:?}"))
}

/// The local addresses of the listening TCP sockets at `port`, from
/// /proc/net/tcp (hex `ADDR:PORT`, state 0A).
fn listening_at(port: u16) -> Vec<String> {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (addr, p) = f.get(1)?.split_once(':')?;
            (u16::from_str_radix(p, 16).ok()? == port && *f.get(3)? == "0A")
                .then(|| addr.to_string())
        })
        .collect()
}

/// A connection that never sends anything.
fn idle(addr: SocketAddr) -> TcpStream {
    TcpStream::connect(addr).unwrap_or_else(|e| panic!("connecting to {addr}: {e}"))
}

/// A connection that sends bytes that are no answer (an HTTP request: its
/// first four bytes read as a frame length of about a billion).
fn garbage(addr: SocketAddr) -> TcpStream {
    let mut s = idle(addr);
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("sending garbage");
    s
}

/// A connection that reads the challenge and answers it in the right shape
/// (a frame of postcard `{payload: Vec<u8>, mac: Vec<u8>}`: each a varint
/// length and the bytes) without the key.
/// Should the encoding change, this is garbage and must be dropped all
/// the same.
fn wrong_key(addr: SocketAddr) -> TcpStream {
    let mut s = idle(addr);
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut len = [0u8; 4];
    s.read_exact(&mut len)
        .expect("reading the challenge length");
    let mut nonce = vec![0u8; u32::from_le_bytes(len) as usize];
    s.read_exact(&mut nonce).expect("reading the challenge");
    let mut body = Vec::new();
    for part in [&[1u8, 2, 3, 4][..], &[0xAB; 32][..]] {
        body.push(part.len() as u8); // a varint of one byte below 128
        body.extend_from_slice(part);
    }
    let mut frame = (body.len() as u32).to_le_bytes().to_vec();
    frame.extend_from_slice(&body);
    s.write_all(&frame).expect("sending a wrong answer");
    s
}

/// Whether the other side closes `s` within `within`.
fn closed_by_peer(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 256];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

#[test]
fn strangers_at_the_rendezvous_and_control_ports_do_not_stall_start_up() {
    let before = shm_files();
    let port = free_port();
    let key = format!("{:032x}", rand::random::<u128>());
    let tag = fresh_tag();
    let start = Instant::now();
    let mut ranks = Vec::new();
    let mut idle_ones = Vec::new();
    let mut dropped_ones = Vec::new();
    let mut listeners = Vec::new();
    for r in 0..N {
        let mut running = rank(r, port, &key, &tag);
        let control = logged_addr(
            &running.wait_for_stderr_line("control listener on ", Duration::from_secs(30)),
        );
        if r == 0 {
            let rv = logged_addr(
                &running.wait_for_stderr_line("rendezvous listening on", Duration::from_secs(30)),
            );
            assert_eq!(rv.port(), port);
            // In the backlog before any rank: the first to be accepted.
            idle_ones.push(idle(rv));
            dropped_ones.push(("garbage at the rendezvous", garbage(rv)));
            dropped_ones.push(("a wrong key at the rendezvous", wrong_key(rv)));
        }
        // The control listener is not used before every rank has checked
        // in at the rendezvous, so these are ahead of the real ranks. The
        // last rank's check-in completes the rendezvous: its job may run
        // and end before we connect (about 40 ms), so it gets a silent
        // stranger only if its port is still open.
        if r + 1 < N {
            idle_ones.push(idle(control));
            dropped_ones.push(("garbage at a control port", garbage(control)));
        } else if let Ok(s) = TcpStream::connect(control) {
            idle_ones.push(s);
        }
        listeners.push((r, control, listening_at(control.port())));
        ranks.push(running);
    }
    let outs: Vec<_> = ranks
        .into_iter()
        .map(|r| r.finish(Duration::from_secs(90)))
        .collect();
    let elapsed = start.elapsed();
    for (r, o) in outs.iter().enumerate() {
        o.assert_success();
        assert_eq!(
            o.stdout_lines_with(&format!("ok ring of 2 rounds, rank {r} of {N}")),
            1,
            "{}",
            o.dump()
        );
    }
    assert!(
        elapsed < BOUND,
        "the job took {elapsed:?} with strangers at its ports (bound {BOUND:?}):\n{}",
        outs[0].dump()
    );
    for (what, mut s) in dropped_ones {
        assert!(
            closed_by_peer(&mut s, Duration::from_secs(10)),
            "{what} was not dropped"
        );
    }
    assert!(
        outs[0].stderr.contains("did not prove the job key"),
        "rank 0 did not report the wrong key:\n{}",
        outs[0].dump()
    );
    for (r, control, bound) in listeners {
        assert!(
            control.ip().is_loopback(),
            "rank {r}'s control listener is on {control}"
        );
        // Ranks 0..N-1 are still waiting at the rendezvous when looked at;
        // the last may already have closed its listener.
        if r + 1 < N {
            assert_eq!(
                bound,
                vec!["0100007F".to_string()],
                "rank {r}'s control port {} listens on (hex) {bound:?}, not on loopback alone",
                control.port()
            );
        }
    }
    drop(idle_ones);
    outs[0].assert_nothing_left(&before);
}
