//! How this process was launched, read from the environment.
//!
//! Five launchers are understood, in this order:
//!
//! | launcher | rank / size | rendezvous | job key |
//! |---|---|---|---|
//! | `gaspi-run` (or self-launch) | `GASPI_RANK`, `GASPI_SIZE` | `GASPI_RENDEZVOUS` (+ `GASPI_RENDEZVOUS_FD` for rank 0) | `GASPI_JOB_KEY` |
//! | a PMIx server (Open MPI's `mpirun`, `srun --mpi=pmix`, PRRTE, Flux), in a build with the PMIx bootstrap | `PMIX_RANK`; the size from `PMIx_Init` | none: endpoints go through PMIx | `GASPI_JOB_KEY`, else rank 0's, through PMIx |
//! | Slurm `srun` | `SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_LOCALID` | first node of `SLURM_STEP_NODELIST`, else `SLURM_LAUNCH_NODE_IPADDR`; port from the job and step ids | user key file |
//! | Open MPI `mpirun` | `OMPI_COMM_WORLD_RANK`, `_SIZE`, `_LOCAL_RANK` | loopback when all ranks are local; port from the job id | user key file |
//! | PMI (MPICH, Intel MPI) | `PMI_RANK`, `PMI_SIZE` | loopback when all ranks are local; port from the job id | user key file |
//!
//! `GASPI_RENDEZVOUS=host:port` and `GASPI_JOB_KEY` override the derived
//! values under every launcher (`mpirun -x GASPI_RENDEZVOUS=...` for jobs
//! across hosts). The user key file (`$GASPI_KEY_FILE`, default
//! `~/.gaspi/job.key`, mode 0600) plays the role of munge's key: readable by
//! the user alone, on a home directory shared by the nodes.
//!
//! A PMIx server started the process when `PMIX_RANK`, `PMIX_NAMESPACE`
//! and one of its server URI variables are set ([`pmix_server_env`]). The
//! PMIx bootstrap is used then if this build has it (the runtime's feature
//! `pmix`, which turns on this crate's feature `pmix`), unless
//! `GASPI_BOOTSTRAP=own` forbids it; `GASPI_BOOTSTRAP=pmix` demands it
//! (an error where it cannot be had). Otherwise the launcher's own
//! variables are read as before, and [`LaunchInfo::pmix_server`] says
//! that a PMIx server was there, for the start-up log line
//! (docs/decisions/0084-pmix-bootstrap.md).

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
    /// A PMIx server (Open MPI's `mpirun`, `srun --mpi=pmix`, PRRTE,
    /// Flux): rank, size and endpoints come from PMIx. Only in a build
    /// with the PMIx bootstrap (feature `pmix`).
    Pmix,
}

/// The PMIx server URI variables, newest protocol first: one of them is
/// set when a PMIx server (of any version since 2.0) started the process.
pub const PMIX_SERVER_URI_VARS: [&str; 5] = [
    "PMIX_SERVER_URI41",
    "PMIX_SERVER_URI4",
    "PMIX_SERVER_URI3",
    "PMIX_SERVER_URI21",
    "PMIX_SERVER_URI2",
];

/// Whether this build has the PMIx bootstrap (this crate's feature
/// `pmix`, turned on by the runtime's).
pub const PMIX_BUILT: bool = cfg!(feature = "pmix");

/// Whether the environment `env` says a PMIx server started the process:
/// `PMIX_RANK`, `PMIX_NAMESPACE` and a server URI variable
/// ([`PMIX_SERVER_URI_VARS`]) are all set.
pub fn pmix_server_env(env: &dyn Fn(&str) -> Option<String>) -> bool {
    env("PMIX_RANK").is_some()
        && env("PMIX_NAMESPACE").is_some()
        && PMIX_SERVER_URI_VARS.iter().any(|v| env(v).is_some())
}

/// Which bootstrap `GASPI_BOOTSTRAP` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BootstrapChoice {
    /// PMIx where a PMIx server started the process and the build has it.
    Auto,
    /// PMIx or an error.
    Pmix,
    /// Our own rendezvous, PMIx or not.
    Own,
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
    /// The job's secret (empty under [`Launcher::Pmix`] without
    /// `GASPI_JOB_KEY`: the runtime takes rank 0's through PMIx).
    pub job_key: Vec<u8>,
    /// Whether a PMIx server started this process ([`pmix_server_env`]),
    /// whichever bootstrap is used.
    pub pmix_server: bool,
}

/// Where the launch variables are read from: the process's environment,
/// or a table (tests).
type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

fn process_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn num(var: Env, name: &str) -> Result<Option<u32>> {
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
fn user_key(var: Env) -> Result<Vec<u8>> {
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
            pmix_server: false,
        }
    }

    /// Reads the launch environment (see the module docs).
    pub fn from_env() -> Result<LaunchInfo> {
        Self::from_vars(&process_var, PMIX_BUILT)
    }

    /// Reads the launch from the variables `var` gives, for a build that
    /// has the PMIx bootstrap (`pmix_built`) or not (see the module docs).
    pub fn from_vars(var: Env, pmix_built: bool) -> Result<LaunchInfo> {
        let num = |name: &str| num(var, name);
        let pmix_server = pmix_server_env(var);
        let choice = match var("GASPI_BOOTSTRAP").as_deref().map(str::trim) {
            None | Some("auto") => BootstrapChoice::Auto,
            Some("pmix") => BootstrapChoice::Pmix,
            Some("own") => BootstrapChoice::Own,
            Some(other) => {
                return Err(Error::Config(format!(
                    "GASPI_BOOTSTRAP={other:?}: expected pmix, own or auto"
                )))
            }
        };
        if choice == BootstrapChoice::Pmix && !pmix_server {
            return Err(Error::Config(
                "GASPI_BOOTSTRAP=pmix, but no PMIx server started this process (PMIX_RANK, \
                 PMIX_NAMESPACE and a PMIX_SERVER_URI* variable are not all set)"
                    .into(),
            ));
        }
        if choice == BootstrapChoice::Pmix && !pmix_built {
            return Err(Error::Config(
                "GASPI_BOOTSTRAP=pmix, but this build has no PMIx bootstrap (build with the \
                 feature gaspi/pmix)"
                    .into(),
            ));
        }
        let use_pmix = pmix_server && pmix_built && choice != BootstrapChoice::Own;
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
        } else if use_pmix {
            // The size is provisional (the launcher's own count where it
            // sets one): the runtime takes rank, size and the local
            // figures from PMIx_Init.
            let r = num("PMIX_RANK")?.unwrap_or(0);
            let s = num("OMPI_COMM_WORLD_SIZE")?
                .or(num("SLURM_NTASKS")?)
                .unwrap_or(r + 1);
            (
                Launcher::Pmix,
                r,
                s,
                num("OMPI_COMM_WORLD_LOCAL_RANK")?
                    .or(num("SLURM_LOCALID")?)
                    .unwrap_or(0),
                num("OMPI_COMM_WORLD_LOCAL_SIZE")?.unwrap_or(s),
                None,
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
            None if launcher == Launcher::Pmix => Vec::new(),
            None => user_key(var)?,
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
            pmix_server,
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

    /// The variables of `pairs` as a launch environment.
    fn table(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: std::collections::HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    /// What Open MPI's mpirun (4.1, its PMIx server) sets for rank 2 of 4.
    const UNDER_MPIRUN: [(&str, &str); 8] = [
        ("PMIX_RANK", "2"),
        ("PMIX_NAMESPACE", "1234567890"),
        ("PMIX_SERVER_URI3", "1234567890.0;tcp4://127.0.0.1:41000"),
        ("OMPI_COMM_WORLD_RANK", "2"),
        ("OMPI_COMM_WORLD_SIZE", "4"),
        ("OMPI_COMM_WORLD_LOCAL_RANK", "2"),
        ("OMPI_COMM_WORLD_LOCAL_SIZE", "4"),
        ("GASPI_JOB_KEY", "k"),
    ];

    #[test]
    fn a_build_with_pmix_under_a_pmix_server_takes_the_pmix_bootstrap() {
        let info = LaunchInfo::from_vars(&table(&UNDER_MPIRUN), true).expect("a launch");
        assert_eq!(info.launcher, Launcher::Pmix);
        assert!(info.pmix_server);
        assert_eq!((info.rank, info.size), (2, 4));
        assert_eq!(info.rendezvous, None);
    }

    #[test]
    fn a_build_without_pmix_under_a_pmix_server_falls_back_to_the_launchers_variables() {
        let info = LaunchInfo::from_vars(&table(&UNDER_MPIRUN), false).expect("a launch");
        assert_eq!(info.launcher, Launcher::OpenMpi);
        assert!(info.pmix_server, "the PMIx server is still noticed");
        assert_eq!((info.rank, info.size, info.local_size), (2, 4, 4));
        assert!(info.rendezvous.is_some_and(|a| a.ip().is_loopback()));
    }

    #[test]
    fn gaspi_bootstrap_own_forbids_pmix_and_pmix_demands_it() {
        let mut own = UNDER_MPIRUN.to_vec();
        own.push(("GASPI_BOOTSTRAP", "own"));
        let info = LaunchInfo::from_vars(&table(&own), true).expect("a launch");
        assert_eq!(info.launcher, Launcher::OpenMpi);
        assert!(info.pmix_server);

        let mut demand = UNDER_MPIRUN.to_vec();
        demand.push(("GASPI_BOOTSTRAP", "pmix"));
        let e = LaunchInfo::from_vars(&table(&demand), false).expect_err("no PMIx in the build");
        assert!(e.to_string().contains("no PMIx bootstrap"), "{e}");
        assert_eq!(
            LaunchInfo::from_vars(&table(&demand), true)
                .expect("a launch")
                .launcher,
            Launcher::Pmix
        );

        let ompi_only: Vec<_> = UNDER_MPIRUN
            .iter()
            .filter(|(k, _)| !k.starts_with("PMIX_"))
            .chain(&[("GASPI_BOOTSTRAP", "pmix")])
            .copied()
            .collect();
        let e = LaunchInfo::from_vars(&table(&ompi_only), true).expect_err("no PMIx server");
        assert!(e.to_string().contains("no PMIx server"), "{e}");

        let mut bad = UNDER_MPIRUN.to_vec();
        bad.push(("GASPI_BOOTSTRAP", "pmi"));
        assert!(LaunchInfo::from_vars(&table(&bad), true).is_err());
    }

    #[test]
    fn pmix_needs_its_rank_namespace_and_a_server_uri() {
        let no_uri: Vec<_> = UNDER_MPIRUN
            .iter()
            .filter(|(k, _)| !k.starts_with("PMIX_SERVER"))
            .copied()
            .collect();
        let info = LaunchInfo::from_vars(&table(&no_uri), true).expect("a launch");
        assert_eq!(info.launcher, Launcher::OpenMpi);
        assert!(!info.pmix_server);
        for uri in PMIX_SERVER_URI_VARS {
            let vars = [("PMIX_RANK", "0"), ("PMIX_NAMESPACE", "ns"), (uri, "x")];
            assert!(pmix_server_env(&table(&vars)), "{uri}");
        }
    }

    #[test]
    fn gaspi_run_wins_over_a_pmix_server() {
        let mut vars = UNDER_MPIRUN.to_vec();
        vars.extend([
            ("GASPI_RANK", "1"),
            ("GASPI_SIZE", "2"),
            ("GASPI_RENDEZVOUS", "127.0.0.1:4000"),
        ]);
        let info = LaunchInfo::from_vars(&table(&vars), true).expect("a launch");
        assert_eq!(
            (info.launcher, info.rank, info.size),
            (Launcher::GaspiRun, 1, 2)
        );
    }

    #[test]
    fn derived_ports_are_stable_and_in_range() {
        let a = port_for("slurm-42-0");
        assert_eq!(a, port_for("slurm-42-0"));
        assert!((10000..30000).contains(&a));
        assert_ne!(port_for("slurm-42-0"), port_for("slurm-42-1"));
    }
}
