//! Starting the ranks of a GASPI job, and telling a rank how it was started.
//!
//! Two halves, one on each side of `exec`:
//! - **The launchers** start the ranks: [`launch`] runs N copies of a
//!   program on this host, or over ssh on the hosts of a hostfile
//!   ([`read_hostfile`], [`agent`] for the remote half), and supervises
//!   them: the job's exit code is that of the rank that failed first in
//!   time; a failure, Ctrl-C, SIGTERM or a timeout stops them all. The
//!   command lines `gaspi-run` and `gaspi_run` (GPI-2's) are thin shells
//!   over it (feature `cli`). [`relaunch_self`] is the same launcher run by
//!   a program that starts copies of itself.
//! - **The launch environment** ([`LaunchInfo::from_env`]): a rank reads
//!   its rank, the job size, where rank 0 meets the others and the job's
//!   key from whatever started it: `gaspi-run`, Slurm's `srun`, Open MPI's
//!   `mpirun` or a PMI launcher. [`adopt_lifeline`] lets a rank started by
//!   `gaspi-run` tell the launcher first when it exits.
//!
//! # Why a crate of its own
//! The launchers are an application shell around the runtime, not part of
//! it: they never touch a segment or a connection, and the runtime needs of
//! them only the launch environment, self-launch and the lifeline. Kept
//! apart, the `gaspi` library depends on this crate with default features
//! off, and so on no command-line parser or log subscriber (a library
//! leaves those to the program); and the launchers build without the
//! runtime. See `docs/decisions/0040-launchers-in-their-own-crate.md`.
//!
//! # Features
//! - `cli` (default): the `gaspi-run` and `gaspi_run` binaries (clap);
//!   implies `logging`.
//! - `logging`: [`init_logging`], a `tracing` subscriber on stderr for
//!   programs, tests and the C library `libGPI2`.

mod error;
mod launch_env;
mod launcher;
#[cfg(feature = "logging")]
mod logging;

pub use error::{Error, Result};
pub use launch_env::{
    first_slurm_node, pmix_server_env, LaunchInfo, Launcher, PMIX_BUILT, PMIX_SERVER_URI_VARS,
};
pub use launcher::{
    adopt_lifeline, agent, is_this_host, launch, parse_hostfile, place, read_hostfile,
    relaunch_self, AgentOptions, Host, LaunchOptions,
};
#[cfg(feature = "logging")]
pub use logging::init_logging;
