//! The error of launching a job or reading the launch environment.
//!
//! The messages read as the runtime's own (`configuration: ...`,
//! `bootstrap: ...`, `what: cause`): the `gaspi` crate turns each variant
//! into its namesake, so a bad launch environment is `gaspi::Error::Config`
//! whether the runtime or this crate found it.

/// Errors of the launchers and of reading the launch environment.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Bad input: a launch environment, hostfile or option that cannot
    /// work. Nothing was started.
    #[error("configuration: {0}")]
    Config(String),
    /// The launcher and a remote agent did not agree: the session ended or
    /// said something unexpected.
    #[error("bootstrap: {0}")]
    Bootstrap(String),
    /// A system call failed.
    #[error("{what}: {source}")]
    Io {
        /// what was being done
        what: String,
        /// the operating system's error
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            what: what.into(),
            source,
        }
    }
}

/// This crate's result.
pub type Result<T> = std::result::Result<T, Error>;
