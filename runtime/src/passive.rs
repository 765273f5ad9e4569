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
    /// Queues a message from `from` (progress engine).
    pub fn push(&self, from: Rank, data: Vec<u8>) {
        self.queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back((from, data));
        self.cv.notify_one();
    }

    /// Wakes receivers (shutdown, peer failures).
    pub fn wake(&self) {
        let _q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        self.cv.notify_all();
    }
}
