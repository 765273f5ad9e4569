//! Warnings that strangers can provoke, kept to a few lines and a count.
//!
//! Anyone who reaches a listener can make a rank drop a connection (one
//! that says nothing, garbage, a wrong key), and a flood of them used to
//! write a warning each: megabytes of log in seconds (issue 24). A
//! [`Tally`] shows the first [`SHOWN`] of a kind in full, then counts the
//! rest and says how many every [`EVERY`], with the latest one's text.

use std::time::{Duration, Instant};

/// Warnings of a kind written in full before counting starts.
pub(crate) const SHOWN: u32 = 5;

/// How often a count of the warnings not written is written.
pub(crate) const EVERY: Duration = Duration::from_secs(10);

/// One kind of warning, its count, and when the count was last written.
#[derive(Debug)]
pub(crate) struct Tally {
    /// What is counted, for the summary line ("connections dropped ...").
    what: &'static str,
    shown: u32,
    /// Warnings not written since the last summary.
    held: u64,
    latest: String,
    since: Instant,
}

impl Tally {
    /// A tally of warnings about `what`.
    pub(crate) fn new(what: &'static str) -> Tally {
        Tally {
            what,
            shown: 0,
            held: 0,
            latest: String::new(),
            since: Instant::now(),
        }
    }

    /// One warning: written in full while few have been, else counted.
    pub(crate) fn warn(&mut self, msg: impl std::fmt::Display) {
        if self.shown < SHOWN {
            self.shown += 1;
            tracing::warn!("{msg}");
            if self.shown == SHOWN {
                tracing::warn!(
                    "further {} are counted and reported every {} s",
                    self.what,
                    EVERY.as_secs()
                );
                self.since = Instant::now();
            }
            return;
        }
        self.held += 1;
        self.latest = msg.to_string();
        self.flush_if_due();
    }

    /// Writes the count of warnings held back, if any and due.
    pub(crate) fn flush_if_due(&mut self) {
        if self.held > 0 && self.since.elapsed() >= EVERY {
            self.flush();
        }
    }

    /// Writes the count of warnings held back, if any.
    pub(crate) fn flush(&mut self) {
        if self.held == 0 {
            return;
        }
        tracing::warn!(
            "{} more {} in the last {:.0?} (latest: {})",
            self.held,
            self.what,
            self.since.elapsed(),
            self.latest
        );
        self.held = 0;
        self.since = Instant::now();
    }
}

impl Drop for Tally {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_the_first_few_warnings_are_counted_not_written() {
        let mut t = Tally::new("test warnings");
        for i in 0..1000 {
            t.warn(format_args!("warning {i}"));
        }
        assert_eq!(t.shown, SHOWN);
        assert_eq!(t.held, 1000 - u64::from(SHOWN));
        assert_eq!(t.latest, "warning 999");
        t.flush();
        assert_eq!(t.held, 0);
    }
}
