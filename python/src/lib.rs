//! `gaspi._gaspi`: the Rust half of the Python package `gaspi`.
//!
//! Python programs reach the runtime through two classes, `PyGaspi`
//! (`gaspi.Gaspi`, the context, with every GASPI call as a method named and
//! ordered as the Rust crate's) and `PySegment` (`gaspi.Segment`, a
//! handle that keeps the segment's memory alive). Ids, offsets and ranks are
//! plain ints; errors become the exceptions of `gaspi/_errors.py`
//! (`gaspi.Error`, `gaspi.TimeoutError`, `gaspi.PeerDeadError`).
//!
//! Why it is shaped so:
//! - **The GIL and Ctrl-C.** A blocking call runs with the GIL released
//!   (other Python threads go on) in slices of at most `SLICE`: the
//!   runtime's waits are resumable after a timeout, so between slices the
//!   call checks for signals and a Ctrl-C raises `KeyboardInterrupt`
//!   within a slice. Calls that are not resumable (segment creation, its
//!   registration and deletion, init) run on a helper thread the caller
//!   waits for in slices (`on_helper`). Calls that never wait (posting a
//!   write, `notify_reset`) keep the GIL: releasing it would cost more than
//!   the call (except copies of `DETACH_BYTES` or more).
//! - **Memory as arrays.** The stable ABI of Python 3.9 has no buffer
//!   protocol for extension types, so a host segment becomes a NumPy array
//!   through `__array_interface__` (`gaspi/_arrays.py`), which aliases the
//!   segment and holds the handle; a GPU segment becomes an object with
//!   `__cuda_array_interface__` and `__dlpack__`, whose DLPack capsule is
//!   made here (`dlpack`).
//! - **Launching.** `gaspi-run` and `python -m gaspi.run` parse their
//!   command line in Python (`gaspi/run.py`) and call `launch` and
//!   `agent`, the launchers of the `gaspi-launch` crate.

mod dlpack;

use gaspi::{Config, Gaspi, Group, ListElem, Memory, NotifyId, Queue, Rank, ReduceOp, SegId};
use nix::sys::signal::{SigSet, Signal};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyType};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// Longest stretch a blocking call waits without looking for signals.
const SLICE: Duration = Duration::from_millis(50);

/// Writes and reads of at least this many bytes release the GIL while they
/// copy (a same-host transfer is a memcpy at the call).
const DETACH_BYTES: u64 = 64 * 1024;

/// The exception classes of `gaspi._errors`, looked up once.
struct ErrorTypes {
    error: Py<PyType>,
    timeout: Py<PyType>,
    peer_dead: Py<PyType>,
}

static ERROR_TYPES: PyOnceLock<ErrorTypes> = PyOnceLock::new();

fn error_types(py: Python<'_>) -> PyResult<&ErrorTypes> {
    ERROR_TYPES.get_or_try_init(py, || {
        let m = py.import("gaspi._errors")?;
        let get = |name: &str| -> PyResult<Py<PyType>> {
            Ok(m.getattr(name)?.cast_into::<PyType>()?.unbind())
        };
        Ok(ErrorTypes {
            error: get("Error")?,
            timeout: get("TimeoutError")?,
            peer_dead: get("PeerDeadError")?,
        })
    })
}

/// The variant name of a runtime error (`OutOfBounds`, `QueueFull`, ...),
/// which Python code can test as the exception's `kind`.
fn kind_of(e: &gaspi::Error) -> String {
    format!("{e:?}")
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// A runtime error as the Python exception of its kind, with the runtime's
/// message, its `kind`, and for a dead peer its `rank`.
fn to_py(e: gaspi::Error) -> PyErr {
    Python::attach(|py| {
        let types = match error_types(py) {
            Ok(t) => t,
            Err(lookup) => return lookup,
        };
        let (ty, rank) = match &e {
            gaspi::Error::Timeout { .. } => (&types.timeout, None),
            gaspi::Error::PeerDead { rank } => (&types.peer_dead, Some(rank.0)),
            _ => (&types.error, None),
        };
        let made = ty.bind(py).call1((e.to_string(),)).and_then(|exc| {
            exc.setattr("kind", kind_of(&e))?;
            exc.setattr("rank", rank)?;
            Ok(exc)
        });
        match made {
            Ok(exc) => PyErr::from_value(exc),
            Err(err) => err,
        }
    })
}

/// A runtime result as a Python result.
fn py_ok<T>(r: gaspi::Result<T>) -> PyResult<T> {
    r.map_err(to_py)
}

/// `gaspi.Timeout`: how long a blocking call may wait, the values of the
/// Rust crate's `Timeout`. Blocking calls also take an int (milliseconds)
/// or `None` (block).
#[pyclass(
    name = "Timeout",
    module = "gaspi",
    frozen,
    eq,
    hash,
    skip_from_py_object
)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct PyTimeout {
    /// `None`: block; `Some(0)`: test once; `Some(ms)`: at most that long.
    ms: Option<u64>,
}

#[pymethods]
impl PyTimeout {
    /// Wait as long as it takes.
    #[classattr]
    const BLOCK: PyTimeout = PyTimeout { ms: None };
    /// Look once, never wait.
    #[classattr]
    const TEST: PyTimeout = PyTimeout { ms: Some(0) };

    /// Wait at most `ms` milliseconds.
    #[staticmethod]
    fn ms(ms: u64) -> PyTimeout {
        PyTimeout { ms: Some(ms) }
    }

    /// The limit in milliseconds; `None` for `BLOCK`.
    #[getter]
    fn milliseconds(&self) -> Option<u64> {
        self.ms
    }

    fn __repr__(&self) -> String {
        match self.ms {
            None => "Timeout.BLOCK".into(),
            Some(0) => "Timeout.TEST".into(),
            Some(ms) => format!("Timeout.ms({ms})"),
        }
    }
}

/// A Python timeout argument: `None` (block), a `Timeout`, or an int of
/// milliseconds (0: test).
fn timeout_arg(t: Option<&Bound<'_, PyAny>>) -> PyResult<gaspi::Timeout> {
    let Some(t) = t.filter(|t| !t.is_none()) else {
        return Ok(gaspi::Timeout::Block);
    };
    let ms = if let Ok(v) = t.cast::<PyTimeout>() {
        v.get().ms
    } else if let Ok(ms) = t.extract::<i64>() {
        Some(u64::try_from(ms).map_err(|_| {
            PyValueError::new_err(format!("a timeout of {ms} ms: it must be 0 or more"))
        })?)
    } else {
        return Err(PyTypeError::new_err(
            "timeout: expected None, a gaspi.Timeout or an int of milliseconds",
        ));
    };
    Ok(match ms {
        None => gaspi::Timeout::Block,
        Some(0) => gaspi::Timeout::Test,
        Some(ms) => gaspi::Timeout::Ms(ms),
    })
}

/// Runs `op`, a resumable runtime wait, with the GIL released, in slices of
/// at most [`SLICE`], checking for signals between them: a Ctrl-C raises
/// `KeyboardInterrupt` (the runtime's waits may be repeated after a
/// timeout, so stopping between slices leaves nothing half done).
fn sliced<T: Send>(
    py: Python<'_>,
    timeout: gaspi::Timeout,
    mut op: impl FnMut(gaspi::Timeout) -> gaspi::Result<T> + Send,
) -> PyResult<T> {
    let deadline = match timeout {
        gaspi::Timeout::Ms(ms) => Some(Instant::now() + Duration::from_millis(ms)),
        _ => None,
    };
    loop {
        let (slice, last) = match (timeout, deadline) {
            (gaspi::Timeout::Test, _) => (gaspi::Timeout::Test, true),
            (_, Some(d)) => {
                let left = d.saturating_duration_since(Instant::now());
                let slice = left.min(SLICE);
                // Whole milliseconds, rounded up: the last slice ends at
                // or after the deadline.
                let ms = slice.as_micros().div_ceil(1000) as u64;
                (gaspi::Timeout::Ms(ms), left <= SLICE)
            }
            _ => (gaspi::Timeout::Ms(SLICE.as_millis() as u64), false),
        };
        match py.detach(|| op(slice)) {
            Err(gaspi::Error::Timeout { .. }) if !last => py.check_signals()?,
            r => return py_ok(r),
        }
    }
}

/// Runs `op`, a call that cannot be stopped and resumed (it cleans up
/// after a timeout of its own), on a helper thread, and waits for it in
/// slices with the GIL released; a Ctrl-C raises `KeyboardInterrupt` at
/// once and leaves the call to finish on its thread.
fn on_helper<T: Send + 'static>(
    py: Python<'_>,
    op: impl FnOnce() -> gaspi::Result<T> + Send + 'static,
) -> PyResult<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("gaspi-python-call".into())
        .spawn(move || {
            // Signals are Python's, on its main thread: this thread, and the
            // runtime's threads it starts (init starts the progress
            // engine), which inherit its mask, never take them.
            let _ = python_signals().thread_block();
            let _ = tx.send(op());
        })
        .map_err(|e| PyRuntimeError::new_err(format!("starting a helper thread: {e}")))?;
    // A `Receiver` is not `Sync`: the mutex lets the GIL-free closure
    // borrow it (never contended).
    let rx = std::sync::Mutex::new(rx);
    loop {
        match py.detach(|| {
            rx.lock()
                .unwrap_or_else(|e| e.into_inner())
                .recv_timeout(SLICE)
        }) {
            Ok(r) => return py_ok(r),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => py.check_signals()?,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(PyRuntimeError::new_err("the runtime call panicked"))
            }
        }
    }
}

/// The signals Python handles itself (Ctrl-C, termination, timers, its
/// child processes'), which runtime threads must leave to it.
fn python_signals() -> SigSet {
    let mut set = SigSet::empty();
    for s in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGQUIT,
        Signal::SIGALRM,
        Signal::SIGUSR1,
        Signal::SIGUSR2,
        Signal::SIGCHLD,
    ] {
        set.add(s);
    }
    set
}

fn seg_id(id: u32) -> PyResult<SegId> {
    u8::try_from(id)
        .map(SegId)
        .map_err(|_| PyValueError::new_err(format!("segment id {id}: ids go up to 254")))
}

fn memory_arg(gpu: Option<u32>) -> Memory {
    gpu.map_or(Memory::Host, Memory::Gpu)
}

fn reduce_op(op: &str) -> PyResult<ReduceOp> {
    match op {
        "sum" => Ok(ReduceOp::Sum),
        "min" => Ok(ReduceOp::Min),
        "max" => Ok(ReduceOp::Max),
        _ => Err(PyValueError::new_err(format!(
            "reduction {op:?}: expected 'sum', 'min' or 'max'"
        ))),
    }
}

/// One list element from Python: a `gaspi.ListElem` or any 5-sequence
/// `(local_seg, local_offset, remote_seg, remote_offset, size)`.
fn list_elems(elems: &Bound<'_, PyAny>) -> PyResult<Vec<ListElem>> {
    let mut out = Vec::new();
    for e in elems.try_iter()? {
        let (ls, lo, rs, ro, size): (u32, u64, u32, u64, u64) = e?.extract()?;
        out.push(ListElem::new(seg_id(ls)?, lo, seg_id(rs)?, ro, size));
    }
    Ok(out)
}

/// `gaspi.Gaspi`: this rank's part in the job, made by `gaspi.init()`.
///
/// Every GASPI call is a method, with the Rust crate's name and argument
/// order. A `with` block terminates it at its end; `term()` does so
/// explicitly (later calls raise `gaspi.Error`).
#[pyclass(name = "Gaspi", module = "gaspi", frozen)]
struct PyGaspi {
    /// `None` once terminated. Calls that wait take a clone of the `Arc`
    /// and release the lock (and the GIL) while they wait.
    g: RwLock<Option<Arc<Gaspi>>>,
}

impl PyGaspi {
    /// The context for a call that does not wait (the GIL is held
    /// throughout, so `term` cannot run meanwhile).
    fn with<T>(&self, f: impl FnOnce(&Gaspi) -> gaspi::Result<T>) -> PyResult<T> {
        let g = self.g.read().unwrap_or_else(|e| e.into_inner());
        match g.as_deref() {
            Some(g) => py_ok(f(g)),
            None => Err(to_py(gaspi::Error::NotInitialized)),
        }
    }

    /// The context for a call that waits.
    fn arc(&self) -> PyResult<Arc<Gaspi>> {
        self.g
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| to_py(gaspi::Error::NotInitialized))
    }
}

#[pymethods]
impl PyGaspi {
    /// This rank (0 .. size-1).
    fn rank(&self) -> PyResult<u32> {
        self.with(|g| Ok(g.rank().0))
    }

    /// Number of ranks in the job.
    fn size(&self) -> PyResult<u32> {
        self.with(|g| Ok(g.size()))
    }

    /// Ends this rank's part in the job (tells the peers, stops the
    /// progress engine). Segments and arrays made from them stay valid.
    /// Calling it again does nothing.
    fn term(&self, py: Python<'_>) -> PyResult<()> {
        let g = self.g.write().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(g) = g {
            // The goodbyes may wait on a slow peer: without the GIL.
            py.detach(move || match Arc::try_unwrap(g) {
                Ok(g) => g.term(),
                // A call still running on a helper thread holds the last
                // reference, and terminates when it ends.
                Err(_) => Ok(()),
            })
            .map_err(to_py)?;
        }
        Ok(())
    }

    /// Whether `term()` has run.
    #[getter]
    fn terminated(&self) -> bool {
        self.g.read().unwrap_or_else(|e| e.into_inner()).is_none()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.term(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        match self.g.read().unwrap_or_else(|e| e.into_inner()).as_deref() {
            Some(g) => format!("<gaspi.Gaspi rank {} of {}>", g.rank().0, g.size()),
            None => "<gaspi.Gaspi terminated>".into(),
        }
    }

    /// The health of every rank as seen from here: a list of
    /// `'healthy'`, `'terminated'` or `'corrupt'`.
    fn state_vec(&self) -> PyResult<Vec<&'static str>> {
        self.with(|g| {
            Ok(g.state_vec()
                .into_iter()
                .map(|s| match s {
                    gaspi::RankState::Healthy => "healthy",
                    gaspi::RankState::Terminated => "terminated",
                    gaspi::RankState::Corrupt => "corrupt",
                })
                .collect())
        })
    }

    /// Name of the transport that reaches `rank` (`'shm'`, `'tcp'`,
    /// `'verbs'`, `'libfabric'`).
    fn transport(&self, rank: u32) -> PyResult<&'static str> {
        self.with(|g| g.transport(Rank(rank)))
    }

    /// Checks that `rank` is alive and answering, within `timeout`.
    #[pyo3(signature = (rank, timeout = None))]
    fn proc_ping(
        &self,
        py: Python<'_>,
        rank: u32,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let g = self.arc()?;
        sliced(py, timeout_arg(timeout)?, |t| g.proc_ping(Rank(rank), t))
    }

    /// Stops another rank (it exits at once, as if killed).
    fn proc_kill(&self, rank: u32) -> PyResult<()> {
        self.with(|g| g.proc_kill(Rank(rank)))
    }

    // ----- segments -----

    /// Allocates segment `id` of `nbytes` bytes (zeroed), in host memory
    /// or, with `gpu=N`, in the memory of GPU N, registers it with every
    /// member of `group` and waits for them at a barrier of the group:
    /// on return every member can write into every member's segment `id`.
    #[pyo3(signature = (id, nbytes, gpu = None, group = 0, timeout = None))]
    fn segment_create(
        &self,
        py: Python<'_>,
        id: u32,
        nbytes: u64,
        gpu: Option<u32>,
        group: u32,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PySegment> {
        let g = self.arc()?;
        let (seg, timeout) = (seg_id(id)?, timeout_arg(timeout)?);
        let s = on_helper(py, move || {
            g.segment_create(seg, nbytes, memory_arg(gpu), Group(group), timeout)
        })?;
        Ok(PySegment { seg: s })
    }

    /// Allocates segment `id` on this rank only (not yet registered with
    /// any peer; see `segment_register`).
    #[pyo3(signature = (id, nbytes, gpu = None))]
    fn segment_alloc(&self, id: u32, nbytes: u64, gpu: Option<u32>) -> PyResult<PySegment> {
        let seg = seg_id(id)?;
        let s = self.with(|g| g.segment_alloc(seg, nbytes, memory_arg(gpu)))?;
        Ok(PySegment { seg: s })
    }

    /// Makes this rank's segment `id` known to `rank`, which may then
    /// write into it and read from it.
    #[pyo3(signature = (id, rank, timeout = None))]
    fn segment_register(
        &self,
        py: Python<'_>,
        id: u32,
        rank: u32,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let g = self.arc()?;
        let (seg, timeout) = (seg_id(id)?, timeout_arg(timeout)?);
        on_helper(py, move || g.segment_register(seg, Rank(rank), timeout))
    }

    /// Deletes segment `id` of this rank and waits until every live peer
    /// has forgotten it. Its memory is freed once no `Segment` (or array
    /// made from one) refers to it.
    fn segment_delete(&self, py: Python<'_>, id: u32) -> PyResult<()> {
        let g = self.arc()?;
        let seg = seg_id(id)?;
        on_helper(py, move || g.segment_delete(seg))
    }

    /// A handle to this rank's segment `id`.
    fn segment(&self, id: u32) -> PyResult<PySegment> {
        let seg = seg_id(id)?;
        Ok(PySegment {
            seg: self.with(|g| g.segment(seg))?,
        })
    }

    /// Size in bytes of this rank's segment `id`.
    fn segment_size(&self, id: u32) -> PyResult<u64> {
        let seg = seg_id(id)?;
        self.with(|g| g.segment_size(seg))
    }

    /// Size in bytes of segment `id` of `rank`, once `rank` registered it
    /// with this rank (or created it in a group with it).
    fn segment_size_of(&self, rank: u32, id: u32) -> PyResult<u64> {
        let seg = seg_id(id)?;
        self.with(|g| g.segment_size_of(Rank(rank), seg))
    }

    /// Ids of this rank's segments, ascending.
    fn segment_list(&self) -> PyResult<Vec<u8>> {
        self.with(|g| Ok(g.segment_list().into_iter().map(|s| s.0).collect()))
    }

    // ----- one-sided communication -----

    /// Posts a write of `size` bytes from this rank's segment `local_seg`
    /// at `local_offset` to segment `remote_seg` of `rank` at
    /// `remote_offset`, on `queue`. `wait(queue)` completes it locally.
    #[pyo3(signature = (local_seg, local_offset, rank, remote_seg, remote_offset, size, queue = 0))]
    #[allow(clippy::too_many_arguments)] // GASPI's signature, argument for argument
    fn write(
        &self,
        py: Python<'_>,
        local_seg: u32,
        local_offset: u64,
        rank: u32,
        remote_seg: u32,
        remote_offset: u64,
        size: u64,
        queue: u32,
    ) -> PyResult<()> {
        let (ls, rs) = (seg_id(local_seg)?, seg_id(remote_seg)?);
        let post = |g: &Gaspi| {
            g.write(
                ls,
                local_offset,
                Rank(rank),
                rs,
                remote_offset,
                size,
                Queue(queue),
            )
        };
        if size >= DETACH_BYTES {
            let g = self.arc()?;
            return py_ok(py.detach(|| post(&g)));
        }
        self.with(post)
    }

    /// Posts a write as `write` does, then sets notification
    /// `notification` of `remote_seg` at `rank` to `value` (not 0). The
    /// peer sees the notification only after the data.
    #[pyo3(signature = (local_seg, local_offset, rank, remote_seg, remote_offset, size, notification, value, queue = 0))]
    #[allow(clippy::too_many_arguments)] // GASPI's signature, argument for argument
    fn write_notify(
        &self,
        py: Python<'_>,
        local_seg: u32,
        local_offset: u64,
        rank: u32,
        remote_seg: u32,
        remote_offset: u64,
        size: u64,
        notification: u32,
        value: u32,
        queue: u32,
    ) -> PyResult<()> {
        let (ls, rs) = (seg_id(local_seg)?, seg_id(remote_seg)?);
        let post = |g: &Gaspi| {
            g.write_notify(
                ls,
                local_offset,
                Rank(rank),
                rs,
                remote_offset,
                size,
                NotifyId(notification),
                value,
                Queue(queue),
            )
        };
        if size >= DETACH_BYTES {
            let g = self.arc()?;
            return py_ok(py.detach(|| post(&g)));
        }
        self.with(post)
    }

    /// Posts a read of `size` bytes from segment `remote_seg` of `rank` at
    /// `remote_offset` into this rank's `local_seg` at `local_offset`;
    /// the data is there after `wait(queue)`.
    #[pyo3(signature = (local_seg, local_offset, rank, remote_seg, remote_offset, size, queue = 0))]
    #[allow(clippy::too_many_arguments)] // GASPI's signature, argument for argument
    fn read(
        &self,
        py: Python<'_>,
        local_seg: u32,
        local_offset: u64,
        rank: u32,
        remote_seg: u32,
        remote_offset: u64,
        size: u64,
        queue: u32,
    ) -> PyResult<()> {
        let (ls, rs) = (seg_id(local_seg)?, seg_id(remote_seg)?);
        let post = |g: &Gaspi| {
            g.read(
                ls,
                local_offset,
                Rank(rank),
                rs,
                remote_offset,
                size,
                Queue(queue),
            )
        };
        if size >= DETACH_BYTES {
            let g = self.arc()?;
            return py_ok(py.detach(|| post(&g)));
        }
        self.with(post)
    }

    /// Posts a read as `read` does, then sets this rank's notification
    /// `notification` of `local_seg` to 1 once the data has landed.
    #[pyo3(signature = (local_seg, local_offset, rank, remote_seg, remote_offset, size, notification, queue = 0))]
    #[allow(clippy::too_many_arguments)] // GASPI's signature, argument for argument
    fn read_notify(
        &self,
        local_seg: u32,
        local_offset: u64,
        rank: u32,
        remote_seg: u32,
        remote_offset: u64,
        size: u64,
        notification: u32,
        queue: u32,
    ) -> PyResult<()> {
        let (ls, rs) = (seg_id(local_seg)?, seg_id(remote_seg)?);
        self.with(|g| {
            g.read_notify(
                ls,
                local_offset,
                Rank(rank),
                rs,
                remote_offset,
                size,
                NotifyId(notification),
                Queue(queue),
            )
        })
    }

    /// Posts a notification of `value` at `notification` of `remote_seg`
    /// of `rank`; it does not overtake writes posted before it on the same
    /// queue to the same rank.
    #[pyo3(signature = (rank, remote_seg, notification, value, queue = 0))]
    fn notify(
        &self,
        rank: u32,
        remote_seg: u32,
        notification: u32,
        value: u32,
        queue: u32,
    ) -> PyResult<()> {
        let rs = seg_id(remote_seg)?;
        self.with(|g| g.notify(Rank(rank), rs, NotifyId(notification), value, Queue(queue)))
    }

    /// Waits until every request posted on `queue` is complete locally
    /// (its source may be reused, a read's data is there).
    #[pyo3(signature = (queue = 0, timeout = None))]
    fn wait(&self, py: Python<'_>, queue: u32, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let g = self.arc()?;
        sliced(py, timeout_arg(timeout)?, |t| g.wait(Queue(queue), t))
    }

    /// Requests posted on `queue` since its last `wait`.
    fn queue_size(&self, queue: u32) -> PyResult<u32> {
        self.with(|g| g.queue_size(Queue(queue)))
    }

    /// Number of queues in use.
    fn queue_num(&self) -> PyResult<u32> {
        self.with(|g| Ok(g.queue_num()))
    }

    /// Most queues that may exist at once.
    fn queue_max(&self) -> PyResult<u32> {
        self.with(|g| Ok(g.queue_max()))
    }

    /// Creates a queue and returns its id.
    fn queue_create(&self) -> PyResult<u32> {
        self.with(|g| g.queue_create().map(|q| q.0))
    }

    /// Deletes an empty queue.
    fn queue_delete(&self, queue: u32) -> PyResult<()> {
        self.with(|g| g.queue_delete(Queue(queue)))
    }

    // ----- lists -----

    /// Posts the writes of every element of `elems` (each a `ListElem` or
    /// a tuple `(local_seg, local_offset, remote_seg, remote_offset,
    /// size)`) to `rank`.
    #[pyo3(signature = (elems, rank, queue = 0))]
    fn write_list(&self, elems: &Bound<'_, PyAny>, rank: u32, queue: u32) -> PyResult<()> {
        let elems = list_elems(elems)?;
        self.with(|g| g.write_list(&elems, Rank(rank), Queue(queue)))
    }

    /// Posts the reads of every element of `elems` from `rank`.
    #[pyo3(signature = (elems, rank, queue = 0))]
    fn read_list(&self, elems: &Bound<'_, PyAny>, rank: u32, queue: u32) -> PyResult<()> {
        let elems = list_elems(elems)?;
        self.with(|g| g.read_list(&elems, Rank(rank), Queue(queue)))
    }

    /// Posts the writes of every element, then sets notification
    /// `notification` of segment `notify_seg` of `rank` to `value`,
    /// visible only after every element's data.
    #[pyo3(signature = (elems, rank, notify_seg, notification, value, queue = 0))]
    fn write_list_notify(
        &self,
        elems: &Bound<'_, PyAny>,
        rank: u32,
        notify_seg: u32,
        notification: u32,
        value: u32,
        queue: u32,
    ) -> PyResult<()> {
        let elems = list_elems(elems)?;
        let ns = seg_id(notify_seg)?;
        self.with(|g| {
            g.write_list_notify(
                &elems,
                Rank(rank),
                ns,
                NotifyId(notification),
                value,
                Queue(queue),
            )
        })
    }

    /// Posts the reads of every element, then sets this rank's
    /// notification `notification` of `notify_seg` to 1 once all landed.
    #[pyo3(signature = (elems, rank, notify_seg, notification, queue = 0))]
    fn read_list_notify(
        &self,
        elems: &Bound<'_, PyAny>,
        rank: u32,
        notify_seg: u32,
        notification: u32,
        queue: u32,
    ) -> PyResult<()> {
        let elems = list_elems(elems)?;
        let ns = seg_id(notify_seg)?;
        self.with(|g| {
            g.read_list_notify(&elems, Rank(rank), ns, NotifyId(notification), Queue(queue))
        })
    }

    // ----- notifications -----

    /// Waits until one of notifications `begin .. begin+num` of this
    /// rank's segment `seg` is set and returns the first such id
    /// (`gaspi.TimeoutError` when none is within `timeout`).
    #[pyo3(signature = (seg, begin, num, timeout = None))]
    fn notify_waitsome(
        &self,
        py: Python<'_>,
        seg: u32,
        begin: u32,
        num: u32,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<u32> {
        let g = self.arc()?;
        let seg = seg_id(seg)?;
        sliced(py, timeout_arg(timeout)?, |t| {
            g.notify_waitsome(seg, NotifyId(begin), num, t)
                .map(|id| id.0)
        })
    }

    /// Atomically reads and clears notification `id` of this rank's
    /// segment `seg`; returns the value it had (0: it was not set).
    fn notify_reset(&self, seg: u32, id: u32) -> PyResult<u32> {
        let seg = seg_id(seg)?;
        self.with(|g| g.notify_reset(seg, NotifyId(id)))
    }

    // ----- atomics -----

    /// Adds `value` (wrapping, u64) to the 8-byte aligned word at `offset`
    /// of segment `seg` of `rank`; returns the value it had.
    #[pyo3(signature = (seg, offset, rank, value, timeout = None))]
    fn atomic_fetch_add(
        &self,
        py: Python<'_>,
        seg: u32,
        offset: u64,
        rank: u32,
        value: u64,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<u64> {
        let g = self.arc()?;
        let seg = seg_id(seg)?;
        // A timed-out call is adopted by the next with the same arguments
        // (the runtime's rule), so slices add `value` once.
        sliced(py, timeout_arg(timeout)?, |t| {
            g.atomic_fetch_add(seg, offset, Rank(rank), value, t)
        })
    }

    /// Stores `new` into the word at `offset` of segment `seg` of `rank`
    /// if it equals `comparator`; returns the value it had.
    #[pyo3(signature = (seg, offset, rank, comparator, new, timeout = None))]
    #[allow(clippy::too_many_arguments)] // GASPI's signature, argument for argument
    fn atomic_compare_swap(
        &self,
        py: Python<'_>,
        seg: u32,
        offset: u64,
        rank: u32,
        comparator: u64,
        new: u64,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<u64> {
        let g = self.arc()?;
        let seg = seg_id(seg)?;
        sliced(py, timeout_arg(timeout)?, |t| {
            g.atomic_compare_swap(seg, offset, Rank(rank), comparator, new, t)
        })
    }

    // ----- passive messages -----

    /// Sends `size` bytes (1 to 65,535) of this rank's segment `seg` at
    /// `offset` to `rank`, which takes them with `passive_receive`.
    #[pyo3(signature = (seg, offset, rank, size, timeout = None))]
    fn passive_send(
        &self,
        py: Python<'_>,
        seg: u32,
        offset: u64,
        rank: u32,
        size: u64,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let g = self.arc()?;
        let seg = seg_id(seg)?;
        sliced(py, timeout_arg(timeout)?, |t| {
            g.passive_send(seg, offset, Rank(rank), size, t)
        })
    }

    /// Waits for the oldest passive message, copies it into this rank's
    /// segment `seg` at `offset`; returns `(sender, size)`.
    #[pyo3(signature = (seg, offset, timeout = None))]
    fn passive_receive(
        &self,
        py: Python<'_>,
        seg: u32,
        offset: u64,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<(u32, u64)> {
        let g = self.arc()?;
        let seg = seg_id(seg)?;
        sliced(py, timeout_arg(timeout)?, |t| {
            g.passive_receive(seg, offset, t).map(|(r, n)| (r.0, n))
        })
    }

    // ----- groups and collectives -----

    /// Creates an empty, uncommitted group and returns its id.
    fn group_create(&self) -> PyResult<u32> {
        self.with(|g| g.group_create().map(|g| g.0))
    }

    /// Adds `rank` to an uncommitted group.
    fn group_add(&self, group: u32, rank: u32) -> PyResult<()> {
        self.with(|g| g.group_add(Group(group), Rank(rank)))
    }

    /// Commits `group`: every member calls it with the same members.
    #[pyo3(signature = (group, timeout = None))]
    fn group_commit(
        &self,
        py: Python<'_>,
        group: u32,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let g = self.arc()?;
        sliced(py, timeout_arg(timeout)?, |t| {
            g.group_commit(Group(group), t)
        })
    }

    /// Deletes a group (not `GROUP_ALL`).
    fn group_delete(&self, group: u32) -> PyResult<()> {
        self.with(|g| g.group_delete(Group(group)))
    }

    /// Number of members of `group`.
    fn group_size(&self, group: u32) -> PyResult<u32> {
        self.with(|g| g.group_size(Group(group)))
    }

    /// The members of `group`, ascending.
    fn group_ranks(&self, group: u32) -> PyResult<Vec<u32>> {
        self.with(|g| {
            Ok(g.group_ranks(Group(group))?
                .into_iter()
                .map(|r| r.0)
                .collect())
        })
    }

    /// Waits until every member of `group` has called `barrier`.
    #[pyo3(signature = (group = 0, timeout = None))]
    fn barrier(
        &self,
        py: Python<'_>,
        group: u32,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let g = self.arc()?;
        sliced(py, timeout_arg(timeout)?, |t| g.barrier(Group(group), t))
    }

    /// Reduces `send` (a NumPy array of int32, uint32, int64, uint64,
    /// float32 or float64, at most 255 elements by default) of every
    /// member of `group` element-wise with `op` (`'sum'`, `'min'`,
    /// `'max'`); returns the result, a new array of the same shape and
    /// dtype, on every member.
    #[pyo3(signature = (send, op = "sum", group = 0, timeout = None))]
    fn allreduce<'py>(
        &self,
        py: Python<'py>,
        send: &Bound<'py, PyAny>,
        op: &str,
        group: u32,
        timeout: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let op = reduce_op(op)?;
        let timeout = timeout_arg(timeout)?;
        let arrays = py.import("gaspi._arrays")?;
        let (bytes, code): (Vec<u8>, String) =
            arrays.call_method1("reduction_input", (send,))?.extract()?;
        let g = self.arc()?;
        let mut recv = vec![0u8; bytes.len()];
        macro_rules! reduce {
            ($t:ty) => {{
                const W: usize = std::mem::size_of::<$t>();
                let n = bytes.len() / W;
                let s: Vec<$t> = (0..n)
                    .map(|i| {
                        let mut b = [0u8; W];
                        b.copy_from_slice(&bytes[i * W..(i + 1) * W]);
                        <$t>::from_ne_bytes(b)
                    })
                    .collect();
                let mut r = vec![<$t>::default(); n];
                sliced(py, timeout, |t| {
                    g.allreduce(&s, &mut r, op, Group(group), t)
                })?;
                for (i, v) in r.iter().enumerate() {
                    recv[i * W..(i + 1) * W].copy_from_slice(&v.to_ne_bytes());
                }
            }};
        }
        match code.as_str() {
            "i4" => reduce!(i32),
            "u4" => reduce!(u32),
            "i8" => reduce!(i64),
            "u8" => reduce!(u64),
            "f4" => reduce!(f32),
            "f8" => reduce!(f64),
            other => {
                return Err(PyTypeError::new_err(format!(
                    "allreduce of dtype {other:?}: int32, uint32, int64, uint64, float32 or float64"
                )))
            }
        }
        arrays.call_method1("reduction_output", (PyBytes::new(py, &recv), send))
    }
}

/// `gaspi.Segment`: a handle to a segment of this rank. Its memory stays
/// valid while the handle (or an array made from it) exists, also after
/// `segment_delete` and `term`.
#[pyclass(name = "Segment", module = "gaspi", frozen)]
struct PySegment {
    seg: gaspi::Segment,
}

#[pymethods]
impl PySegment {
    /// The segment's id.
    #[getter]
    fn id(&self) -> u8 {
        self.seg.id().0
    }

    /// Size in bytes.
    #[getter]
    fn size(&self) -> usize {
        self.seg.size()
    }

    /// The GPU whose memory holds the segment, `None` for host memory.
    #[getter]
    fn gpu(&self) -> Option<u32> {
        match self.seg.memory() {
            Memory::Gpu(d) => Some(d),
            Memory::Host => None,
        }
    }

    /// Address of the segment's first byte (a device address for a GPU
    /// segment).
    #[getter]
    fn ptr(&self) -> usize {
        self.seg.as_ptr() as usize
    }

    /// The segment's memory from byte `offset` as `count` elements of
    /// `dtype` (default: as many as fit), without a copy: for a host
    /// segment a NumPy array, for a GPU segment an object that
    /// `torch.from_dlpack`, `cupy.from_dlpack` and
    /// `__cuda_array_interface__` consumers take. What peers write into
    /// the segment is seen in the array.
    #[pyo3(signature = (dtype = None, offset = 0, count = None))]
    fn array<'py>(
        slf: &Bound<'py, Self>,
        dtype: Option<&Bound<'py, PyAny>>,
        offset: usize,
        count: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let me = slf.get();
        let arrays = py.import("gaspi._arrays")?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("gpu", me.gpu())?;
        arrays.call_method(
            "segment_array",
            (slf, me.ptr(), me.size(), dtype, offset, count),
            Some(&kwargs),
        )
    }

    /// Copies `data` (bytes) into the segment at byte `offset` (host or
    /// GPU memory).
    fn write_bytes(&self, py: Python<'_>, offset: usize, data: &[u8]) -> PyResult<()> {
        py_ok(py.detach(|| self.seg.write(offset, data)))
    }

    /// Copies `nbytes` bytes from the segment at byte `offset` (host or
    /// GPU memory).
    fn read_bytes<'py>(
        &self,
        py: Python<'py>,
        offset: usize,
        nbytes: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let v = py_ok(py.detach(|| self.seg.read_vec::<u8>(offset, nbytes)))?;
        Ok(PyBytes::new(py, &v))
    }

    fn __len__(&self) -> usize {
        self.seg.size()
    }

    fn __repr__(&self) -> String {
        match self.seg.memory() {
            Memory::Host => format!(
                "<gaspi.Segment {} of {} bytes, host>",
                self.id(),
                self.size()
            ),
            Memory::Gpu(d) => format!(
                "<gaspi.Segment {} of {} bytes, GPU {d}>",
                self.id(),
                self.size()
            ),
        }
    }
}

/// `gaspi.init(...)`: starts this rank, under `gaspi-run`, `mpirun`,
/// `srun`, or alone as a job of one. Keyword arguments change the
/// configuration read from the `GASPI_*` variables.
#[pyfunction]
#[pyo3(signature = (*, queue_num = None, queue_size_max = None, notification_num = None, segment_max = None, transfer_size_max = None, init_timeout_ms = None, peer_timeout_ms = None))]
#[allow(clippy::too_many_arguments)] // one keyword per setting
fn init(
    py: Python<'_>,
    queue_num: Option<u32>,
    queue_size_max: Option<u32>,
    notification_num: Option<u32>,
    segment_max: Option<u32>,
    transfer_size_max: Option<u64>,
    init_timeout_ms: Option<u64>,
    peer_timeout_ms: Option<u64>,
) -> PyResult<PyGaspi> {
    gaspi_launch::init_logging();
    let mut c = py_ok(Config::from_env())?;
    if let Some(n) = queue_num {
        c = c.queue_num(n);
    }
    if let Some(n) = queue_size_max {
        c = c.queue_size_max(n);
    }
    if let Some(n) = notification_num {
        c = c.notification_num(n);
    }
    if let Some(n) = segment_max {
        c = c.segment_max(n);
    }
    if let Some(n) = transfer_size_max {
        c = c.transfer_size_max(n);
    }
    if let Some(ms) = init_timeout_ms {
        c = c.init_timeout(Duration::from_millis(ms));
    }
    if let Some(ms) = peer_timeout_ms {
        c = c.peer_timeout(Duration::from_millis(ms));
    }
    let g = on_helper(py, move || Gaspi::init(c))?;
    Ok(PyGaspi {
        g: RwLock::new(Some(Arc::new(g))),
    })
}

/// Runs a job of `ranks` copies of `program args` on this host or, with
/// `hostfile`, on its hosts over ssh; returns the job's exit code (that of
/// the rank that failed first). The launcher of `gaspi-run`.
#[pyfunction]
#[pyo3(signature = (ranks, program, args, tag_output = false, keep_going = false, timeout_s = None, env = Vec::new(), hostfile = None))]
#[allow(clippy::too_many_arguments)] // one keyword per option of gaspi-run
fn launch(
    py: Python<'_>,
    ranks: u32,
    program: std::path::PathBuf,
    args: Vec<std::ffi::OsString>,
    tag_output: bool,
    keep_going: bool,
    timeout_s: Option<u64>,
    env: Vec<(String, String)>,
    hostfile: Option<std::path::PathBuf>,
) -> PyResult<i32> {
    let launch_err = |e: gaspi_launch::Error| PyRuntimeError::new_err(e.to_string());
    let mut opts = gaspi_launch::LaunchOptions::new(ranks, program);
    opts.args = args;
    opts.tag_output = tag_output;
    opts.keep_going = keep_going;
    opts.timeout = timeout_s.map(Duration::from_secs);
    opts.env = env;
    if let Some(path) = hostfile {
        let hosts = gaspi_launch::read_hostfile(&path).map_err(launch_err)?;
        // A hostfile of this host alone starts the ranks here, without ssh.
        if !hosts
            .iter()
            .all(|h| gaspi_launch::is_this_host(h.address()))
        {
            opts.hosts = hosts;
        }
    }
    // The launcher handles SIGINT itself (it stops every rank and returns).
    py.detach(|| gaspi_launch::launch(&opts))
        .map_err(launch_err)
}

/// The number of slots of a hostfile (its default number of ranks).
#[pyfunction]
fn hostfile_slots(path: std::path::PathBuf) -> PyResult<u32> {
    let hosts =
        gaspi_launch::read_hostfile(&path).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    Ok(hosts.iter().map(|h| h.slots).sum())
}

/// The remote half of a multi-host job (`gaspi-run --agent`), which ssh
/// starts on each host; returns the rank's exit code.
#[pyfunction]
#[pyo3(signature = (program, args, wdir = None, rendezvous_host = None))]
fn agent(
    py: Python<'_>,
    program: std::ffi::OsString,
    args: Vec<std::ffi::OsString>,
    wdir: Option<std::path::PathBuf>,
    rendezvous_host: Option<String>,
) -> PyResult<i32> {
    let opts = gaspi_launch::AgentOptions {
        wdir,
        rendezvous_host,
        program,
        args,
    };
    py.detach(|| gaspi_launch::agent(&opts))
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// The Rust half of the package `gaspi`.
#[pymodule]
fn _gaspi(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyGaspi>()?;
    m.add_class::<PySegment>()?;
    m.add_class::<PyTimeout>()?;
    m.add_function(wrap_pyfunction!(init, m)?)?;
    m.add_function(wrap_pyfunction!(launch, m)?)?;
    m.add_function(wrap_pyfunction!(agent, m)?)?;
    m.add_function(wrap_pyfunction!(hostfile_slots, m)?)?;
    m.add_function(wrap_pyfunction!(dlpack::dlpack_capsule, m)?)?;
    m.add("ALLREDUCE_ELEM_MAX", gaspi::ALLREDUCE_ELEM_MAX)?;
    m.add("PASSIVE_MAX", gaspi::PASSIVE_MAX)?;
    Ok(())
}
