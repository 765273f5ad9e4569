//! `gaspi-fabric-bench`: the libfabric RMA layer's own figures (cargo
//! feature `libfabric`), measured before the layer is plugged into the
//! runtime's transport seam (issue 27), so that the goals can be
//! checked against the provider's own `fi_pingpong` once it is.
//!
//! Two processes, started by hand or by `bench/fabric-netns.sh` in two
//! network namespaces: `--listen IP:PORT` (the target) and `--connect
//! IP:PORT` (the one that measures). A TCP connection carries the
//! endpoint addresses and remote keys; then, over libfabric only:
//!
//! - `pingpong`: write `size` bytes + notification word, the peer spins on
//!   the word (reading its completion queue: manual progress), answers the
//!   same way; half round trip = time / (2 * iterations). Sizes 8 B and
//!   4 MiB by default, for the comparison with `fi_pingpong` (a
//!   send/receive ping-pong: see the script for what that measures).
//! - `bw`: `window` writes of `bw-size` in flight, `bw-iters` writes, then a
//!   notification the target acknowledges; bytes / time.
//!
//! The layer's sources are compiled into this program (`#[path]`) because
//! the runtime keeps its transports private; once the transport is in the
//! seam, `gaspi-bench pingpong` over it measures the same through the
//! public API and this program can go.

#[path = "../../runtime/src/transport/libfabric/mod.rs"]
mod libfabric;

use clap::Parser;
use libfabric::{
    Access, Endpoint, Event, LocalMemory, MemoryRegion, Node, NotifyOrder, Peer, Query,
    RemoteMemory,
};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(
    name = "gaspi-fabric-bench",
    about = "Raw libfabric RMA layer: write+notify ping-pong and write bandwidth between two processes"
)]
struct Args {
    /// Be the target: wait for the measuring side on this IP:PORT.
    #[arg(long, conflicts_with = "connect")]
    listen: Option<String>,
    /// Be the measuring side: connect to the target's IP:PORT.
    #[arg(long)]
    connect: Option<String>,
    /// Provider (default: GASPI_NET_PROVIDER, else the best offered).
    #[arg(long)]
    provider: Option<String>,
    /// Address to bind the endpoint to (FI_SOURCE; the namespace's IP).
    #[arg(long)]
    source: Option<String>,
    /// Force the notification ordering: in-order, fence, delivery-complete.
    #[arg(long)]
    order: Option<String>,
    /// How the ping-pong's notification travels: `word` (a second RMA
    /// write of the 4-byte word) or `data` (remote CQ data on the data's
    /// write, the target setting the word when it reads the event).
    #[arg(long, default_value = "word")]
    notify: String,
    /// Ping-pong sizes in bytes (0: the notification word alone).
    #[arg(long, value_delimiter = ',', default_value = "8,4194304")]
    sizes: Vec<usize>,
    /// Ping-pong iterations per repetition at 8 B (scaled down for large sizes).
    #[arg(long, default_value_t = 10_000)]
    iters: u64,
    /// Repetitions of each measurement.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Bandwidth: bytes per write.
    #[arg(long, default_value_t = 4 << 20)]
    bw_size: usize,
    /// Bandwidth: writes per repetition (0: no bandwidth run).
    #[arg(long, default_value_t = 200)]
    bw_iters: u64,
    /// Bandwidth: writes in flight.
    #[arg(long, default_value_t = 8)]
    window: usize,
}

/// What each side tells the other over the TCP connection.
struct Hello {
    address: Vec<u8>,
    data: RemoteMemory,
    words: RemoteMemory,
}

fn send_hello(s: &mut TcpStream, h: &Hello) -> std::io::Result<()> {
    s.write_all(&(h.address.len() as u32).to_le_bytes())?;
    s.write_all(&h.address)?;
    s.write_all(&h.data.to_bytes())?;
    s.write_all(&h.words.to_bytes())
}

fn recv_hello(s: &mut TcpStream) -> std::io::Result<Hello> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let mut address = vec![0u8; u32::from_le_bytes(len) as usize];
    s.read_exact(&mut address)?;
    let mut key = [0u8; 24];
    s.read_exact(&mut key)?;
    let data = RemoteMemory::from_bytes(&key);
    s.read_exact(&mut key)?;
    Ok(Hello {
        address,
        data,
        words: RemoteMemory::from_bytes(&key),
    })
}

/// Waits on the TCP connection for the other side (between measurements).
fn sync(s: &mut TcpStream) -> std::io::Result<()> {
    s.write_all(&[1])?;
    let mut b = [0u8; 1];
    s.read_exact(&mut b)
}

/// One side's state for the measurements.
struct Side<'m> {
    ep: std::sync::Arc<Endpoint>,
    peer: Peer,
    remote: Hello,
    buf: &'m LocalMemory,
    buf_mr: MemoryRegion<'m>,
    words: &'m LocalMemory,
    max: usize,
    by_data: bool,
    events: Vec<Event>,
    /// Operations posted and completed: under manual progress a side
    /// must keep reading its queue until its own last operations are
    /// done before it blocks anywhere else (the TCP sync).
    posted: u64,
    completed: u64,
}

impl Side<'_> {
    /// Reads completions, counting them; an error ends the program.
    fn poll(&mut self) {
        self.events.clear();
        self.ep.poll(&mut self.events).expect("poll");
        for e in &self.events {
            match e {
                Event::Done(_) => self.completed += 1,
                Event::Failed(t, err) => panic!("operation {t:?} failed: {err}"),
                // Remote CQ data: (word index << 32) | value.
                Event::Remote(d) => self
                    .words
                    .u32_at(4 * (d >> 32) as usize)
                    .expect("word")
                    .store(*d as u32, Ordering::Release),
            }
        }
    }

    /// Reads completions until every operation posted has completed.
    fn drain(&mut self) {
        let start = Instant::now();
        while self.completed < self.posted {
            self.poll();
            if start.elapsed() > Duration::from_secs(60) {
                panic!(
                    "{} operations did not complete within 60 s",
                    self.posted - self.completed
                );
            }
        }
    }

    /// Spins (reading completions) until word `w` holds `value`.
    fn await_word(&mut self, w: usize, value: u32) {
        let word = self.words.u32_at(4 * w).expect("word");
        let start = Instant::now();
        while word.load(Ordering::Acquire) != value {
            self.poll();
            if start.elapsed() > Duration::from_secs(60) {
                panic!("no notification {value} on word {w} within 60 s");
            }
        }
    }

    /// Writes `len` bytes from our first half to the peer's second half,
    /// then notification word `w` = `value`.
    fn write_notify(&mut self, len: usize, w: usize, value: u32) {
        if self.by_data {
            let src = self.buf_mr.slice(0, len).expect("slice");
            let data = ((w as u64) << 32) | value as u64;
            self.ep
                .write_with_data(self.peer, src, &self.remote.data, self.max as u64, data, 0)
                .expect("write with data");
            self.posted += 1;
            return;
        }
        if len > 0 {
            let src = self.buf_mr.slice(0, len).expect("slice");
            self.ep
                .write(self.peer, src, &self.remote.data, self.max as u64, 0)
                .expect("write");
            self.posted += 1;
        }
        self.ep
            .notify(self.peer, &self.remote.words, 4 * w as u64, value, 1)
            .expect("notify");
        self.posted += 1;
    }
}

fn iterations(args: &Args, size: usize) -> u64 {
    // About the same bytes per repetition as 10k x 8 B for large sizes,
    // at least 50 round trips.
    if size <= 65_536 {
        args.iters
    } else {
        (args.iters * 4096 / size as u64).clamp(50, args.iters)
    }
}

fn main() {
    let args = Args::parse();
    let order = args.order.as_deref().map(|o| {
        NotifyOrder::parse(o)
            .unwrap_or_else(|| panic!("--order: in-order, fence or delivery-complete, not {o}"))
    });
    let query = Query {
        provider: args.provider.clone().or_else(|| Query::from_env().provider),
        source: args.source.clone(),
        order,
        ..Query::default()
    };
    let node = Node::open(&query, 2).unwrap_or_else(|e| {
        eprintln!("gaspi-fabric-bench: {e}");
        std::process::exit(2)
    });
    let measuring = args.connect.is_some();
    let mut tcp = match (&args.listen, &args.connect) {
        (Some(l), None) => {
            TcpListener::bind(l)
                .expect("listen")
                .accept()
                .expect("accept")
                .0
        }
        (None, Some(c)) => {
            let start = Instant::now();
            loop {
                match TcpStream::connect(c) {
                    Ok(s) => break s,
                    Err(e) if start.elapsed() < Duration::from_secs(20) => {
                        let _ = e;
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    Err(e) => panic!("connect {c}: {e}"),
                }
            }
        }
        _ => {
            eprintln!("gaspi-fabric-bench: --listen IP:PORT or --connect IP:PORT");
            std::process::exit(2)
        }
    };
    tcp.set_nodelay(true).ok();
    let max = args
        .sizes
        .iter()
        .copied()
        .chain([args.bw_size])
        .max()
        .unwrap_or(8);
    let buf = LocalMemory::new(2 * max).expect("buffer");
    let words = LocalMemory::new(4096).expect("words");
    let pattern: Vec<u8> = (0..max).map(|i| (i * 13 + 5) as u8).collect();
    buf.write(0, &pattern).expect("fill");
    let buf_mr = MemoryRegion::register(&node.endpoint, &buf, Access::ALL).expect("register");
    let words_mr = MemoryRegion::register(&node.endpoint, &words, Access::ALL).expect("register");
    let mine = Hello {
        address: node.endpoint.address().expect("fi_getname"),
        data: buf_mr.remote(),
        words: words_mr.remote(),
    };
    send_hello(&mut tcp, &mine).expect("send hello");
    let remote = recv_hello(&mut tcp).expect("receive hello");
    let peer = node
        .peers
        .insert(&remote.address, if measuring { 1 } else { 0 })
        .expect("fi_av_insert");
    let attrs = node.endpoint.attributes().clone();
    let mut side = Side {
        ep: node.endpoint.clone(),
        peer,
        remote,
        buf: &buf,
        buf_mr,
        words: &words,
        max,
        by_data: match args.notify.as_str() {
            "word" => false,
            "data" => true,
            other => panic!("--notify: word or data, not {other}"),
        },
        events: Vec::new(),
        posted: 0,
        completed: 0,
    };
    let _ = side.buf;

    // Ping-pong: word 0 carries a counter that never repeats.
    let mut counter = 0u32;
    for &size in &args.sizes {
        let iters = iterations(&args, size);
        let warmup = (iters / 10).max(10);
        for rep in 0..args.reps {
            side.drain();
            sync(&mut tcp).expect("sync");
            let mut start = Instant::now();
            for i in 0..warmup + iters {
                if i == warmup {
                    start = Instant::now();
                }
                counter += 1;
                if measuring {
                    side.write_notify(size, 0, counter);
                    side.await_word(0, counter);
                } else {
                    side.await_word(0, counter);
                    side.write_notify(size, 0, counter);
                }
            }
            let elapsed = start.elapsed();
            if measuring {
                let half_us = elapsed.as_secs_f64() * 1e6 / (2 * iters) as f64;
                println!(
                    "{{\"bench\":\"fabric-pingpong\",\"provider\":\"{}\",\"order\":\"{}\",\"notify\":\"{}\",\"size\":{size},\"rep\":{rep},\"iters\":{iters},\"half_rtt_us\":{half_us:.3},\"mb_per_s\":{:.1}}}",
                    attrs.provider,
                    attrs.order.name(),
                    args.notify,
                    size as f64 / half_us
                );
            }
        }
    }

    // Bandwidth: word 1 = the measuring side's "all posted", word 2 = the
    // target's acknowledgement.
    for rep in 0..args.reps {
        if args.bw_iters == 0 {
            break;
        }
        side.drain();
        sync(&mut tcp).expect("sync");
        let round = rep as u32 + 1;
        if measuring {
            let start = Instant::now();
            let base = side.completed;
            let mut posted = 0u64;
            while posted < args.bw_iters {
                while posted - (side.completed - base) >= args.window as u64 {
                    side.poll();
                }
                let src = side.buf_mr.slice(0, args.bw_size).expect("slice");
                side.ep
                    .write(side.peer, src, &side.remote.data, max as u64, 0)
                    .expect("write");
                posted += 1;
                side.posted += 1;
            }
            side.ep
                .notify(side.peer, &side.remote.words, 4, round, 1)
                .expect("notify");
            side.posted += 1;
            side.await_word(2, round);
            let elapsed = start.elapsed().as_secs_f64();
            let bytes = args.bw_iters as f64 * args.bw_size as f64;
            println!(
                "{{\"bench\":\"fabric-bw\",\"provider\":\"{}\",\"order\":\"{}\",\"size\":{},\"rep\":{rep},\"writes\":{},\"window\":{},\"mb_per_s\":{:.1}}}",
                attrs.provider,
                attrs.order.name(),
                args.bw_size,
                args.bw_iters,
                args.window,
                bytes / elapsed / 1e6
            );
        } else {
            side.await_word(1, round);
            side.ep
                .notify(side.peer, &side.remote.words, 8, round, 1)
                .expect("notify");
            side.posted += 1;
        }
    }
    // Let the last operations complete before closing.
    side.drain();
    sync(&mut tcp).expect("sync");
    let until = Instant::now() + Duration::from_millis(200);
    while Instant::now() < until {
        side.poll();
    }
    drop(side);
    drop(words_mr);
}
