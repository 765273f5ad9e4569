//! `gaspi-bench`: one benchmark binary for the runtime.
//!
//! Every subcommand is a GASPI job: started directly it launches its own
//! ranks on this host (`--ranks`), under `gaspi-run` it uses the launcher's.
//! Rank 0 measures the physical reference of the benchmark in the same run
//! (a cache-line ping-pong between two processes, a single-thread memcpy)
//! while the other ranks wait, then all ranks run the benchmark, and rank 0
//! prints one record per point: a table, or with `--json` one JSON object
//! per line (`bench/src/report.rs`).

mod floor;
mod gpu;
mod report;

use clap::{Parser, Subcommand};
use floor::TcpSide;
use gaspi::{Config, Gaspi, Group, Memory, NotifyId, Queue, Rank, ReduceOp, SegId, Timeout};
use report::{Record, Samples};
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "gaspi-bench",
    about = "Benchmarks of the GASPI runtime, each beside its same-run reference"
)]
struct Cli {
    /// One JSON object per line instead of a table.
    #[arg(long, global = true)]
    json: bool,
    /// Fewer iterations (smoke runs).
    #[arg(long, global = true)]
    quick: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Physical references of this machine: cache-line ping-pong between two
    /// processes and single-thread memcpy bandwidth.
    Floor,
    /// write_notify + notify_waitsome + notify_reset ping-pong, half round trip, 8 B to 4 MiB
    /// (each side resets what it received after its reply; ids alternate).
    Pingpong {
        /// Sizes in bytes (default 8, 64, ..., 4 MiB).
        #[arg(long, value_delimiter = ',')]
        sizes: Vec<u64>,
    },
    /// Unidirectional write bandwidth: windows of 16 writes, then `wait`.
    WriteBw {
        /// Sizes in bytes (default 4 KiB to 4 MiB).
        #[arg(long, value_delimiter = ',')]
        sizes: Vec<u64>,
    },
    /// Reads beside writes of the same sizes, alternating in one run:
    /// bandwidth (windows of 16, then `wait`) and one request's completion
    /// time (one, then `wait`), the read's figure over the write's.
    ReadBw {
        /// Sizes in bytes (default 4 KiB to 4 MiB).
        #[arg(long, value_delimiter = ',')]
        sizes: Vec<u64>,
    },
    /// Notifications per second from one rank to another, windows of 64 ids.
    NotifyRate,
    /// Barrier latency on the group of all ranks.
    Barrier {
        /// Ranks to launch when started directly.
        #[arg(long, default_value_t = 2)]
        ranks: u32,
        /// Also the barrier polled with `Timeout::Test` in a loop until it
        /// completes (GASPI_TEST), in batches alternating with the blocking
        /// call: records `barrier` and `barrier-poll` of the same run.
        #[arg(long)]
        poll: bool,
    },
    /// Allreduce (sum) latency on the group of all ranks, 1 and 255 doubles.
    Allreduce {
        /// Ranks to launch when started directly.
        #[arg(long, default_value_t = 2)]
        ranks: u32,
        /// Also the allreduce polled with `Timeout::Test` (as for `barrier
        /// --poll`), 1 double: records `allreduce` and `allreduce-poll`.
        #[arg(long)]
        poll: bool,
    },
    /// atomic_fetch_add round trip to the other rank's segment.
    Atomic,
    /// Start-up: how long `Gaspi::init` takes on every rank (median and
    /// spread over the ranks), and the file descriptors and memory one rank
    /// holds per peer once up. `GASPI_TRANSPORT=tcp` measures the network
    /// path on one host.
    Init {
        /// Ranks to launch when started directly.
        #[arg(long, default_value_t = 8)]
        ranks: u32,
    },
    /// CPU -> persistent kernel -> CPU notification round trip (GPU).
    NotifyRtt,
    /// GPU-to-GPU write_notify ping-pong, host- and device-driven (GPU).
    GpuPingpong {
        #[arg(long, value_delimiter = ',')]
        sizes: Vec<u64>,
        /// Also run the kernel-driven ping-pong (a persistent kernel on each
        /// side sends with the device-side write_notify).
        #[arg(long)]
        device_driven: bool,
    },
    /// CPU rank -> another rank's GPU segment on this host: write bandwidth
    /// against cuMemcpyHtoD from pinned memory (GPU).
    HostGpuBw {
        /// Sizes in bytes (default 1, 4, 16 and 64 MiB).
        #[arg(long, value_delimiter = ',')]
        sizes: Vec<u64>,
    },
    /// GPU-to-GPU write bandwidth against cuMemcpyPeer (GPU).
    GpuBw {
        #[arg(long, value_delimiter = ',')]
        sizes: Vec<u64>,
        /// Also the same windows written by a kernel with the device API,
        /// the grid sharing each write (NVSHMEM's bandwidth program's shape).
        #[arg(long)]
        device_driven: bool,
    },
}

pub(crate) const SEG: SegId = SegId(0);

/// Where outgoing messages start in the segment: past the incoming ones, and
/// half a page off their alignment so that source and destination do not
/// alias modulo 4 KiB (which stalls copies on x86 through false store-to-load
/// forwarding dependences; the MPI peer's malloc'd source is off-page too).
fn send_at(max: u64) -> u64 {
    max.next_multiple_of(4096) + 2048
}
const SAMPLES: u64 = 128;

fn default_sizes(from: u64) -> Vec<u64> {
    [8u64, 64, 512, 4096, 32768, 262_144, 1 << 20, 4 << 20]
        .into_iter()
        .filter(|&s| s >= from)
        .collect()
}

/// The sizes asked for, or `default` when none were.
fn or_default(sizes: &[u64], default: Vec<u64>) -> Vec<u64> {
    if sizes.is_empty() {
        default
    } else {
        sizes.to_vec()
    }
}

/// Round trips per size: 256 MiB worth, between 128 and 16384 (as the MPI peer).
fn iters_for(size: u64, quick: bool) -> u64 {
    let i = ((256u64 << 20) / size).clamp(SAMPLES, 16384);
    if quick {
        (i / 16).max(SAMPLES)
    } else {
        i
    }
}

fn main() {
    gaspi_launch::init_logging();
    let cli = Cli::parse();
    if let Err(e) = run(&cli) {
        eprintln!("gaspi-bench: {e}");
        std::process::exit(1);
    }
}

fn run(cli: &Cli) -> Result<(), Box<dyn std::error::Error>> {
    let records = match &cli.cmd {
        Cmd::Floor => floor::floor_records(cli.quick),
        Cmd::Pingpong { sizes } => {
            let g = start(2)?;
            let sizes = or_default(sizes, default_sizes(8));
            pingpong(&g, &sizes, cli.quick)?
        }
        Cmd::WriteBw { sizes } => {
            let g = start(2)?;
            let sizes = or_default(sizes, default_sizes(4096));
            write_bw(&g, &sizes, cli.quick)?
        }
        Cmd::ReadBw { sizes } => {
            let g = start(2)?;
            let sizes = or_default(sizes, default_sizes(4096));
            read_bw(&g, &sizes, cli.quick)?
        }
        Cmd::NotifyRate => {
            let g = start(2)?;
            notify_rate(&g, cli.quick)?
        }
        Cmd::Barrier { ranks, poll: false } => {
            let g = start(*ranks)?;
            barrier(&g, cli.quick)?
        }
        Cmd::Barrier { ranks, poll: true } => {
            let g = start(*ranks)?;
            polled(&g, cli.quick, Collective::Barrier)?
        }
        Cmd::Allreduce { ranks, poll: false } => {
            let g = start(*ranks)?;
            allreduce(&g, cli.quick)?
        }
        Cmd::Allreduce { ranks, poll: true } => {
            let g = start(*ranks)?;
            polled(&g, cli.quick, Collective::Allreduce)?
        }
        Cmd::Atomic => {
            let g = start(2)?;
            atomic(&g, cli.quick)?
        }
        Cmd::Init { ranks } => init(*ranks)?,
        Cmd::NotifyRtt => match gpu::gpus("notify-rtt") {
            Err(skip) => skip,
            Ok(_) => gpu::notify_rtt(&start(2)?, cli.quick)?,
        },
        Cmd::GpuPingpong {
            sizes,
            device_driven,
        } => match gpu::two_gpus("gpu-pingpong") {
            Err(skip) => skip,
            Ok(n) => {
                let sizes = or_default(sizes, vec![8, 4096, 65536]);
                gpu::gpu_pingpong(&start(2)?, n, &sizes, *device_driven, cli.quick)?
            }
        },
        Cmd::HostGpuBw { sizes } => match gpu::gpus("host-gpu-bw") {
            Err(skip) => skip,
            Ok(_) => {
                let sizes = or_default(sizes, vec![1 << 20, 4 << 20, 16 << 20, 64 << 20]);
                gpu::host_gpu_bw(&start(2)?, &sizes, cli.quick)?
            }
        },
        Cmd::GpuBw {
            sizes,
            device_driven,
        } => match gpu::two_gpus("gpu-bw") {
            Err(skip) => skip,
            Ok(n) => {
                let sizes = or_default(
                    sizes,
                    vec![8, 4096, 65536, 1 << 20, 4 << 20, 16 << 20, 64 << 20],
                );
                gpu::gpu_bw(&start(2)?, n, &sizes, *device_driven, cli.quick)?
            }
        },
    };
    // Only rank 0 reports; the other ranks return no records.
    if !records.is_empty() {
        report::emit(&records, cli.json);
    }
    Ok(())
}

fn start(ranks: u32) -> Result<Gaspi, gaspi::Error> {
    Gaspi::init(Config::from_env()?.standalone_ranks(ranks))
}

/// The cache-line ping-pong floor, measured by rank 0 while the others wait.
fn cacheline_floor(g: &Gaspi, quick: bool) -> Result<f64, Box<dyn std::error::Error>> {
    let mut floor_us = 0.0;
    if g.rank().0 == 0 {
        floor_us = floor::cacheline_pingpong(if quick { 50 } else { 500 })?.median();
    }
    g.barrier(Group::ALL, Timeout::Block)?;
    Ok(floor_us)
}

fn memcpy_us(size: u64, quick: bool) -> f64 {
    let iters = (((64u64 << 20) / size).clamp(8, 4096) / if quick { 8 } else { 1 }).max(4);
    floor::memcpy_bandwidth(size as usize, iters).median()
}

fn pingpong(
    g: &Gaspi,
    sizes: &[u64],
    quick: bool,
) -> Result<Vec<Record>, Box<dyn std::error::Error>> {
    let me = g.rank();
    let peer = Rank(1 - me.0);
    let max = sizes.iter().copied().max().unwrap_or(8);
    // Messages arrive at [0, max) and leave from send_at: sending from the
    // bytes just received would add the cost of reading them.
    g.segment_create(
        SEG,
        send_at(max) + max,
        Memory::Host,
        Group::ALL,
        Timeout::Block,
    )?;
    let floor_us = cacheline_floor(g, quick)?;
    let mut pp = PingPong::new(me);
    let mut out = Vec::new();
    for &size in sizes {
        let copy_us = if me.0 == 0 {
            memcpy_us(size, quick)
        } else {
            0.0
        };
        let iters = iters_for(size, quick);
        let batch = iters / SAMPLES;
        let mut samples = Samples::with_capacity(SAMPLES as usize);
        g.barrier(Group::ALL, Timeout::Block)?;
        // One untimed batch to warm caches and page tables.
        for sample in 0..=SAMPLES {
            let t = Instant::now();
            for _ in 0..batch {
                pp.round(g, size, max)?;
            }
            if sample > 0 {
                samples.push(t.elapsed().as_secs_f64() * 1e6 / (2 * batch) as f64);
            }
        }
        let transport = g.transport(peer)?;
        let mut r = Record::new("pingpong", 2).with_samples(&samples);
        r.transport = Some(transport.into());
        r.size = Some(size);
        r.iters = Some(batch * SAMPLES);
        if transport == "tcp" {
            // The floor of the network path: the kernel's TCP round trip
            // with no runtime, between the same two hosts, measured now.
            g.barrier(Group::ALL, Timeout::Block)?;
            let tcp = raw_tcp_floor(g, floor::tcp_pingpong_over, size, quick)?;
            g.barrier(Group::ALL, Timeout::Block)?;
            out.push(r.with_ref_us(
                "raw-tcp-pingpong",
                if me.0 == 0 { tcp.median() } else { 0.0 },
            ));
        } else {
            // Physical limit: one cache-line hand-off plus one copy of the payload.
            out.push(r.with_ref_us("cacheline-pingpong+memcpy", floor_us + copy_us));
        }
    }
    pp.finish(g)?;
    g.barrier(Group::ALL, Timeout::Block)?;
    Ok(if me.0 == 0 { out } else { Vec::new() })
}

/// The ping-pong protocol, one round trip per [`PingPong::round`].
///
/// Each side resets the notification it received *after* its next send
/// instead of before, so the reset's cache-line upgrade and call are off
/// the critical path: the pattern a latency-bound GASPI program uses, and
/// the counterpart of the MPI peer's ever-increasing flag (which needs no
/// reset at all). That is safe because rounds alternate between two
/// notification ids per direction: the peer sends to an id again only two
/// rounds later, after it received our next message, which we send after
/// the reset. The ids lie 256 bytes apart so the two slots never share a
/// cache line (or an adjacent-line prefetch pair).
struct PingPong {
    me: Rank,
    peer: Rank,
    round: u64,
    /// A received notification not reset yet.
    unreset: Option<NotifyId>,
}

impl PingPong {
    /// Notification ids of rank 0's pings (in rank 1's segment) and of
    /// rank 1's pongs (in rank 0's), by round parity.
    const PING: [NotifyId; 2] = [NotifyId(0), NotifyId(64)];
    const PONG: [NotifyId; 2] = [NotifyId(128), NotifyId(192)];

    fn new(me: Rank) -> PingPong {
        PingPong {
            me,
            peer: Rank(1 - me.0),
            round: 0,
            unreset: None,
        }
    }

    /// One round trip of `size` bytes each way: rank 0 sends first.
    fn round(&mut self, g: &Gaspi, size: u64, max: u64) -> Result<(), gaspi::Error> {
        let k = (self.round % 2) as usize;
        self.round += 1;
        let (send, recv) = if self.me.0 == 0 {
            (Self::PING[k], Self::PONG[k])
        } else {
            (Self::PONG[k], Self::PING[k])
        };
        if self.me.0 == 0 {
            self.send(g, size, max, send)?;
            self.unreset = Some(g.notify_waitsome(SEG, recv, 1, Timeout::Block)?);
        } else {
            self.unreset = Some(g.notify_waitsome(SEG, recv, 1, Timeout::Block)?);
            self.send(g, size, max, send)?;
        }
        Ok(())
    }

    /// Posts the message, resets what we received last, completes the post.
    fn send(&mut self, g: &Gaspi, size: u64, max: u64, id: NotifyId) -> Result<(), gaspi::Error> {
        g.write_notify(SEG, send_at(max), self.peer, SEG, 0, size, id, 1, Queue(0))?;
        if let Some(got) = self.unreset.take() {
            g.notify_reset(SEG, got)?;
        }
        g.wait(Queue(0), Timeout::Block)
    }

    /// Resets the last notification received (rank 0 ends on a receive).
    fn finish(&mut self, g: &Gaspi) -> Result<(), gaspi::Error> {
        if let Some(got) = self.unreset.take() {
            g.notify_reset(SEG, got)?;
        }
        Ok(())
    }
}

/// Requests per timed window of the two-rank bandwidth runs (`write-bw`,
/// `read-bw`).
const BW_WINDOW: u64 = 16;

/// The segment of the two-rank bandwidth runs, created on both ranks:
/// the largest of `sizes` arrives at offset 0 and leaves from
/// [`send_at`]; returns that largest size.
fn bw_segment(g: &Gaspi, sizes: &[u64]) -> Result<u64, gaspi::Error> {
    let max = sizes.iter().copied().max().unwrap_or(4096);
    g.segment_create(
        SEG,
        send_at(max) + max,
        Memory::Host,
        Group::ALL,
        Timeout::Block,
    )?;
    Ok(max)
}

/// Windows timed per size in the bandwidth runs (after one untimed
/// warm-up window).
fn bw_windows(size: u64, quick: bool) -> u64 {
    (iters_for(size, quick) / BW_WINDOW).max(SAMPLES / 4)
}

/// Posts `n` requests with `post` on queue 0, then waits for them all:
/// the microseconds per request, from the first post to the wait's return.
fn timed_window(
    g: &Gaspi,
    n: u64,
    mut post: impl FnMut() -> Result<(), gaspi::Error>,
) -> Result<f64, gaspi::Error> {
    let t = Instant::now();
    for _ in 0..n {
        post()?;
    }
    g.wait(Queue(0), Timeout::Block)?;
    Ok(t.elapsed().as_secs_f64() * 1e6 / n as f64)
}

fn write_bw(
    g: &Gaspi,
    sizes: &[u64],
    quick: bool,
) -> Result<Vec<Record>, Box<dyn std::error::Error>> {
    let me = g.rank();
    let peer = Rank(1 - me.0);
    let max = bw_segment(g, sizes)?;
    let mut out = Vec::new();
    for &size in sizes {
        let copy_us = if me.0 == 0 {
            memcpy_us(size, quick)
        } else {
            0.0
        };
        let windows = bw_windows(size, quick);
        g.barrier(Group::ALL, Timeout::Block)?;
        if me.0 == 0 {
            let write = || g.write(SEG, send_at(max), peer, SEG, 0, size, Queue(0));
            let mut samples = Samples::with_capacity(windows as usize);
            for w in 0..=windows {
                let us = timed_window(g, BW_WINDOW, write)?;
                if w > 0 {
                    samples.push(us);
                }
            }
            let mut r = Record::new("write-bw", 2).with_samples(&samples);
            r.transport = Some(g.transport(peer)?.into());
            r.size = Some(size);
            r.iters = Some(windows * BW_WINDOW);
            r.gbps = Some(size as f64 / (samples.median() * 1e3));
            if r.transport.as_deref() == Some("tcp") {
                out.push(r); // its floor follows, with the peer
            } else {
                let ref_gbps = size as f64 / (copy_us * 1e3);
                r.ref_name = Some("memcpy".into());
                r.ref_gbps = Some(ref_gbps);
                r.ref_us = Some(copy_us);
                r.ratio = r.gbps.map(|b| b / ref_gbps);
                out.push(r);
            }
        }
        g.barrier(Group::ALL, Timeout::Block)?;
        if g.transport(peer)? == "tcp" {
            // The floor of the network path: a raw TCP stream of the same
            // writes between the same two hosts, measured now.
            let raw = raw_tcp_floor(g, floor::tcp_stream_over, size, quick)?;
            if let Some(r) = out.pop() {
                out.push(r.with_ref_gbps("raw-tcp-stream", raw.median()));
            }
            g.barrier(Group::ALL, Timeout::Block)?;
        }
    }
    Ok(out)
}

/// `read-bw`: rank 0 reads from and writes to rank 1's segment, the same
/// sizes alternating window by window, so that both see the same machine;
/// per size two records, `read-bw` (windows of 16) and `read-one` (one
/// request, then `wait`), each with the write's figure of the same run as
/// its reference (`ratio`: read time over write time, or read bandwidth
/// over write bandwidth).
fn read_bw(
    g: &Gaspi,
    sizes: &[u64],
    quick: bool,
) -> Result<Vec<Record>, Box<dyn std::error::Error>> {
    let me = g.rank();
    let peer = Rank(1 - me.0);
    let max = bw_segment(g, sizes)?;
    let mut out = Vec::new();
    for &size in sizes {
        let windows = bw_windows(size, quick);
        g.barrier(Group::ALL, Timeout::Block)?;
        if me.0 == 0 {
            let write = || g.write(SEG, send_at(max), peer, SEG, 0, size, Queue(0));
            let read = || g.read(SEG, send_at(max), peer, SEG, 0, size, Queue(0));
            let (mut wbw, mut rbw) = (Samples::default(), Samples::default());
            let (mut w1, mut r1) = (Samples::default(), Samples::default());
            for w in 0..=windows {
                let tw = timed_window(g, BW_WINDOW, write)?;
                let tr = timed_window(g, BW_WINDOW, read)?;
                let ow = timed_window(g, 1, write)?;
                let or = timed_window(g, 1, read)?;
                if w > 0 {
                    wbw.push(tw);
                    rbw.push(tr);
                    w1.push(ow);
                    r1.push(or);
                }
            }
            let transport = g.transport(peer)?;
            let mut r = Record::new("read-bw", 2).with_samples(&rbw);
            r.transport = Some(transport.into());
            r.size = Some(size);
            r.iters = Some(windows * BW_WINDOW);
            r.gbps = Some(size as f64 / (rbw.median() * 1e3));
            r.ref_name = Some("write-bw, same run".into());
            r.ref_gbps = Some(size as f64 / (wbw.median() * 1e3));
            r.ref_us = Some(wbw.median());
            r.ratio = Some(rbw.median() / wbw.median());
            r.note = Some("ratio: read time over write time per request, windows of 16".into());
            out.push(r);
            let mut r = Record::new("read-one", 2).with_samples(&r1);
            r.transport = Some(transport.into());
            r.size = Some(size);
            r.iters = Some(windows);
            r.ref_name = Some("write + wait, same run".into());
            r.ref_us = Some(w1.median());
            r.ratio = Some(r1.median() / w1.median());
            r.note = Some("one request, then wait".into());
            out.push(r);
        }
        g.barrier(Group::ALL, Timeout::Block)?;
    }
    Ok(out)
}

/// One of the raw TCP floors (`floor::tcp_*_over`) for `size`-byte
/// messages between rank 0 (which measures) and rank 1, on a connection
/// of [`raw_tcp_link`]: rank 0 gets the samples, rank 1 none.
fn raw_tcp_floor(
    g: &Gaspi,
    floor: fn(std::net::TcpStream, TcpSide, usize, u64) -> std::io::Result<Samples>,
    size: u64,
    quick: bool,
) -> Result<Samples, Box<dyn std::error::Error>> {
    let side = if g.rank().0 == 0 {
        TcpSide::Lead
    } else {
        TcpSide::Echo
    };
    let link = raw_tcp_link(g)?;
    Ok(floor(
        link,
        side,
        size as usize,
        if quick { 16 } else { 64 },
    )?)
}

/// Rank 0's and rank 1's ends of a plain TCP connection between their
/// hosts, the path their TCP transport takes, for the same-run floors:
/// rank 1 listens on every address of its host and sends them, with the
/// port, to rank 0 (a passive message); rank 0 connects to the first that
/// answers.
fn raw_tcp_link(g: &Gaspi) -> Result<std::net::TcpStream, Box<dyn std::error::Error>> {
    const AT: u64 = 0; // scratch: the benchmarks' receive area, idle now
    let me = g.rank();
    if me.0 == 1 {
        let listener = std::net::TcpListener::bind("0.0.0.0:0")?;
        let port = listener.local_addr()?.port();
        let mut addrs: Vec<String> = nix::ifaddrs::getifaddrs()?
            .filter_map(|i| i.address?.as_sockaddr_in().map(|a| a.ip()))
            .filter(|ip| !ip.is_unspecified())
            .map(|ip| std::net::SocketAddr::from((ip, port)).to_string())
            .collect();
        // Addresses other hosts can reach first, loopback last.
        addrs.sort_by_key(|a| a.starts_with("127."));
        let text = addrs.join(",");
        g.segment(SEG)?.write(AT as usize, text.as_bytes())?;
        g.passive_send(SEG, AT, Rank(0), text.len() as u64, Timeout::Block)?;
        Ok(listener.accept()?.0)
    } else {
        let (_, len) = g.passive_receive(SEG, AT, Timeout::Block)?;
        let text: Vec<u8> = g.segment(SEG)?.read_vec(AT as usize, len as usize)?;
        let text = String::from_utf8(text)?;
        for addr in text.split(',').filter_map(|a| a.parse().ok()) {
            if let Ok(s) =
                std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_millis(500))
            {
                return Ok(s);
            }
        }
        Err(format!("rank 1 cannot be reached at any of {text}").into())
    }
}

fn notify_rate(g: &Gaspi, quick: bool) -> Result<Vec<Record>, Box<dyn std::error::Error>> {
    const WINDOW: u32 = 64;
    let me = g.rank();
    let peer = Rank(1 - me.0);
    g.segment_create(SEG, 64, Memory::Host, Group::ALL, Timeout::Block)?;
    let floor_us = cacheline_floor(g, quick)?;
    let rounds: u64 = if quick { 200 } else { 4000 };
    let mut samples = Samples::with_capacity(rounds as usize);
    for round in 0..=rounds {
        let t = Instant::now();
        if me.0 == 0 {
            for id in 0..WINDOW {
                g.notify(peer, SEG, NotifyId(id), 1, Queue(0))?;
            }
            g.wait(Queue(0), Timeout::Block)?;
            // The receiver acknowledges the window on id WINDOW.
            let id = g.notify_waitsome(SEG, NotifyId(WINDOW), 1, Timeout::Block)?;
            g.notify_reset(SEG, id)?;
        } else {
            let mut seen = 0;
            while seen < WINDOW {
                let id = g.notify_waitsome(SEG, NotifyId(0), WINDOW, Timeout::Block)?;
                seen += g.notify_reset(SEG, id)?;
            }
            g.notify(peer, SEG, NotifyId(WINDOW), 1, Queue(0))?;
            g.wait(Queue(0), Timeout::Block)?;
        }
        if round > 0 {
            samples.push(t.elapsed().as_secs_f64() * 1e6 / WINDOW as f64);
        }
    }
    g.barrier(Group::ALL, Timeout::Block)?;
    if me.0 != 0 {
        return Ok(Vec::new());
    }
    let mut r = Record::new("notify-rate", 2).with_samples(&samples);
    r.transport = Some(g.transport(peer)?.into());
    r.size = Some(4);
    r.iters = Some(rounds * WINDOW as u64);
    r.note = Some(format!(
        "{:.1} M notifications/s (median); window of {WINDOW} ids then an acknowledgement",
        1.0 / samples.median()
    ));
    Ok(vec![r.with_ref_us("cacheline-pingpong", floor_us)])
}

/// Open file descriptors of this process.
fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64)
}

/// Resident memory of this process, KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4)
}

fn init(ranks: u32) -> Result<Vec<Record>, Box<dyn std::error::Error>> {
    let (fds, rss) = (open_fds(), rss_kib());
    let t = Instant::now();
    let g = start(ranks)?;
    let init_us = t.elapsed().as_secs_f64() * 1e6;
    let (fds_up, rss_up) = (open_fds(), rss_kib());
    let up = g.startup();
    // Every rank's figures to rank 0 by passive message: each rank meets
    // rank 0 alone (a segment of all ranks would connect every pair, and
    // in a large job look up every endpoint: N^2 of what this measures).
    let n = g.size();
    let me = g.rank().0;
    let seg = g.segment_alloc(SEG, 64 * n as u64, Memory::Host)?;
    let held = [
        init_us,
        fds_up.saturating_sub(fds) as f64,
        rss_up.saturating_sub(rss) as f64,
        up.connections as f64,
        up.sent_bytes as f64,
        up.received_bytes as f64,
    ];
    seg.write(64 * me as usize, &held)?;
    if me != 0 {
        g.passive_send(SEG, 64 * me as u64, Rank(0), 48, Timeout::Block)?;
        return Ok(Vec::new());
    }
    let mut rows = vec![held.to_vec()];
    for _ in 1..n {
        let (_from, _len) = g.passive_receive(SEG, 0, Timeout::Block)?;
        rows.push(seg.read_vec(0, 6)?);
    }
    let mut times = report::Samples::with_capacity(n as usize);
    let mut sums = [0.0f64; 3];
    let mut conn_max = 0.0f64;
    for v in &rows {
        times.push(v[0]);
        sums[0] += v[1];
        sums[1] += v[2];
        sums[2] += v[3];
        conn_max = conn_max.max(v[3]);
    }
    let mut rec = Record::new("init", n).with_samples(&times);
    rec.max_us = times.0.iter().copied().reduce(f64::max);
    rec.transport = Some(g.transport(Rank(n - 1))?.into());
    rec.bootstrap = Some(up.bootstrap.clone());
    rec.rank0_sent_bytes = Some(up.sent_bytes);
    rec.rank0_received_bytes = Some(up.received_bytes);
    rec.rank0_connections = Some(up.connections as u64);
    rec.connections_max = Some(conn_max as u64);
    rec.connections_mean = Some(sums[2] / n as f64);
    let later = g.startup();
    rec.note = Some(format!(
        "once up, per rank (mean): {:.1} fds, {:.0} KiB; rank 0 after every rank looked it \
         up: {} B sent, {} B received",
        sums[0] / n as f64,
        sums[1] / n as f64,
        later.sent_bytes,
        later.received_bytes
    ));
    Ok(vec![rec])
}

fn barrier(g: &Gaspi, quick: bool) -> Result<Vec<Record>, Box<dyn std::error::Error>> {
    const BATCH: u64 = 100;
    let n = g.size();
    let floor_us = cacheline_floor(g, quick)?;
    let samples_n = if quick { 20 } else { 200 };
    let mut samples = Samples::with_capacity(samples_n as usize);
    for s in 0..=samples_n {
        let t = Instant::now();
        for _ in 0..BATCH {
            g.barrier(Group::ALL, Timeout::Block)?;
        }
        if s > 0 {
            samples.push(t.elapsed().as_secs_f64() * 1e6 / BATCH as f64);
        }
    }
    if g.rank().0 != 0 {
        return Ok(Vec::new());
    }
    let rounds = (n.max(2) as f64).log2().ceil();
    let mut r = Record::new("barrier", n).with_samples(&samples);
    r.transport = Some(g.transport(Rank((g.rank().0 + 1) % n))?.into());
    r.iters = Some(samples_n * BATCH);
    // Dissemination needs ceil(log2 n) rounds, each at least one hand-off.
    Ok(vec![r.with_ref_us(
        "cacheline-pingpong x rounds",
        floor_us * rounds,
    )])
}

/// A collective measured blocking and polled.
#[derive(Clone, Copy)]
enum Collective {
    Barrier,
    Allreduce,
}

/// Runs `c` once with `timeout`; with `Timeout::Test`, repeats it until it
/// completes, as a GASPI program polling with GASPI_TEST does.
fn collective_once(g: &Gaspi, c: Collective, timeout: Timeout) -> Result<(), gaspi::Error> {
    let send = [g.rank().0 as f64 + 0.5];
    let mut recv = [0.0f64];
    loop {
        let r = match c {
            Collective::Barrier => g.barrier(Group::ALL, timeout),
            Collective::Allreduce => {
                g.allreduce(&send, &mut recv, ReduceOp::Sum, Group::ALL, timeout)
            }
        };
        match r {
            Err(gaspi::Error::Timeout { .. }) if timeout == Timeout::Test => continue,
            other => return other,
        }
    }
}

/// `barrier --poll`, `allreduce --poll`: batches of the blocking call and
/// of the polled one, alternating, so that both see the same machine.
fn polled(
    g: &Gaspi,
    quick: bool,
    c: Collective,
) -> Result<Vec<Record>, Box<dyn std::error::Error>> {
    const BATCH: u64 = 20;
    let n = g.size();
    let samples_n = if quick { 10 } else { 40 };
    let mut blocking = Samples::with_capacity(samples_n as usize);
    let mut polling = Samples::with_capacity(samples_n as usize);
    g.barrier(Group::ALL, Timeout::Block)?;
    for s in 0..=samples_n {
        for (timeout, into) in [
            (Timeout::Block, &mut blocking),
            (Timeout::Test, &mut polling),
        ] {
            let t = Instant::now();
            for _ in 0..BATCH {
                collective_once(g, c, timeout)?;
            }
            if s > 0 {
                into.push(t.elapsed().as_secs_f64() * 1e6 / BATCH as f64);
            }
        }
    }
    g.barrier(Group::ALL, Timeout::Block)?;
    if g.rank().0 != 0 {
        return Ok(Vec::new());
    }
    let name = match c {
        Collective::Barrier => "barrier",
        Collective::Allreduce => "allreduce",
    };
    let transport: String = g.transport(Rank((g.rank().0 + 1) % n))?.into();
    let blocking_median = blocking.median();
    let mut b = Record::new(name, n).with_samples(&blocking);
    b.transport = Some(transport.clone());
    b.iters = Some(samples_n * BATCH);
    let mut p = Record::new(format!("{name}-poll"), n).with_samples(&polling);
    p.transport = Some(transport);
    p.iters = Some(samples_n * BATCH);
    // The peer: the blocking call of the same run.
    Ok(vec![b, p.with_ref_us("blocking call", blocking_median)])
}

fn allreduce(g: &Gaspi, quick: bool) -> Result<Vec<Record>, Box<dyn std::error::Error>> {
    const BATCH: u64 = 100;
    let n = g.size();
    let floor_us = cacheline_floor(g, quick)?;
    let samples_n = if quick { 20 } else { 200 };
    let mut out = Vec::new();
    for count in [1usize, 255] {
        let send = vec![g.rank().0 as f64 + 0.5; count];
        let mut recv = vec![0.0f64; count];
        let mut samples = Samples::with_capacity(samples_n as usize);
        g.barrier(Group::ALL, Timeout::Block)?;
        for s in 0..=samples_n {
            let t = Instant::now();
            for _ in 0..BATCH {
                g.allreduce(&send, &mut recv, ReduceOp::Sum, Group::ALL, Timeout::Block)?;
            }
            if s > 0 {
                samples.push(t.elapsed().as_secs_f64() * 1e6 / BATCH as f64);
            }
        }
        if g.rank().0 != 0 {
            continue;
        }
        let mut r = Record::new("allreduce", n).with_samples(&samples);
        r.transport = Some(g.transport(Rank((g.rank().0 + 1) % n))?.into());
        r.size = Some((count * 8) as u64);
        r.iters = Some(samples_n * BATCH);
        // Gather to the root, scatter back: two hand-offs on the critical path.
        out.push(r.with_ref_us("cacheline-pingpong x 2", floor_us * 2.0));
    }
    g.barrier(Group::ALL, Timeout::Block)?;
    Ok(out)
}

fn atomic(g: &Gaspi, quick: bool) -> Result<Vec<Record>, Box<dyn std::error::Error>> {
    g.segment_create(SEG, 4096, Memory::Host, Group::ALL, Timeout::Block)?;
    let floor_us = cacheline_floor(g, quick)?;
    let me = g.rank();
    let peer = Rank(1 - me.0);
    let iters = if quick { 10_000 } else { 100_000 };
    let batch = iters / SAMPLES;
    let mut samples = Samples::with_capacity(SAMPLES as usize);
    g.barrier(Group::ALL, Timeout::Block)?;
    if me.0 == 0 {
        for s in 0..=SAMPLES {
            let t = Instant::now();
            for _ in 0..batch {
                g.atomic_fetch_add(SEG, 0, peer, 1, Timeout::Block)?;
            }
            if s > 0 {
                samples.push(t.elapsed().as_secs_f64() * 1e6 / batch as f64);
            }
        }
    }
    g.barrier(Group::ALL, Timeout::Block)?;
    if me.0 != 0 {
        return Ok(Vec::new());
    }
    let mut r = Record::new("atomic-fetch-add", 2).with_samples(&samples);
    r.transport = Some(g.transport(peer)?.into());
    r.size = Some(8);
    r.iters = Some(batch * SAMPLES);
    // One hardware atomic on a line the peer's memory owns: one hand-off.
    Ok(vec![r.with_ref_us("cacheline-pingpong", floor_us)])
}
