//! The GPU path: one-sided calls whose source or target is GPU memory, and
//! what kernels need to make such calls themselves.
//!
//! # Host-driven calls
//!
//! When either side of a `write`/`read`/`write_notify` is a GPU segment, the
//! CPU cannot move the bytes with a `memcpy`. The call then enqueues a copy
//! on the *queue's stream* (one CUDA stream per GASPI queue, created on
//! first use on the rank's home device) and returns; a notification that
//! follows is a `cuStreamWriteValue32` on the same stream, so the stream's
//! order is GASPI's "data first, then the flag". `wait(queue)` synchronises
//! the stream: local completion. Writes between GPU memories posted while
//! the stream still runs earlier work are gathered and handed to the copy
//! engine as one batch (or, opt-in, copied by one kernel launch; see
//! `copy_batch.rs`, decisions 0054 and 0046). Once a queue has GPU work in flight, every
//! later notification on it takes the stream too, so a plain CPU store can
//! never overtake a copy still in flight. Reads are synchronous (the data is
//! in place when `read` returns): simpler, and a read's latency is that of
//! the copy anyway.
//!
//! Addresses come from the transport as a `GpuView` (`transport::GpuView`)
//! in the unified address space: a peer's GPU segment opened with CUDA IPC,
//! host segments (ours and same-host peers') registered with CUDA on first
//! use. Memory that cannot be mapped (another process's bound memory; later,
//! a network peer) is staged through a host buffer.
//!
//! # Device-driven calls
//!
//! [`DeviceContext`] packs the same views into the tables a kernel reads
//! (`gaspi_device_ctx`, see `gpu-kernels/`) and runs the server of the
//! request ring through which kernels reach targets they cannot store into.

pub(crate) mod copy_batch;
pub(crate) mod device_context;
pub(crate) mod host_driven;
pub(crate) mod network_staging;
pub(crate) mod owner_copy;
pub(crate) mod queue_stream;

pub use device_context::{DeviceContext, DeviceContextOptions, RingActivity};

pub(crate) use host_driven::Gpu;
pub(crate) use queue_stream::QueueStream;
