//! Passive communication: two-sided messages of 1 to 65,535 bytes.
//!
//! `passive_send` copies the bytes out of a local segment into a
//! `Message::Passive` on the control connection to the target; the target's
//! progress engine queues it in the [`Inbox`]; `passive_receive` takes the
//! oldest message, copies it into a local segment and returns its sender
//! and size. One connection per sender and one queue per receiver keep the
//! messages of each sender whole and in order. A receiver waits on a
//! condition variable, so it sleeps instead of spinning a core.

use crate::model::ids::Rank;
use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};

/// Largest passive message in bytes.
pub const PASSIVE_MAX: u64 = 65_535;

/// Messages received and not yet taken.
#[derive(Debug, Default)]
pub(crate) struct Inbox {
    pub(crate) queue: Mutex<VecDeque<(Rank, Vec<u8>)>>,
    pub(crate) cv: Condvar,
}

impl Inbox {
    /// Queues a message from `from` (progress engine), or refuses one of
    /// a size no `passive_send` sends (0, or over [`PASSIVE_MAX`]): a
    /// receiver sizes its buffer by that limit, and a peer's bytes are
    /// never trusted. The reason goes to the caller.
    pub fn push(&self, from: Rank, data: Vec<u8>) -> Result<(), String> {
        if !(1..=PASSIVE_MAX).contains(&(data.len() as u64)) {
            return Err(format!(
                "a passive message of {} bytes from {from} (1 to {PASSIVE_MAX} allowed)",
                data.len()
            ));
        }
        self.queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back((from, data));
        self.cv.notify_one();
        Ok(())
    }

    /// Wakes receivers (shutdown, peer failures).
    pub fn wake(&self) {
        let _q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        self.cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A peer's passive message of a size no `passive_send` sends (0, or
    /// over `PASSIVE_MAX`) was queued and handed to `passive_receive`;
    /// now it is refused and leaves the inbox as it was.
    #[test]
    fn a_passive_message_of_an_impossible_size_is_refused() {
        let inbox = Inbox::default();
        assert!(inbox.push(Rank(1), Vec::new()).is_err());
        assert!(inbox
            .push(Rank(1), vec![0; PASSIVE_MAX as usize + 1])
            .is_err());
        assert!(inbox.queue.lock().unwrap().is_empty());
        inbox.push(Rank(1), vec![7; PASSIVE_MAX as usize]).unwrap();
        inbox.push(Rank(2), vec![8]).unwrap();
        let q = inbox.queue.lock().unwrap();
        assert_eq!(q.len(), 2);
        assert_eq!(q[1], (Rank(2), vec![8]));
    }
}
