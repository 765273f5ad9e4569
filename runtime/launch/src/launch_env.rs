//! How this process was launched, read from the environment.
//!
//! Four launchers are understood, in this order:
//!
//! | launcher | rank / size | rendezvous | job key |
//! |---|---|---|---|
//! | `gaspi-run` (or self-launch) | `GASPI_RANK`, `GASPI_SIZE` | `GASPI_RENDEZVOUS` (+ `GASPI_RENDEZVOUS_FD` for rank 0) | `GASPI_JOB_KEY` |
//! | Slurm `srun` | `SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_LOCALID` | first node of `SLURM_STEP_NODELIST`, else `SLURM_LAUNCH_NODE_IPADDR`; port from the job and step ids | user key file |
//! | Open MPI `mpirun` | `OMPI_COMM_WORLD_RANK`, `_SIZE`, `_LOCAL_RANK` | loopback when all ranks are local; port from the job id | user key file |
//! | PMI (MPICH, Intel MPI) | `PMI_RANK`, `PMI_SIZE` | loopback when all ranks are local; port from the job id | user key file |
//!
//! `GASPI_RENDEZVOUS=host:port` and `GASPI_JOB_KEY` override the derived
//! values under every launcher (`mpirun -x GASPI_RENDEZVOUS=...` for jobs
//! across hosts). The user key file (`$GASPI_KEY_FILE`, default
//! `~/.gaspi/job.key`, mode 0600) plays the role of munge's key: readable by
//! the user alone, on a home directory shared by the nodes.

use crate::{Error, Result};
use std::net::{SocketAddr, ToSocketAddrs};

/// Which launcher started this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    /// Started directly: one rank (or self-launch).
    Standalone,
    /// `gaspi-run` or a self-launching program.
    GaspiRun,
    /// Slurm's srun.
    Slurm,
    /// Open MPI's mpirun.
    OpenMpi,
    /// A PMI launcher (MPICH hydra, Intel MPI).
    Pmi,
}

/// Rank, size and rendezvous of this process.
#[derive(Debug, Clone)]
pub struct LaunchInfo {
    /// Who launched us.
    pub launcher: Launcher,
    /// This rank.
    pub rank: u32,
    /// Ranks in the job.
    pub size: u32,
    /// Rank among the ranks of this host.
    pub local_rank: u32,
    /// Ranks on this host (as far as the launcher tells).
    pub local_size: u32,
    /// Where rank 0 listens for the rendezvous.
    pub rendezvous: Option<SocketAddr>,
    /// An already-bound rendezvous socket inherited by rank 0 (from gaspi-run).
    pub rendezvous_fd: Option<i32>,
    /// The job's secret.
    pub job_key: Vec<u8>,
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn num(name: &str) -> Result<Option<u32>> {
    var(name)
        .map(|v| {
            v.trim()
                .parse::<u32>()
                .map_err(|_| Error::Config(format!("{name}={v:?} is not a number")))
        })
        .transpose()
}

/// A port in 10000..30000 (below Linux's ephemeral range, 32768 and up, so
/// an outgoing connection cannot be holding it) derived from a job identifier, so that all ranks
/// of a job agree on it without talking.
fn port_for(job: &str) -> u16 {
    // FNV-1a: stable across builds and processes.
    let mut h: u64 = 0xcbf29ce484222325;
    for b in job.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    10000 + (h % 20000) as u16
}

fn resolve(host: &str, port: u16) -> Result<SocketAddr> {
    (host, port)
        .to_socket_addrs()
        .map_err(|e| Error::Config(format!("cannot resolve rendezvous host {host:?}: {e}")))?
        .next()
        .ok_or_else(|| Error::Config(format!("rendezvous host {host:?} has no address")))
}

fn parse_addr(name: &str, v: &str) -> Result<SocketAddr> {
    let (host, port) = v
        .rsplit_once(':')
        .ok_or_else(|| Error::Config(format!("{name}={v:?} is not host:port")))?;
    let port: u16 = port
        .parse()
        .map_err(|_| Error::Config(format!("{name}={v:?} has a bad port")))?;
    resolve(host.trim_start_matches('[').trim_end_matches(']'), port)
}

/// The first host name of a Slurm node list such as `node[07-09,12],gpu3`.
pub fn first_slurm_node(list: &str) -> Option<String> {
    let list = list.trim();
    if list.is_empty() {
        return None;
    }
    // Up to the first comma outside brackets.
    let mut depth = 0;
    let mut end = list.len();
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    let first = &list[..end];
    match first.find('[') {
        None => Some(first.to_string()),
        Some(open) => {
            let prefix = &first[..open];
            let inner = first[open + 1..].trim_end_matches(']');
            let range = inner.split(',').next()?;
            let lo = range.split('-').next()?;
            Some(format!("{prefix}{lo}"))
        }
    }
}

/// Reads (or creates, readable by the user alone) the user's key file.
fn user_key() -> Result<Vec<u8>> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = match var("GASPI_KEY_FILE") {
        Some(p) => std::path::PathBuf::from(p),
        None => {
            let home = var("HOME").ok_or_else(|| {
                Error::Config("no GASPI_JOB_KEY, GASPI_KEY_FILE or HOME to find a job key".into())
            })?;
            std::path::PathBuf::from(home)
                .join(".gaspi")
                .join("job.key")
        }
    };
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    // Create it exclusively with a fresh secret; whoever loses the race reads
    // the winner's. A file still being written is retried briefly.
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
    {
        Ok(mut f) => {
            let key: [u8; 32] = rand::random();
            let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
            f.write_all(hex.as_bytes())
                .map_err(|e| Error::io(format!("writing key file {}", path.display()), e))?;
            return Ok(hex.into_bytes());
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(Error::io(
                format!("creating key file {}", path.display()),
                e,
            ))
        }
    }
    for _ in 0..100 {
        let key = std::fs::read(&path)
            .map_err(|e| Error::io(format!("reading key file {}", path.display()), e))?;
        if key.len() >= 64 {
            return Ok(key);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Err(Error::Config(format!(
        "key file {} is incomplete",
        path.display()
    )))
}

impl LaunchInfo {
    /// A single rank started without a launcher.
    pub fn standalone() -> LaunchInfo {
        LaunchInfo {
            launcher: Launcher::Standalone,
            rank: 0,
            size: 1,
            local_rank: 0,
            local_size: 1,
            rendezvous: None,
            rendezvous_fd: None,
            job_key: Vec::new(),
        }
    }

    /// Reads the launch environment (see the module docs).
    pub fn from_env() -> Result<LaunchInfo> {
        let explicit = var("GASPI_RENDEZVOUS")
            .map(|v| parse_addr("GASPI_RENDEZVOUS", &v))
            .transpose()?;
        let key = var("GASPI_JOB_KEY").map(String::into_bytes);
        let (launcher, rank, size, local_rank, local_size, rendezvous) = if let (Some(r), Some(s)) =
            (num("GASPI_RANK")?, num("GASPI_SIZE")?)
        {
            let rv = explicit.ok_or_else(|| {
                Error::Config("GASPI_RANK is set but GASPI_RENDEZVOUS is not".into())
            })?;
            (
                Launcher::GaspiRun,
                r,
                s,
                num("GASPI_LOCAL_RANK")?.unwrap_or(r),
                num("GASPI_LOCAL_SIZE")?.unwrap_or(s),
                Some(rv),
            )
        } else if let (Some(r), Some(s)) = (num("SLURM_PROCID")?, num("SLURM_NTASKS")?) {
            let job = format!(
                "slurm-{}-{}",
                var("SLURM_JOB_ID").unwrap_or_default(),
                var("SLURM_STEP_ID").unwrap_or_default()
            );
            let rv = match explicit {
                Some(a) => a,
                None => {
                    let host = var("SLURM_STEP_NODELIST")
                            .or_else(|| var("SLURM_JOB_NODELIST"))
                            .and_then(|l| first_slurm_node(&l))
                            .or_else(|| var("SLURM_LAUNCH_NODE_IPADDR"))
                            .ok_or_else(|| {
                                Error::Config(
                                    "under Slurm but neither SLURM_STEP_NODELIST nor SLURM_LAUNCH_NODE_IPADDR nor GASPI_RENDEZVOUS is set".into(),
                                )
                            })?;
                    resolve(&host, port_for(&job))?
                }
            };
            (
                Launcher::Slurm,
                r,
                s,
                num("SLURM_LOCALID")?.unwrap_or(0),
                // "4" or "4(x2),3": the first count is a fair guess for this node.
                var("SLURM_TASKS_PER_NODE")
                    .and_then(|v| {
                        v.split(|c: char| !c.is_ascii_digit())
                            .next()
                            .and_then(|n| n.parse().ok())
                    })
                    .unwrap_or(s),
                Some(rv),
            )
        } else if let (Some(r), Some(s)) =
            (num("OMPI_COMM_WORLD_RANK")?, num("OMPI_COMM_WORLD_SIZE")?)
        {
            let local_size = num("OMPI_COMM_WORLD_LOCAL_SIZE")?.unwrap_or(s);
            let job = var("OMPI_MCA_ess_base_jobid")
                .or_else(|| var("PMIX_NAMESPACE"))
                .or_else(|| var("OMPI_MCA_orte_ess_jobid"))
                .unwrap_or_else(|| format!("ppid-{}", nix::unistd::getppid()));
            let rv = local_rendezvous(explicit, local_size, s, &format!("ompi-{job}"))?;
            (
                Launcher::OpenMpi,
                r,
                s,
                num("OMPI_COMM_WORLD_LOCAL_RANK")?.unwrap_or(0),
                local_size,
                Some(rv),
            )
        } else if let (Some(r), Some(s)) = (num("PMI_RANK")?, num("PMI_SIZE")?) {
            let local_size = num("MPI_LOCALNRANKS")?.unwrap_or(s);
            let job = var("PMI_KVSNAME")
                .or_else(|| var("PMI_JOBID"))
                .unwrap_or_else(|| format!("ppid-{}", nix::unistd::getppid()));
            let rv = local_rendezvous(explicit, local_size, s, &format!("pmi-{job}"))?;
            (
                Launcher::Pmi,
                r,
                s,
                num("MPI_LOCALRANKID")?.unwrap_or(0),
                local_size,
                Some(rv),
            )
        } else {
            return Ok(LaunchInfo::standalone());
        };
        if size == 0 || rank >= size {
            return Err(Error::Config(format!(
                "rank {rank} is not below the job size {size}"
            )));
        }
        let job_key = match key {
            Some(k) => k,
            None if launcher == Launcher::GaspiRun => {
                return Err(Error::Config(
                    "GASPI_RANK is set but GASPI_JOB_KEY is not".into(),
                ))
            }
            None => user_key()?,
        };
        let rendezvous_fd = if rank == 0 {
            num("GASPI_RENDEZVOUS_FD")?.map(|f| f as i32)
        } else {
            None
        };
        Ok(LaunchInfo {
            launcher,
            rank,
            size,
            local_rank,
            local_size,
            rendezvous,
            rendezvous_fd,
            job_key,
        })
    }

    /// True when no launcher started this process.
    pub fn is_standalone(&self) -> bool {
        self.launcher == Launcher::Standalone
    }
}

fn local_rendezvous(
    explicit: Option<SocketAddr>,
    local_size: u32,
    size: u32,
    job: &str,
) -> Result<SocketAddr> {
    match explicit {
        Some(a) => Ok(a),
        None if local_size == size => Ok(SocketAddr::from(([127, 0, 0, 1], port_for(job)))),
        None => Err(Error::Config(
            "ranks span several hosts: set GASPI_RENDEZVOUS=host:port (rank 0's host) for every rank".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_node_lists_give_their_first_host() {
        assert_eq!(
            first_slurm_node("node[07-09,12],gpu3").as_deref(),
            Some("node07")
        );
        assert_eq!(first_slurm_node("gpu3,node[1-2]").as_deref(), Some("gpu3"));
        assert_eq!(first_slurm_node("localhost").as_deref(), Some("localhost"));
        assert_eq!(first_slurm_node("").as_deref(), None);
    }

    #[test]
    fn derived_ports_are_stable_and_in_range() {
        let a = port_for("slurm-42-0");
        assert_eq!(a, port_for("slurm-42-0"));
        assert!((10000..30000).contains(&a));
        assert_ne!(port_for("slurm-42-0"), port_for("slurm-42-1"));
    }
}
