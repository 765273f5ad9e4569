//! `gaspi_logger`: GPI-2's output collector, for job scripts that start it.
//!
//! ```text
//! gaspi_logger [-p PORT]
//! ```
//!
//! In GPI-2, `gaspi_printf` on a rank sends its line as one UDP datagram to
//! port 17825 of rank 0's host, where `gaspi_logger` prints it: that is how
//! a GPI-2 job shows the output of ranks on other hosts. This program does
//! the same job on the same port: it binds UDP `0.0.0.0:PORT` (17825 unless
//! `-p` says otherwise, 1024..=65535) and writes every datagram it receives
//! to its standard output as it comes, until it is stopped.
//!
//! With this runtime it is not needed to see a job's output: `gaspi_printf`
//! writes to the rank's standard output, and `gaspi_run` / `gaspi-run`
//! carry every rank's output, on every host, back to the launcher's
//! terminal. A job script written for GPI-2 that starts `gaspi_logger` runs
//! unchanged; whatever sends GPI-2's datagrams (a GPI-2 rank, a script)
//! is printed.

use std::io::Write;
use std::net::UdpSocket;

/// GPI-2's logger port.
const DEFAULT_PORT: u16 = 17825;

const USAGE: &str = "usage: gaspi_logger [-p PORT]   (PORT in 1024..65535, default 17825)";

fn fail(e: impl std::fmt::Display) -> ! {
    eprintln!("gaspi_logger: {e}");
    eprintln!("{USAGE}");
    std::process::exit(1);
}

fn main() {
    let mut port = DEFAULT_PORT;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "-p" => {
                let v = args.next().unwrap_or_else(|| fail("-p needs a port"));
                port = match v.parse::<u16>() {
                    Ok(p) if p >= 1024 => p,
                    _ => fail(format!("invalid port {v}")),
                };
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            other => fail(format!("unknown argument {other}")),
        }
    }
    let socket = UdpSocket::bind(("0.0.0.0", port)).unwrap_or_else(|e| {
        fail(format!(
            "binding UDP port {port}: {e} (is another gaspi_logger running?)"
        ))
    });
    println!("gaspi_logger: collecting rank output on UDP port {port}");
    let mut buf = vec![0u8; 64 * 1024];
    let stdout = std::io::stdout();
    loop {
        let n = match socket.recv_from(&mut buf) {
            Ok((n, _)) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => fail(format!("receiving: {e}")),
        };
        let mut out = stdout.lock();
        // A closed standard output (the job script went away) ends it.
        if out.write_all(&buf[..n]).and_then(|()| out.flush()).is_err() {
            return;
        }
    }
}
