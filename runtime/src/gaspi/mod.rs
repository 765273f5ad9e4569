//! The front: the calls of [`Gaspi`](crate::Gaspi), one file per call
//! family. Each checks its input and hands the work to the service that
//! owns it (groups, collectives, passive messages, atomics); only the
//! front names the whole context (`context.rs`'s `Inner`).

mod collectives;
mod groups;
