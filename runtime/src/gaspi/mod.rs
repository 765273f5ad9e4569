//! The front: the calls of [`Gaspi`](crate::Gaspi), one file per call
//! family. Each checks its input and hands the work to the service that
//! owns it (groups, collectives, passive messages); only the front names
//! the whole context (`context.rs`'s `Inner`). Atomics are a call family
//! whose whole logic (hardware atomic on a mapping, or a request to the
//! owner adopted after a timeout) is the front's.

mod atomics;
mod collectives;
mod frames;
mod groups;
mod passive;
mod queues;
