//! The verbs objects the transport uses, each wrapped once: an opened
//! device with its protection domain and completion channel, a memory
//! registration, a reliable-connected queue pair with its own completion
//! queue, and the work requests posted on it.
//!
//! This is the only file that touches `rdma_sys` (the raw binding); the
//! rest of the transport sees owning handles whose `Drop` releases the
//! object, and `Result`s. Ownership ties them together the way
//! rust-ibverbs does with lifetimes, but with `Arc`s, because segments and
//! queue pairs live in shared tables: a [`MemoryRegion`] and a
//! [`QueuePair`] hold an `Arc<Device>`, so the protection domain and the
//! context outlive every object made from them.

use crate::model::error::{Error, Result};
use rdma_sys::*;
use std::ffi::CStr;
use std::os::raw::c_int;
use std::ptr;

fn verbs_error(what: &str) -> Error {
    Error::Verbs(format!("{what}: {}", std::io::Error::last_os_error()))
}

fn check_rc(what: &str, rc: c_int) -> Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        // Verbs calls return the errno value (or -1 and set errno).
        let e = if rc > 0 {
            std::io::Error::from_raw_os_error(rc)
        } else {
            std::io::Error::last_os_error()
        };
        Err(Error::Verbs(format!("{what}: {e}")))
    }
}

/// Where this rank's device is reached on the fabric.
#[derive(Debug, Clone)]
pub(crate) struct PortInfo {
    pub device: String,
    pub port: u8,
    pub lid: u16,
    /// InfiniBand (`false`: the address is the LID) or Ethernet (RoCE:
    /// the address is the GID at `gid_index`).
    pub ethernet: bool,
    pub gid_index: u8,
    pub gid: [u8; 16],
    pub mtu: u32,
    pub max_qp_wr: u32,
    /// Most RDMA READs / atomics one QP may have in flight as initiator
    /// and as target.
    pub max_rd_atomic: u8,
}

/// An opened device: context, protection domain, completion channel.
#[derive(Debug)]
pub(crate) struct Device {
    ctx: *mut ibv_context,
    pd: *mut ibv_pd,
    channel: *mut ibv_comp_channel,
    pub port: PortInfo,
}

// SAFETY: libibverbs objects are thread-safe (the library and providers
// lock internally, rdma-core's documented guarantee for the verbs API);
// the pointers are only released in Drop, when no other handle is left.
unsafe impl Send for Device {}
// SAFETY: see Send.
unsafe impl Sync for Device {}

/// Names of the RDMA devices the library sees (empty without any).
pub(crate) fn device_names() -> Vec<String> {
    let mut n: c_int = 0;
    // SAFETY: ibv_get_device_list writes the count and returns a
    // NULL-terminated array (or NULL), freed below.
    let list = unsafe { ibv_get_device_list(&mut n) };
    if list.is_null() {
        return Vec::new();
    }
    let mut names = Vec::new();
    for i in 0..n.max(0) as usize {
        // SAFETY: i < n entries of the list; each device has a NUL-ended name.
        let name = unsafe { CStr::from_ptr(ibv_get_device_name(*list.add(i))) };
        names.push(name.to_string_lossy().into_owned());
    }
    // SAFETY: the list came from ibv_get_device_list, freed once.
    unsafe { ibv_free_device_list(list) };
    names
}

impl Device {
    /// Opens device `name` (the first one the library lists when `None`)
    /// on `port`, with `gid_index` on Ethernet ports (`None`: the first
    /// RoCE v2 GID, preferring an IPv4-mapped one, read from sysfs).
    pub fn open(name: Option<&str>, port: u8, gid_index: Option<u8>) -> Result<Device> {
        let mut n: c_int = 0;
        // SAFETY: as in device_names.
        let list = unsafe { ibv_get_device_list(&mut n) };
        if list.is_null() || n == 0 {
            if !list.is_null() {
                // SAFETY: freed once.
                unsafe { ibv_free_device_list(list) };
            }
            return Err(Error::Verbs("no RDMA device".into()));
        }
        let mut chosen = None;
        for i in 0..n as usize {
            // SAFETY: i < n.
            let dev = unsafe { *list.add(i) };
            // SAFETY: a listed device has a NUL-ended name.
            let dname = unsafe { CStr::from_ptr(ibv_get_device_name(dev)) }
                .to_string_lossy()
                .into_owned();
            if name.is_none_or(|w| w == dname) {
                chosen = Some((dev, dname));
                break;
            }
        }
        let Some((dev, dname)) = chosen else {
            // SAFETY: freed once.
            unsafe { ibv_free_device_list(list) };
            return Err(Error::Verbs(format!(
                "no RDMA device named {:?} (have: {})",
                name.unwrap_or(""),
                device_names().join(", ")
            )));
        };
        // SAFETY: dev is an entry of the live list; the context stays valid
        // after the list is freed (documented by libibverbs).
        let ctx = unsafe { ibv_open_device(dev) };
        // SAFETY: freed once, after the open.
        unsafe { ibv_free_device_list(list) };
        if ctx.is_null() {
            return Err(verbs_error(&format!("opening {dname}")));
        }
        // From here on, Drop releases what was made.
        let mut device = Device {
            ctx,
            pd: ptr::null_mut(),
            channel: ptr::null_mut(),
            port: PortInfo {
                device: dname.clone(),
                port,
                lid: 0,
                ethernet: false,
                gid_index: 0,
                gid: [0; 16],
                mtu: 1024,
                max_qp_wr: 0,
                max_rd_atomic: 1,
            },
        };
        // SAFETY: a zeroed ibv_port_attr is a valid out-parameter.
        let mut pattr: ibv_port_attr = unsafe { std::mem::zeroed() };
        // SAFETY: ctx is open; pattr is a valid ibv_port_attr.
        check_rc("querying the port", unsafe {
            ___ibv_query_port(ctx, port, &mut pattr)
        })?;
        if pattr.state != ibv_port_state::IBV_PORT_ACTIVE {
            return Err(Error::Verbs(format!(
                "{dname} port {port} is not active (state {})",
                pattr.state
            )));
        }
        // SAFETY: a zeroed ibv_device_attr is a valid out-parameter.
        let mut dattr: ibv_device_attr = unsafe { std::mem::zeroed() };
        // SAFETY: ctx is open; dattr is valid.
        check_rc("querying the device", unsafe {
            ibv_query_device(ctx, &mut dattr)
        })?;
        // IBV_LINK_LAYER_ETHERNET, a #define the binding does not carry.
        const LINK_LAYER_ETHERNET: u8 = 2;
        let ethernet = pattr.link_layer == LINK_LAYER_ETHERNET;
        let gid_index = if ethernet {
            gid_index.unwrap_or_else(|| default_gid_index(&dname, port))
        } else {
            gid_index.unwrap_or(0)
        };
        // SAFETY: a zeroed ibv_gid is valid (plain bytes).
        let mut gid: ibv_gid = unsafe { std::mem::zeroed() };
        // SAFETY: ctx is open; gid is a valid out-parameter.
        check_rc("querying the GID", unsafe {
            ibv_query_gid(ctx, port, gid_index as c_int, &mut gid)
        })?;
        device.port.lid = pattr.lid;
        device.port.ethernet = ethernet;
        device.port.gid_index = gid_index;
        // SAFETY: both members of the union are plain bytes.
        device.port.gid = unsafe { gid.raw };
        device.port.mtu = pattr.active_mtu;
        device.port.max_qp_wr = dattr.max_qp_wr.max(1) as u32;
        device.port.max_rd_atomic = dattr
            .max_qp_rd_atom
            .min(dattr.max_qp_init_rd_atom)
            .clamp(1, 16) as u8;
        if ethernet && device.port.gid == [0; 16] {
            return Err(Error::Verbs(format!(
                "{dname} port {port}: GID index {gid_index} is empty (set GASPI_NET_GID_INDEX)"
            )));
        }
        // SAFETY: ctx is open.
        device.pd = unsafe { ibv_alloc_pd(ctx) };
        if device.pd.is_null() {
            return Err(verbs_error("allocating a protection domain"));
        }
        // SAFETY: ctx is open.
        device.channel = unsafe { ibv_create_comp_channel(ctx) };
        if device.channel.is_null() {
            return Err(verbs_error("creating a completion channel"));
        }
        // The completion thread polls the channel's descriptor with a
        // timeout, so that it notices the end of the rank.
        // SAFETY: channel is valid; fd is its descriptor.
        let fd = unsafe { (*device.channel).fd };
        // SAFETY: fcntl on a descriptor we own through the channel.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        // SAFETY: as above.
        if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
            return Err(verbs_error("making the completion channel non-blocking"));
        }
        Ok(device)
    }

    /// The completion channel's file descriptor (readable when a CQ armed
    /// on it has a new completion).
    pub fn channel_fd(&self) -> c_int {
        // SAFETY: the channel lives as long as self.
        unsafe { (*self.channel).fd }
    }

    /// Takes one completion event off the channel, if any, acknowledges
    /// it and re-arms its CQ; returns whether there was one.
    pub fn take_event(&self) -> bool {
        let mut cq: *mut ibv_cq = ptr::null_mut();
        let mut cq_ctx: *mut std::ffi::c_void = ptr::null_mut();
        // SAFETY: the channel is non-blocking; on success cq is a CQ of
        // this context armed on it (a QueuePair's, alive while events for
        // it can come: a QueuePair acks and drains before it is dropped
        // only at the end of the rank).
        let rc = unsafe { ibv_get_cq_event(self.channel, &mut cq, &mut cq_ctx) };
        if rc != 0 {
            return false;
        }
        // SAFETY: cq came from the event just taken.
        unsafe {
            ibv_ack_cq_events(cq, 1);
            ibv_req_notify_cq(cq, 0);
        }
        true
    }
}

/// The GID index RoCE v2 traffic should use when none is configured: the
/// first "RoCE v2" entry of the port's table with an IPv4-mapped address
/// (routable over IPv4 networks), else the first RoCE v2 entry, else 0.
fn default_gid_index(device: &str, port: u8) -> u8 {
    let base = format!("/sys/class/infiniband/{device}/ports/{port}");
    let mut first_v2 = None;
    for i in 0..=255u32 {
        let ty = std::fs::read_to_string(format!("{base}/gid_attrs/types/{i}"));
        let gid = std::fs::read_to_string(format!("{base}/gids/{i}"));
        let (Ok(ty), Ok(gid)) = (ty, gid) else {
            break;
        };
        let gid = gid.trim();
        if !ty.contains("v2") || gid.chars().all(|c| c == '0' || c == ':') {
            continue;
        }
        if gid.starts_with("0000:0000:0000:0000:0000:ffff:") {
            return i as u8;
        }
        first_v2.get_or_insert(i as u8);
    }
    first_v2.unwrap_or(0)
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: every object made from this device holds an Arc to it,
        // so none is left; each pointer is released once, in reverse order
        // of creation.
        unsafe {
            if !self.channel.is_null() {
                ibv_destroy_comp_channel(self.channel);
            }
            if !self.pd.is_null() {
                ibv_dealloc_pd(self.pd);
            }
            ibv_close_device(self.ctx);
        }
    }
}

/// A registration of memory this process did not necessarily allocate (a
/// memfd mapping, the user's memory, a staging buffer): the NIC may read
/// and write it, locally through `lkey` and from peers through `rkey`.
#[derive(Debug)]
pub(crate) struct MemoryRegion {
    mr: *mut ibv_mr,
    _device: std::sync::Arc<Device>,
}

// SAFETY: an ibv_mr is immutable after registration; deregistered once.
unsafe impl Send for MemoryRegion {}
// SAFETY: see Send.
unsafe impl Sync for MemoryRegion {}

impl MemoryRegion {
    /// Registers `len` bytes at `addr` for local and remote reads and
    /// writes and remote atomics.
    ///
    /// # Safety
    /// The memory must stay mapped until the region is dropped: the NIC
    /// may access it (peers' writes land there) until then.
    pub unsafe fn register(
        device: &std::sync::Arc<Device>,
        addr: *mut u8,
        len: usize,
    ) -> Result<MemoryRegion> {
        let access = ibv_access_flags::IBV_ACCESS_LOCAL_WRITE
            | ibv_access_flags::IBV_ACCESS_REMOTE_WRITE
            | ibv_access_flags::IBV_ACCESS_REMOTE_READ
            | ibv_access_flags::IBV_ACCESS_REMOTE_ATOMIC;
        // SAFETY: pd is live (the device is); the caller keeps the range
        // mapped for the region's life.
        let mr = unsafe { ibv_reg_mr(device.pd, addr.cast(), len.max(1), access.0 as c_int) };
        if mr.is_null() {
            return Err(verbs_error(&format!("registering {len} bytes")));
        }
        Ok(MemoryRegion {
            mr,
            _device: device.clone(),
        })
    }

    pub fn lkey(&self) -> u32 {
        // SAFETY: mr is live while self is.
        unsafe { (*self.mr).lkey }
    }

    pub fn rkey(&self) -> u32 {
        // SAFETY: as above.
        unsafe { (*self.mr).rkey }
    }

    pub fn addr(&self) -> u64 {
        // SAFETY: as above.
        unsafe { (*self.mr).addr as u64 }
    }

    /// Bytes registered from [`Self::addr`].
    pub fn len(&self) -> u64 {
        // SAFETY: as above.
        unsafe { (*self.mr).length as u64 }
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        // SAFETY: registered in `register`, deregistered once.
        unsafe { ibv_dereg_mr(self.mr) };
    }
}

/// What a peer needs to connect to one of this rank's queue pairs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Remote {
    pub qpn: u32,
    pub psn: u32,
    pub lid: u16,
    pub gid: [u8; 16],
}

/// One work request to post.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Work {
    /// RDMA WRITE of `len` bytes at local `addr` (`lkey`; `None`: inline,
    /// copied into the request at post) to `remote`/`rkey`.
    Write {
        addr: u64,
        len: u32,
        lkey: Option<u32>,
        remote: u64,
        rkey: u32,
    },
    /// RDMA READ of `len` bytes at `remote`/`rkey` into local `addr`/`lkey`.
    Read {
        addr: u64,
        len: u32,
        lkey: u32,
        remote: u64,
        rkey: u32,
    },
    /// FETCH_AND_ADD or CMP_AND_SWP of the u64 at `remote`; the old value
    /// lands at local `addr`/`lkey` (8 bytes).
    Atomic {
        addr: u64,
        lkey: u32,
        remote: u64,
        rkey: u32,
        compare_add: u64,
        swap: Option<u64>,
    },
}

/// A reliable-connected queue pair with its own completion queue, armed
/// on the device's channel.
#[derive(Debug)]
pub(crate) struct QueuePair {
    qp: *mut ibv_qp,
    cq: *mut ibv_cq,
    pub psn: u32,
    /// Send work requests it holds at most (posted, not yet completed).
    pub depth: u32,
    /// Bytes a request may carry inline (as the provider granted).
    pub inline: u32,
    device: std::sync::Arc<Device>,
}

// SAFETY: QPs and CQs are thread-safe in libibverbs (providers lock);
// released once in Drop.
unsafe impl Send for QueuePair {}
// SAFETY: see Send.
unsafe impl Sync for QueuePair {}

impl QueuePair {
    /// Creates a QP in the INIT state, with a CQ of its own.
    pub fn new(device: &std::sync::Arc<Device>, depth: u32, psn: u32) -> Result<QueuePair> {
        let depth = depth.min(device.port.max_qp_wr).max(16);
        // SAFETY: ctx and channel are live; the CQ is destroyed in Drop.
        let cq = unsafe {
            ibv_create_cq(
                device.ctx,
                depth as c_int + 1,
                ptr::null_mut(),
                device.channel,
                0,
            )
        };
        if cq.is_null() {
            return Err(verbs_error("creating a completion queue"));
        }
        let mut qp = QueuePair {
            qp: ptr::null_mut(),
            cq,
            psn: psn & 0xff_ffff,
            depth,
            inline: 0,
            device: device.clone(),
        };
        // SAFETY: cq is live.
        check_rc("arming the completion queue", unsafe {
            ibv_req_notify_cq(cq, 0)
        })?;
        // SAFETY: zeroed init attributes are valid; the fields set below
        // are what an RC QP needs.
        let mut init: ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        init.send_cq = cq;
        init.recv_cq = cq;
        init.qp_type = ibv_qp_type::IBV_QPT_RC;
        init.cap.max_send_wr = depth;
        init.cap.max_recv_wr = 1;
        init.cap.max_send_sge = 1;
        init.cap.max_recv_sge = 1;
        init.cap.max_inline_data = 64;
        init.sq_sig_all = 0;
        // SAFETY: pd is live, init is filled.
        qp.qp = unsafe { ibv_create_qp(device.pd, &mut init) };
        if qp.qp.is_null() {
            // Some providers refuse inline data: try without.
            init.cap.max_inline_data = 0;
            // SAFETY: as above.
            qp.qp = unsafe { ibv_create_qp(device.pd, &mut init) };
        }
        if qp.qp.is_null() {
            return Err(verbs_error("creating a queue pair"));
        }
        // SAFETY: zeroed attributes are valid; INIT needs these four.
        let mut attr: ibv_qp_attr = unsafe { std::mem::zeroed() };
        attr.qp_state = ibv_qp_state::IBV_QPS_INIT;
        attr.pkey_index = 0;
        attr.port_num = device.port.port;
        attr.qp_access_flags = (ibv_access_flags::IBV_ACCESS_REMOTE_WRITE
            | ibv_access_flags::IBV_ACCESS_REMOTE_READ
            | ibv_access_flags::IBV_ACCESS_REMOTE_ATOMIC)
            .0;
        let mask = ibv_qp_attr_mask::IBV_QP_STATE
            | ibv_qp_attr_mask::IBV_QP_PKEY_INDEX
            | ibv_qp_attr_mask::IBV_QP_PORT
            | ibv_qp_attr_mask::IBV_QP_ACCESS_FLAGS;
        // SAFETY: qp is live; attr and mask match.
        check_rc("moving a queue pair to INIT", unsafe {
            ibv_modify_qp(qp.qp, &mut attr, mask.0 as c_int)
        })?;
        // Inline capacity as granted (ibv_create_qp writes it back).
        qp.inline = init.cap.max_inline_data;
        Ok(qp)
    }

    /// This QP's number.
    pub fn qpn(&self) -> u32 {
        // SAFETY: qp is live.
        unsafe { (*self.qp).qp_num }
    }

    /// Connects to `remote`: INIT -> RTR -> RTS.
    pub fn connect(&self, remote: &Remote) -> Result<()> {
        let port = &self.device.port;
        // SAFETY: zeroed attributes are valid; RTR needs the fields below.
        let mut attr: ibv_qp_attr = unsafe { std::mem::zeroed() };
        attr.qp_state = ibv_qp_state::IBV_QPS_RTR;
        attr.path_mtu = port.mtu;
        attr.dest_qp_num = remote.qpn;
        attr.rq_psn = remote.psn;
        attr.max_dest_rd_atomic = port.max_rd_atomic;
        attr.min_rnr_timer = 12;
        attr.ah_attr.dlid = remote.lid;
        attr.ah_attr.sl = 0;
        attr.ah_attr.src_path_bits = 0;
        attr.ah_attr.port_num = port.port;
        if port.ethernet || remote.gid != [0; 16] && remote.lid == 0 {
            attr.ah_attr.is_global = 1;
            attr.ah_attr.grh.dgid = ibv_gid { raw: remote.gid };
            attr.ah_attr.grh.sgid_index = port.gid_index;
            attr.ah_attr.grh.hop_limit = 64;
        }
        let mask = ibv_qp_attr_mask::IBV_QP_STATE
            | ibv_qp_attr_mask::IBV_QP_AV
            | ibv_qp_attr_mask::IBV_QP_PATH_MTU
            | ibv_qp_attr_mask::IBV_QP_DEST_QPN
            | ibv_qp_attr_mask::IBV_QP_RQ_PSN
            | ibv_qp_attr_mask::IBV_QP_MAX_DEST_RD_ATOMIC
            | ibv_qp_attr_mask::IBV_QP_MIN_RNR_TIMER;
        // SAFETY: qp is live; attr and mask match.
        check_rc("moving a queue pair to RTR", unsafe {
            ibv_modify_qp(self.qp, &mut attr, mask.0 as c_int)
        })?;
        // SAFETY: as above, for RTS.
        let mut attr: ibv_qp_attr = unsafe { std::mem::zeroed() };
        attr.qp_state = ibv_qp_state::IBV_QPS_RTS;
        // 4.096 us * 2^18 = about 1 s per try, 7 tries: a peer whose QP is
        // not yet connected (it connects right after the same exchange)
        // or a slow emulated link does not fail the request; a dead host
        // fails it within seconds (the control connection names it first).
        attr.timeout = 18;
        attr.retry_cnt = 7;
        attr.rnr_retry = 7;
        attr.sq_psn = self.psn;
        attr.max_rd_atomic = port.max_rd_atomic;
        let mask = ibv_qp_attr_mask::IBV_QP_STATE
            | ibv_qp_attr_mask::IBV_QP_TIMEOUT
            | ibv_qp_attr_mask::IBV_QP_RETRY_CNT
            | ibv_qp_attr_mask::IBV_QP_RNR_RETRY
            | ibv_qp_attr_mask::IBV_QP_SQ_PSN
            | ibv_qp_attr_mask::IBV_QP_MAX_QP_RD_ATOMIC;
        // SAFETY: as above.
        check_rc("moving a queue pair to RTS", unsafe {
            ibv_modify_qp(self.qp, &mut attr, mask.0 as c_int)
        })
    }

    /// Posts `work`, signaled, as request `wr_id`. The caller keeps the
    /// local memory registered and alive until its completion (inline
    /// data is copied now).
    pub fn post(&self, wr_id: u64, work: Work) -> Result<()> {
        // SAFETY: zeroed sge / wr are valid; the fields set below make a
        // well-formed request of one scatter-gather entry.
        let mut sge: ibv_sge = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = wr_id;
        wr.num_sge = 1;
        let mut flags = ibv_send_flags::IBV_SEND_SIGNALED;
        match work {
            Work::Write {
                addr,
                len,
                lkey,
                remote,
                rkey,
            } => {
                wr.opcode = ibv_wr_opcode::IBV_WR_RDMA_WRITE;
                sge.addr = addr;
                sge.length = len;
                match lkey {
                    Some(k) => sge.lkey = k,
                    None => flags |= ibv_send_flags::IBV_SEND_INLINE,
                }
                wr.wr.rdma = rdma_t {
                    remote_addr: remote,
                    rkey,
                };
            }
            Work::Read {
                addr,
                len,
                lkey,
                remote,
                rkey,
            } => {
                wr.opcode = ibv_wr_opcode::IBV_WR_RDMA_READ;
                sge.addr = addr;
                sge.length = len;
                sge.lkey = lkey;
                wr.wr.rdma = rdma_t {
                    remote_addr: remote,
                    rkey,
                };
            }
            Work::Atomic {
                addr,
                lkey,
                remote,
                rkey,
                compare_add,
                swap,
            } => {
                wr.opcode = match swap {
                    Some(_) => ibv_wr_opcode::IBV_WR_ATOMIC_CMP_AND_SWP,
                    None => ibv_wr_opcode::IBV_WR_ATOMIC_FETCH_AND_ADD,
                };
                sge.addr = addr;
                sge.length = 8;
                sge.lkey = lkey;
                wr.wr.atomic = atomic_t {
                    remote_addr: remote,
                    compare_add,
                    swap: swap.unwrap_or(0),
                    rkey,
                };
            }
        }
        wr.send_flags = flags.0;
        // Taken last: no write to `sge` through its name follows.
        wr.sg_list = &mut sge;
        let mut bad: *mut ibv_send_wr = ptr::null_mut();
        // SAFETY: qp is live and connected; wr and sge live across the
        // call (inline data is copied by it, other local memory is kept
        // registered by the caller until the completion).
        check_rc("posting a work request", unsafe {
            ibv_post_send(self.qp, &mut wr, &mut bad)
        })
    }

    /// Takes up to `out.len()` completions; returns how many.
    pub fn poll(&self, out: &mut [Completion]) -> usize {
        // SAFETY: a zeroed ibv_wc array is a valid out-parameter.
        let mut wcs: [ibv_wc; 16] = unsafe { std::mem::zeroed() };
        let want = out.len().min(wcs.len()) as c_int;
        // SAFETY: cq is live; wcs holds `want` entries.
        let n = unsafe { ibv_poll_cq(self.cq, want, wcs.as_mut_ptr()) };
        let n = n.max(0) as usize;
        for (o, wc) in out.iter_mut().zip(&wcs[..n]) {
            *o = Completion {
                wr_id: wc.wr_id,
                ok: wc.status == ibv_wc_status::IBV_WC_SUCCESS,
                status: wc.status,
            };
        }
        n
    }
}

/// One completion taken off a CQ.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Completion {
    pub wr_id: u64,
    pub ok: bool,
    pub status: u32,
}

/// Words for a completion status, for error messages.
pub(crate) fn status_str(status: u32) -> String {
    // SAFETY: ibv_wc_status_str returns a static NUL-ended string for any value.
    unsafe { CStr::from_ptr(ibv_wc_status_str(status)) }
        .to_string_lossy()
        .into_owned()
}

impl Drop for QueuePair {
    fn drop(&mut self) {
        // SAFETY: made in `new`, destroyed once, the QP before its CQ.
        unsafe {
            if !self.qp.is_null() {
                ibv_destroy_qp(self.qp);
            }
            ibv_destroy_cq(self.cq);
        }
    }
}
