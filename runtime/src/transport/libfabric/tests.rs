//! The layer on its own: two (or three) endpoints of one process, or a
//! child process, over `tcp;ofi_rxm` on 127.0.0.1 (another provider and
//! address with `GASPI_LIBFABRIC_TEST_PROVIDER` and
//! `GASPI_LIBFABRIC_TEST_SOURCE`: `verbs;ofi_rxm` on a Soft-RoCE device's
//! address).
//!
//! Each test skips with a printed `SKIPPED` line where the provider (or
//! what it tests, such as atomics) is not offered here.

use super::*;
use std::io::{BufRead, BufReader, Write};

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The provider the tests run over.
fn provider() -> String {
    std::env::var("GASPI_LIBFABRIC_TEST_PROVIDER").unwrap_or_else(|_| "tcp;ofi_rxm".into())
}

/// The address the endpoints bind to.
fn source() -> String {
    std::env::var("GASPI_LIBFABRIC_TEST_SOURCE").unwrap_or_else(|_| "127.0.0.1".into())
}
/// Longest any wait of these tests may take before it fails.
const PATIENCE: Duration = Duration::from_secs(60);

fn skip(test: &str, reason: &str) {
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {reason}");
    println!("SKIPPED {test}: {reason}");
}

fn query(order: Option<NotifyOrder>) -> Query {
    Query {
        provider: Some(provider()),
        source: Some(source()),
        order,
        ..Query::default()
    }
}

/// Opens a node, or says why the test is skipped.
fn node(test: &str, order: Option<NotifyOrder>) -> Option<Node> {
    node_for(test, &query(order))
}

fn node_for(test: &str, query: &Query) -> Option<Node> {
    match Node::open(query, 4) {
        Ok(n) => Some(n),
        Err(e @ FabricError::NoProvider { .. }) => {
            skip(test, &e.to_string());
            None
        }
        Err(e) => panic!("{test}: opening {}: {e}", provider()),
    }
}

/// Nodes `ranks.len()`, each knowing every other by rank; `peer[i][j]`
/// is how node i addresses node j.
fn mesh(test: &str, n: usize, order: Option<NotifyOrder>) -> Option<(Vec<Node>, Vec<Vec<Peer>>)> {
    mesh_for(test, n, &query(order))
}

fn mesh_for(test: &str, n: usize, query: &Query) -> Option<(Vec<Node>, Vec<Vec<Peer>>)> {
    let nodes: Vec<Node> = (0..n)
        .map(|_| node_for(test, query))
        .collect::<Option<_>>()?;
    let addrs: Vec<Vec<u8>> = nodes
        .iter()
        .map(|n| n.endpoint.address().expect("fi_getname"))
        .collect();
    let peers = nodes
        .iter()
        .map(|node| {
            addrs
                .iter()
                .enumerate()
                .map(|(r, a)| node.peers.insert(a, r as u32).expect("fi_av_insert"))
                .collect()
        })
        .collect();
    Some((nodes, peers))
}

/// Polls `ep` until `done` holds, failing on an error event or after
/// [`PATIENCE`]; returns the ids of the operations that completed.
fn poll_until(ep: &Endpoint, what: &str, mut done: impl FnMut(&[Token]) -> bool) -> Vec<Token> {
    let start = Instant::now();
    let mut completed = Vec::new();
    let mut events = Vec::new();
    loop {
        events.clear();
        ep.poll(&mut events).expect("poll");
        for e in &events {
            match e {
                Event::Done(t) => completed.push(*t),
                Event::Failed(t, err) => panic!("{what}: operation {t:?} failed: {err}"),
                Event::Remote(d) => panic!("{what}: unexpected remote data {d:#x}"),
            }
        }
        if done(&completed) {
            return completed;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "{what}: no completion within {PATIENCE:?}"
        );
        std::hint::spin_loop();
    }
}

/// A thread that keeps reading `ep`'s completion queue (under manual
/// progress the target applies incoming writes only then), sleeping on
/// its wait descriptor, until dropped.
struct Progress {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    fn start(ep: &Arc<Endpoint>) -> Progress {
        let stop = Arc::new(AtomicBool::new(false));
        let (ep, flag) = (ep.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut events = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                events.clear();
                ep.poll(&mut events).expect("target poll");
                for e in &events {
                    if let Event::Failed(t, err) = e {
                        panic!("target: operation {t:?} failed: {err}");
                    }
                }
                ep.completion_queue().wait(Duration::from_millis(5));
            }
        });
        Progress {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let r = t.join();
            if !std::thread::panicking() {
                r.expect("progress thread");
            }
        }
    }
}

fn pattern(round: u64, i: usize) -> u8 {
    (i as u64)
        .wrapping_mul(31)
        .wrapping_add(round.wrapping_mul(7) + 1) as u8
}

/// A provider named that does not exist gets an error naming it and the
/// ones that are offered.
#[test]
fn unknown_provider_is_named_with_the_offered_ones() {
    let q = Query {
        provider: Some("no-such-provider".into()),
        ..Query::default()
    };
    match Info::query(&q) {
        Err(FabricError::NoProvider { wanted, reason }) => {
            assert!(wanted.contains("no-such-provider"), "{wanted}");
            if !reason.contains(&provider()) {
                skip(
                    "unknown_provider_is_named_with_the_offered_ones",
                    &format!("{} not offered here ({reason})", provider()),
                );
            }
        }
        other => panic!("expected NoProvider, got {other:?}"),
    }
}

/// What the provider reports is what the layer relies on: `tcp;ofi_rxm`
/// orders RMA writes (so notifications need no fence) and moves data
/// only while the completion queue is read.
#[test]
fn tcp_rxm_orders_writes_and_progresses_manually() {
    let test = "tcp_rxm_orders_writes_and_progresses_manually";
    let Some(n) = node(test, None) else { return };
    let a = n.endpoint.attributes();
    println!("{test}: {a:?}");
    if a.provider != "tcp;ofi_rxm" {
        skip(test, &format!("the provider is {}: {a:?}", a.provider));
        return;
    }
    assert_eq!(a.order, NotifyOrder::InOrder, "{a:?}");
    assert!(a.manual_progress, "{a:?}");
    assert!(a.inject_size >= 4, "{a:?}");
    assert!(a.max_write >= 1 << 30, "{a:?}");
}

/// Writes of several sizes land intact at their offsets, and the sizes
/// and offsets the target's registration cannot hold are refused before
/// anything is posted.
#[test]
fn writes_land_intact() {
    let test = "writes_land_intact";
    let Some((nodes, peers)) = mesh(test, 2, None) else {
        return;
    };
    let (a, b) = (&nodes[0].endpoint, &nodes[1].endpoint);
    const LEN: usize = 4 << 20;
    let src = LocalMemory::new(LEN).unwrap();
    let dst = LocalMemory::new(LEN).unwrap();
    let src_mr = MemoryRegion::register(a, &src, Access::LOCAL).unwrap();
    let dst_mr = MemoryRegion::register(b, &dst, Access::ALL).unwrap();
    let remote = RemoteMemory::from_bytes(&dst_mr.remote().to_bytes());
    let bytes: Vec<u8> = (0..LEN).map(|i| pattern(3, i)).collect();
    src.write(0, &bytes).unwrap();
    let _target = Progress::start(b);

    let pieces = [
        (0usize, 1usize),
        (1, 7),
        (8, 4096),
        (4104, 65_533),
        (69_637, 1 << 20),
        (1_118_213, LEN - 1_118_213),
    ];
    for (i, &(off, len)) in pieces.iter().enumerate() {
        a.write(
            peers[0][1],
            src_mr.slice(off, len).unwrap(),
            &remote,
            off as u64,
            i as u32,
        )
        .unwrap();
    }
    poll_until(a, "writes", |done| done.len() == pieces.len());
    // Local completion says the source may be reused; the bytes reach the
    // target's memory when its progress thread applies them.
    let start = Instant::now();
    let mut got = vec![0u8; LEN];
    loop {
        dst.read(0, &mut got).unwrap();
        if got == bytes {
            break;
        }
        assert!(start.elapsed() < PATIENCE, "the writes did not land intact");
        std::thread::sleep(Duration::from_millis(1));
    }

    // Bad input: refused, nothing posted.
    let err = a
        .write(
            peers[0][1],
            src_mr.slice(0, 16).unwrap(),
            &remote,
            (LEN - 8) as u64,
            99,
        )
        .unwrap_err();
    assert!(matches!(err, FabricError::Invalid(_)), "{err}");
    assert!(src_mr.slice(LEN - 8, 16).is_err());
    let mut events = Vec::new();
    std::thread::sleep(Duration::from_millis(20));
    a.poll(&mut events).unwrap();
    assert!(events.is_empty(), "a refused write completed: {events:?}");
}

/// Many rounds of data then its notification word, of sizes from 8 B to
/// 4 MiB: the target never sees the word before the data. The target
/// acknowledges each round with a word of its own, so the next round's
/// data does not change the bytes it is checking. Run with every ordering
/// mechanism the provider offers.
///
/// With `by_data`, the notification rides on the data's write as remote
/// CQ data ([`Endpoint::write_with_data`]) and the target sets the word
/// when its poll returns the event.
fn notification_never_overtakes_data(test: &str, order: NotifyOrder, by_data: bool) {
    let Some((nodes, peers)) = mesh(test, 2, Some(order)) else {
        return;
    };
    let (a, b) = (nodes[0].endpoint.clone(), nodes[1].endpoint.clone());
    assert_eq!(a.attributes().order, order);
    if by_data && a.attributes().cq_data_bytes < 4 {
        skip(
            test,
            &format!("{} offers no 4-byte remote CQ data", provider()),
        );
        return;
    }
    const LEN: usize = 4 << 20;
    const ROUNDS: u64 = 240;
    let sizes = [
        8usize,
        4096,
        65_536 + 3,
        1 << 20,
        LEN,
        100,
        300_000,
        2 << 20,
    ];

    let src = LocalMemory::new(LEN).unwrap();
    let src_mr = MemoryRegion::register(&a, &src, Access::LOCAL).unwrap();
    let ack = LocalMemory::new(4096).unwrap();
    let ack_mr = MemoryRegion::register(&a, &ack, Access::ALL).unwrap();
    let ack_remote = ack_mr.remote();
    let (to_b, to_a) = (peers[0][1], peers[1][0]);

    // The target: its data and words registered, its checks in a thread.
    let dst = Arc::new(LocalMemory::new(LEN).unwrap());
    let words = Arc::new(LocalMemory::new(4096).unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    let target = {
        let (b, dst, words) = (b.clone(), dst.clone(), words.clone());
        std::thread::spawn(move || -> std::result::Result<(), String> {
            let dst_mr = MemoryRegion::register(&b, &dst, Access::ALL).unwrap();
            let words_mr = MemoryRegion::register(&b, &words, Access::ALL).unwrap();
            tx.send((dst_mr.remote(), words_mr.remote())).unwrap();
            let word = words.u32_at(64).unwrap();
            let mut got = vec![0u8; LEN];
            let mut events = Vec::new();
            let mut acked = 0;
            for round in 0..ROUNDS {
                let len = sizes[round as usize % sizes.len()];
                let start = Instant::now();
                // Spin on the word, reading the queue meanwhile (manual
                // progress: that is what applies the incoming writes).
                while word.load(Ordering::Acquire) != round as u32 + 1 {
                    events.clear();
                    b.poll(&mut events).map_err(|e| e.to_string())?;
                    for e in &events {
                        match e {
                            // The runtime's part: set the word it names.
                            Event::Remote(d) => word.store(*d as u32, Ordering::Release),
                            Event::Done(_) => acked += 1,
                            Event::Failed(t, err) => return Err(format!("{t:?}: {err}")),
                        }
                    }
                    if start.elapsed() > PATIENCE {
                        return Err(format!("round {round}: no notification"));
                    }
                }
                dst.read(0, &mut got[..len]).unwrap();
                if let Some(i) = (0..len).find(|&i| got[i] != pattern(round, i)) {
                    return Err(format!(
                        "round {round} ({len} B): the notification was seen before byte {i} of \
                         its data ({:#x}, expected {:#x})",
                        got[i],
                        pattern(round, i)
                    ));
                }
                b.notify(to_a, &ack_remote, 0, round as u32 + 1, round as u32)
                    .map_err(|e| e.to_string())?;
            }
            // Let the last acknowledgement leave.
            let start = Instant::now();
            while acked < ROUNDS && start.elapsed() < PATIENCE {
                events.clear();
                b.poll(&mut events).map_err(|e| e.to_string())?;
                acked += events
                    .iter()
                    .filter(|e| matches!(e, Event::Done(_)))
                    .count() as u64;
            }
            drop((dst_mr, words_mr));
            Ok(())
        })
    };
    let (dst_remote, words_remote) = rx.recv().unwrap();
    let ack_word = ack.u32_at(0).unwrap();
    let mut finished: Option<Instant> = None;
    let mut bytes = vec![0u8; LEN];
    let mut events = Vec::new();
    for round in 0..ROUNDS {
        let len = sizes[round as usize % sizes.len()];
        for (i, b) in bytes[..len].iter_mut().enumerate() {
            *b = pattern(round, i);
        }
        src.write(0, &bytes[..len]).unwrap();
        let src_slice = src_mr.slice(0, len).unwrap();
        let requests = if by_data {
            let data = round + 1;
            a.write_with_data(to_b, src_slice, &dst_remote, 0, data, round as u32)
                .unwrap();
            1
        } else {
            a.write(to_b, src_slice, &dst_remote, 0, 2 * round as u32)
                .unwrap();
            a.notify(
                to_b,
                &words_remote,
                64,
                round as u32 + 1,
                2 * round as u32 + 1,
            )
            .unwrap();
            2
        };
        let start = Instant::now();
        let mut completed = 0;
        // Both requests complete (the source is free again) and the target
        // has checked the round.
        while completed < requests || ack_word.load(Ordering::Acquire) != round as u32 + 1 {
            events.clear();
            a.poll(&mut events).unwrap();
            for e in &events {
                match e {
                    Event::Done(_) => completed += 1,
                    Event::Failed(t, err) => panic!("{test}: {t:?} failed: {err}"),
                    Event::Remote(d) => panic!("{test}: unexpected remote data {d:#x}"),
                }
            }
            // A target that stopped (it failed, or it sent its last
            // acknowledgement) gets a moment for that to arrive.
            if target.is_finished() {
                let since = *finished.get_or_insert_with(Instant::now);
                if since.elapsed() > Duration::from_secs(5) {
                    break;
                }
            }
            if start.elapsed() > PATIENCE {
                break;
            }
        }
        if finished.is_some() {
            break;
        }
    }
    target
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("{test} ({}): {e}", order.name()));
    assert_eq!(ack_word.load(Ordering::Acquire), ROUNDS as u32);
}

#[test]
fn notification_never_overtakes_data_in_order() {
    notification_never_overtakes_data(
        "notification_never_overtakes_data_in_order",
        NotifyOrder::InOrder,
        false,
    );
}

#[test]
fn notification_as_remote_cq_data_never_overtakes_data() {
    notification_never_overtakes_data(
        "notification_as_remote_cq_data_never_overtakes_data",
        NotifyOrder::InOrder,
        true,
    );
}

#[test]
fn notification_never_overtakes_data_delivery_complete() {
    notification_never_overtakes_data(
        "notification_never_overtakes_data_delivery_complete",
        NotifyOrder::DeliveryComplete,
        false,
    );
}

#[test]
fn notification_never_overtakes_data_fence() {
    notification_never_overtakes_data(
        "notification_never_overtakes_data_fence",
        NotifyOrder::Fence,
        false,
    );
}

/// Reads of several sizes bring the target's bytes back intact.
#[test]
fn reads_bring_back_the_bytes() {
    let test = "reads_bring_back_the_bytes";
    let Some((nodes, peers)) = mesh(test, 2, None) else {
        return;
    };
    let (a, b) = (&nodes[0].endpoint, &nodes[1].endpoint);
    const LEN: usize = 2 << 20;
    let remote_mem = LocalMemory::new(LEN).unwrap();
    let bytes: Vec<u8> = (0..LEN).map(|i| pattern(11, i)).collect();
    remote_mem.write(0, &bytes).unwrap();
    let remote_mr = MemoryRegion::register(b, &remote_mem, Access::ALL).unwrap();
    let local = LocalMemory::new(LEN).unwrap();
    let local_mr = MemoryRegion::register(a, &local, Access::LOCAL).unwrap();
    let _target = Progress::start(b);
    let pieces = [
        (0usize, 8usize),
        (8, 4088),
        (4096, 1 << 20),
        ((1 << 20) + 4096, (1 << 20) - 4096),
    ];
    for (i, &(off, len)) in pieces.iter().enumerate() {
        a.read(
            peers[0][1],
            local_mr.slice(off, len).unwrap(),
            &remote_mr.remote(),
            off as u64,
            i as u32,
        )
        .unwrap();
    }
    poll_until(a, "reads", |done| done.len() == pieces.len());
    let mut got = vec![0u8; LEN];
    local.read(0, &mut got).unwrap();
    assert!(
        got == bytes,
        "the reads did not bring the bytes back intact"
    );
}

/// Two initiators add to one counter and take turns through
/// compare-and-swap, concurrently: every fetched value is distinct, none
/// is lost, and the counters end at the sum.
#[test]
fn atomics_are_atomic_under_concurrent_initiators() {
    let test = "atomics_are_atomic_under_concurrent_initiators";
    let q = Query {
        atomics: true,
        ..query(None)
    };
    let Some((nodes, peers)) = mesh_for(test, 3, &q) else {
        return;
    };
    if !nodes[0].endpoint.has_atomics() {
        skip(
            test,
            &format!("{} offers no u64 fetch-add / compare-swap here", provider()),
        );
        return;
    }
    let target_ep = nodes[2].endpoint.clone();
    let target = LocalMemory::new(4096).unwrap();
    let target_mr = MemoryRegion::register(&target_ep, &target, Access::ALL).unwrap();
    let remote = target_mr.remote();
    let _progress = Progress::start(&target_ep);
    const ADDS: u64 = 400;
    const SWAPS: u64 = 150;
    let results: Vec<(Vec<u64>, Vec<u64>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|i| {
                let ep = nodes[i].endpoint.clone();
                let peer = peers[i][2];
                s.spawn(move || {
                    let scratch = LocalMemory::new(4096).unwrap();
                    let mr = MemoryRegion::register(&ep, &scratch, Access::LOCAL).unwrap();
                    let result = scratch.u64_at(16).unwrap();
                    let mut fetched = Vec::new();
                    for n in 0..ADDS {
                        ep.fetch_add(peer, &remote, 0, 1, mr.slice(0, 24).unwrap(), n as u32)
                            .unwrap();
                        poll_until(&ep, "fetch_add", |d| !d.is_empty());
                        fetched.push(result.load(Ordering::Acquire));
                    }
                    // Compare-and-swap: take the next ticket at offset 8.
                    let mut won = Vec::new();
                    let mut seen = 0u64;
                    while (won.len() as u64) < SWAPS {
                        ep.compare_swap(
                            peer,
                            &remote,
                            8,
                            seen,
                            seen + 1,
                            mr.slice(0, 24).unwrap(),
                            0,
                        )
                        .unwrap();
                        poll_until(&ep, "compare_swap", |d| !d.is_empty());
                        let old = result.load(Ordering::Acquire);
                        if old == seen {
                            won.push(seen);
                            seen += 1;
                        } else {
                            seen = old;
                        }
                    }
                    drop(mr);
                    (fetched, won)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut fetched: Vec<u64> = results.iter().flat_map(|r| r.0.iter().copied()).collect();
    fetched.sort_unstable();
    assert_eq!(
        fetched,
        (0..2 * ADDS).collect::<Vec<_>>(),
        "fetch-add lost or repeated a value"
    );
    let mut won: Vec<u64> = results.iter().flat_map(|r| r.1.iter().copied()).collect();
    won.sort_unstable();
    assert_eq!(
        won,
        (0..2 * SWAPS).collect::<Vec<_>>(),
        "compare-swap granted a ticket twice"
    );
    assert_eq!(target.u64_at(0).unwrap().load(Ordering::Acquire), 2 * ADDS);
    assert_eq!(target.u64_at(8).unwrap().load(Ordering::Acquire), 2 * SWAPS);
}

/// Environment variable that makes `helper_child_endpoint` run.
const CHILD_VAR: &str = "GASPI_LIBFABRIC_TEST_CHILD";

/// The other process of `a_dead_peer_is_named`: opens an endpoint,
/// registers 1 MiB, prints its address and key, and reads its queue until
/// killed.
#[test]
#[ignore = "the child process of a_dead_peer_is_named"]
fn helper_child_endpoint() {
    if std::env::var_os(CHILD_VAR).is_none() {
        return;
    }
    let n = Node::open(&query(None), 2).expect("child: open");
    let mem = LocalMemory::new(1 << 20).unwrap();
    let mr = MemoryRegion::register(&n.endpoint, &mem, Access::ALL).unwrap();
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let line = format!(
        "CHILD {} {}\n",
        hex(&n.endpoint.address().unwrap()),
        hex(&mr.remote().to_bytes())
    );
    // Straight to file descriptor 1: the test harness captures `print!`.
    // SAFETY: writes a valid buffer to the process's standard output.
    let written = unsafe { libc::write(1, line.as_ptr().cast(), line.len()) };
    assert_eq!(written, line.len() as isize);
    // Until killed; a parent that died without killing it leaves it
    // running no longer than this.
    let start = Instant::now();
    let mut events = Vec::new();
    while start.elapsed() < 2 * PATIENCE {
        events.clear();
        let _ = n.endpoint.poll(&mut events);
        n.endpoint
            .completion_queue()
            .wait(Duration::from_millis(10));
    }
}

/// Kills and reaps the child process however the test ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// When the process at the other end dies, writes to it fail (an error
/// completion, or an error posting) naming its rank, within the test's
/// patience; nothing hangs.
#[test]
fn a_dead_peer_is_named() {
    let test = "a_dead_peer_is_named";
    let Some(me) = node(test, Some(NotifyOrder::InOrder)) else {
        return;
    };
    let mut child = KillOnDrop(
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "transport::libfabric::tests::helper_child_endpoint",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_VAR, "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    let out = BufReader::new(child.0.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in out.lines().map_while(|l| l.ok()) {
            // The harness may have put "test ... " before it on the line.
            if let Some(at) = line.find("CHILD ") {
                if tx.send(line[at..].to_string()).is_err() {
                    break;
                }
            }
        }
    });
    let Ok(line) = rx.recv_timeout(PATIENCE) else {
        drop(child);
        panic!("{test}: the child process printed no address within {PATIENCE:?}");
    };
    let unhex = |s: &str| {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect::<Vec<u8>>()
    };
    let fields: Vec<&str> = line.split_whitespace().collect();
    let child_addr = unhex(fields[1]);
    let remote = RemoteMemory::from_bytes(&unhex(fields[2]).try_into().unwrap());
    const RANK: u32 = 7;
    let peer = me.peers.insert(&child_addr, RANK).unwrap();
    let src = LocalMemory::new(64 << 10).unwrap();
    let mr = MemoryRegion::register(&me.endpoint, &src, Access::LOCAL).unwrap();
    // It works while the child lives.
    me.endpoint
        .write(peer, mr.slice(0, 64 << 10).unwrap(), &remote, 0, 1)
        .unwrap();
    poll_until(&me.endpoint, "a write to the live child", |d| !d.is_empty());

    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let start = Instant::now();
    let mut events = Vec::new();
    let mut id = 2;
    let error = 'found: loop {
        assert!(
            start.elapsed() < PATIENCE,
            "{test}: no error within {PATIENCE:?} of writing to a dead peer"
        );
        match me
            .endpoint
            .write(peer, mr.slice(0, 64 << 10).unwrap(), &remote, 0, id)
        {
            Ok(()) => id += 1,
            Err(e) => break 'found e,
        }
        events.clear();
        me.endpoint.poll(&mut events).unwrap();
        for e in events.drain(..) {
            if let Event::Failed(token, err) = e {
                assert_eq!(token.peer, RANK);
                break 'found err;
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let text = error.to_string();
    assert!(
        matches!(error, FabricError::Peer { peer: RANK, .. }),
        "{text}"
    );
    assert!(text.contains(&format!("rank {RANK}")), "{text}");
    println!("{test}: {text}");
}
