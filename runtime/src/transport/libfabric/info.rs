//! Choosing a provider: `fi_getinfo` for a reliable-datagram endpoint
//! (`FI_EP_RDM`) with RMA, and atomics and write ordering where the
//! provider offers them.

use super::error::{check, FabricError, Result};
use gaspi_libfabric_sys as sys;
use std::ffi::{CStr, CString};
use std::ptr;

/// The libfabric API version the layer is written against (1.17, Debian
/// 12's): `fi_getinfo` then gives its semantics whatever newer library
/// runs underneath.
pub(crate) const API_VERSION: u32 = sys::FI_VERSION_1_17;

/// Providers reached only within a host: the runtime has its own
/// shared-memory transport, so these are never the network's.
const HOST_ONLY: &[&str] = &["shm", "sm2"];

/// Preference when no provider is named (first match wins); a provider
/// not listed comes after these, in `fi_getinfo`'s order. Hardware first
/// (Slingshot, EFA, Omni-Path, InfiniBand/RoCE), then the TCP ones.
const PREFERENCE: &[&str] = &[
    "cxi",
    "efa",
    "opx",
    "psm3",
    "psm2",
    "verbs;ofi_rxm",
    "ucx",
    "tcp;ofi_rxm",
    "tcp",
    "net;ofi_rxm",
    "net",
    "sockets",
    "udp;ofi_rxd",
];

/// How a notification word is kept behind the data written before it to
/// the same peer (GASPI's rule: a notification is never seen before its
/// data). Chosen per provider from what `fi_getinfo` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotifyOrder {
    /// The provider performs RMA writes to one peer in the order posted
    /// (`FI_ORDER_RMA_WAW`, or the older `FI_ORDER_WAW`, in the transmit
    /// attributes, for writes up to `max_order_waw_size`): the word is
    /// simply posted after the data. `tcp;ofi_rxm` (one TCP stream per
    /// peer) and `verbs;ofi_rxm` (one RC queue pair per peer) offer it.
    InOrder,
    /// The word's write carries `FI_FENCE`: the provider starts it only
    /// once every earlier operation to that peer has completed.
    Fence,
    /// Writes carry `FI_DELIVERY_COMPLETE` (their completion means the
    /// data is in the target's memory); a word is posted only once every
    /// earlier write to its peer has completed. Costs the word a round
    /// trip after the data; for providers with neither of the above.
    DeliveryComplete,
}

impl NotifyOrder {
    /// Its name in logs and in `GASPI`-style settings.
    pub(crate) fn name(self) -> &'static str {
        match self {
            NotifyOrder::InOrder => "in-order",
            NotifyOrder::Fence => "fence",
            NotifyOrder::DeliveryComplete => "delivery-complete",
        }
    }

    /// Parses [`Self::name`].
    pub(crate) fn parse(s: &str) -> Option<NotifyOrder> {
        match s {
            "in-order" => Some(NotifyOrder::InOrder),
            "fence" => Some(NotifyOrder::Fence),
            "delivery-complete" => Some(NotifyOrder::DeliveryComplete),
            _ => None,
        }
    }
}

/// What to look for.
#[derive(Debug, Clone, Default)]
pub(crate) struct Query {
    /// A provider by name (`"tcp;ofi_rxm"`, `"cxi"`, `"efa"`); `None`: the
    /// best one offered (see [`PREFERENCE`]).
    pub provider: Option<String>,
    /// The address to bind to (`FI_SOURCE`): for the socket-based
    /// providers the interface's IP address; `None`: the provider's choice.
    pub source: Option<String>,
    /// A domain (NIC or interface) by name (`"cxi0"`, `"eth0"`).
    pub domain: Option<String>,
    /// Force an ordering mechanism (tests and benchmarks of the
    /// mechanisms); `None`: the cheapest the provider offers.
    pub order: Option<NotifyOrder>,
    /// Only an entry with `FI_ATOMIC` will do (NIC atomics asked for);
    /// otherwise atomics are taken where they come with the cheapest
    /// ordering (`tcp;ofi_rxm` 1.17 orders writes only without them).
    pub atomics: bool,
}

impl Query {
    /// The provider named by `GASPI_NET_PROVIDER` (unset or empty: the
    /// best one), nothing else set.
    pub(crate) fn from_env() -> Query {
        Query {
            provider: std::env::var("GASPI_NET_PROVIDER")
                .ok()
                .filter(|p| !p.is_empty()),
            ..Query::default()
        }
    }
}

/// What the chosen provider offers, as plain values.
#[derive(Debug, Clone)]
pub(crate) struct Attributes {
    /// `tcp;ofi_rxm`, `cxi`, ...
    pub provider: String,
    /// The fabric's name (for the socket providers: the subnet).
    pub fabric: String,
    /// The domain's name (the NIC or interface).
    pub domain: String,
    /// `FI_*` capability bits granted.
    pub caps: u64,
    /// Whether `fi_atomic` and friends are offered (`FI_ATOMIC`).
    pub atomics: bool,
    /// How notifications stay behind their data.
    pub order: NotifyOrder,
    /// `FI_MR_*` bits the provider requires.
    pub mr_mode: u32,
    /// Bytes of a remote key.
    pub mr_key_size: usize,
    /// Largest payload posted with `FI_INJECT` (copied at the call).
    pub inject_size: usize,
    /// Largest single RMA write or read; the runtime splits larger ones.
    pub max_write: usize,
    /// Bytes of remote CQ data a write can carry, as the runtime uses
    /// them: 8 (`tcp;ofi_rxm`), 4 (`verbs;ofi_rxm`, `efa`) or 0 (none, or
    /// fewer than 4). No `FI_RX_CQ_DATA` mode is ever asked for.
    pub cq_data_bytes: usize,
    /// Whether data moves only while someone reads the completion queue
    /// (`FI_PROGRESS_MANUAL`), at the target too (`tcp;ofi_rxm`).
    pub manual_progress: bool,
}

impl Attributes {
    /// Whether the provider requires mode bit `bit` (`FI_MR_*`).
    pub(crate) fn mr(&self, bit: u32) -> bool {
        self.mr_mode & bit != 0
    }
}

/// One `fi_info` entry, chosen and owned (a `fi_dupinfo` copy, freed on
/// drop): what the fabric, domain and endpoint are opened with.
#[derive(Debug)]
pub(crate) struct Info {
    ptr: *mut sys::fi_info,
    attributes: Attributes,
}

// SAFETY: the entry is never modified after `query` returns, and libfabric
// only reads it (fi_fabric, fi_domain, fi_endpoint take it as input).
unsafe impl Send for Info {}
// SAFETY: as above: shared, it is only read.
unsafe impl Sync for Info {}

impl Drop for Info {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from fi_dupinfo and is freed only here.
        unsafe { sys::fi_freeinfo(self.ptr) };
    }
}

/// The capabilities asked for: RMA both ways, and atomics if `atomics`.
fn caps(atomics: bool) -> u64 {
    let rma =
        (sys::FI_RMA | sys::FI_READ | sys::FI_WRITE | sys::FI_REMOTE_READ | sys::FI_REMOTE_WRITE)
            as u64;
    if atomics {
        rma | sys::FI_ATOMIC as u64
    } else {
        rma
    }
}

/// A `fi_getinfo` hints structure, freed on drop.
struct Hints(*mut sys::fi_info);

impl Drop for Hints {
    fn drop(&mut self) {
        // SAFETY: allocated by fi_allocinfo; the strings in it come from
        // strdup (malloc), which fi_freeinfo frees.
        unsafe { sys::fi_freeinfo(self.0) };
    }
}

impl Hints {
    fn new(query: &Query, provider: Option<&str>, caps: u64, msg_order: u64) -> Result<Hints> {
        // SAFETY: fi_allocinfo returns a zeroed fi_info with its attribute
        // structs allocated, or null.
        let p = unsafe { sys::fi_allocinfo() };
        if p.is_null() {
            return Err(FabricError::Invalid("fi_allocinfo: out of memory".into()));
        }
        let hints = Hints(p);
        let dup = |s: &str| -> Result<*mut std::os::raw::c_char> {
            let c = CString::new(s).map_err(|_| FabricError::Invalid(format!("bad name {s:?}")))?;
            // SAFETY: strdup copies a valid C string into malloc'd memory,
            // which fi_freeinfo frees with the hints.
            Ok(unsafe { libc::strdup(c.as_ptr()) })
        };
        // SAFETY: `p` and its attribute structs are valid, exclusively ours.
        unsafe {
            let info = &mut *p;
            info.caps = caps;
            // Modes are duties the provider puts on the application
            // (FI_CONTEXT: a per-operation context struct it may scribble
            // on): the layer takes none on.
            info.mode = 0;
            (*info.ep_attr).type_ = sys::FI_EP_RDM;
            let dom = &mut *info.domain_attr;
            // Every registration mode the layer handles (see memory.rs);
            // the entry returned says which the provider requires.
            dom.mr_mode = (sys::FI_MR_LOCAL
                | sys::FI_MR_VIRT_ADDR
                | sys::FI_MR_ALLOCATED
                | sys::FI_MR_PROV_KEY
                | sys::FI_MR_ENDPOINT) as i32;
            dom.threading = sys::FI_THREAD_SAFE;
            dom.av_type = sys::FI_AV_TABLE;
            dom.resource_mgmt = sys::FI_RM_ENABLED;
            (*info.tx_attr).msg_order = msg_order;
            if let Some(name) = provider {
                (*info.fabric_attr).prov_name = dup(name)?;
            }
            if let Some(name) = &query.domain {
                dom.name = dup(name)?;
            }
        }
        Ok(hints)
    }

    /// The entries offered (an empty list for "none").
    fn getinfo(&self, source: Option<&str>) -> Result<InfoList> {
        let node = source
            .map(|s| {
                CString::new(s).map_err(|_| FabricError::Invalid(format!("bad address {s:?}")))
            })
            .transpose()?;
        let (node_ptr, flags) = match &node {
            Some(n) => (n.as_ptr(), sys::FI_SOURCE),
            None => (ptr::null(), 0),
        };
        let mut list = ptr::null_mut();
        // SAFETY: valid hints and node; `list` receives a list we free.
        let rc = unsafe {
            sys::fi_getinfo(API_VERSION, node_ptr, ptr::null(), flags, self.0, &mut list)
        };
        if rc == -(sys::FI_ENODATA as i32) {
            return Ok(InfoList(ptr::null_mut()));
        }
        check("fi_getinfo", rc as isize)?;
        Ok(InfoList(list))
    }
}

/// A list `fi_getinfo` returned, freed on drop.
struct InfoList(*mut sys::fi_info);

impl Drop for InfoList {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: the list came from fi_getinfo and is freed once.
            unsafe { sys::fi_freeinfo(self.0) };
        }
    }
}

impl InfoList {
    fn entries(&self) -> impl Iterator<Item = &sys::fi_info> {
        let mut p = self.0;
        std::iter::from_fn(move || {
            // SAFETY: a null-terminated list owned by `self`.
            let e = unsafe { p.as_ref()? };
            p = e.next;
            Some(e)
        })
    }
}

fn cstr(p: *const std::os::raw::c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: libfabric's attribute strings are NUL-terminated.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

fn provider_of(e: &sys::fi_info) -> String {
    // SAFETY: entries from fi_getinfo have their fabric attributes set.
    cstr(unsafe { (*e.fabric_attr).prov_name })
}

impl Info {
    /// Finds the provider and the entry to open: the named provider (or
    /// the best offered), with atomics if it has them, and the cheapest
    /// notification ordering it offers (or `query.order`).
    pub(crate) fn query(query: &Query) -> Result<Info> {
        let wanted = || match &query.provider {
            Some(p) => format!("{p:?} with FI_EP_RDM and FI_RMA"),
            None => "with FI_EP_RDM and FI_RMA".to_string(),
        };
        // 1. Which provider: every one offering RDM + RMA.
        let all = Hints::new(query, None, caps(false), 0)?.getinfo(query.source.as_deref())?;
        let mut offered: Vec<String> = Vec::new();
        for p in all.entries().map(provider_of) {
            if !offered.contains(&p) {
                offered.push(p);
            }
        }
        let provider = match &query.provider {
            Some(p) => offered.iter().find(|o| *o == p).cloned(),
            None => PREFERENCE
                .iter()
                .find_map(|p| offered.iter().find(|o| o == p))
                .or_else(|| offered.iter().find(|o| !HOST_ONLY.contains(&o.as_str())))
                .cloned(),
        };
        let Some(provider) = provider else {
            let reason = if offered.is_empty() {
                "fi_getinfo offers none (is a provider installed, with a network interface or \
                 device it serves?)"
                    .to_string()
            } else {
                format!("offered here: {}", offered.join(", "))
            };
            return Err(FabricError::NoProvider {
                wanted: wanted(),
                reason,
            });
        };
        // 2. The entry: the cheapest ordering first (it costs every
        // notification), with atomics if the provider has them with it.
        let mut tries: Vec<(u64, u64, NotifyOrder)> = Vec::new();
        for order in [
            NotifyOrder::InOrder,
            NotifyOrder::Fence,
            NotifyOrder::DeliveryComplete,
        ] {
            if query.order.is_some_and(|o| o != order) {
                continue;
            }
            for atomics in [true, false] {
                if query.atomics && !atomics {
                    continue;
                }
                let base = caps(atomics);
                match order {
                    NotifyOrder::InOrder => {
                        for waw in [sys::FI_ORDER_RMA_WAW, sys::FI_ORDER_WAW as u64] {
                            tries.push((base, waw, order));
                        }
                    }
                    NotifyOrder::Fence => tries.push((base | sys::FI_FENCE as u64, 0, order)),
                    NotifyOrder::DeliveryComplete => tries.push((base, 0, order)),
                }
            }
        }
        for (caps, msg_order, order) in tries {
            let list = Hints::new(query, Some(&provider), caps, msg_order)?
                .getinfo(query.source.as_deref())?;
            let Some(entry) = list.entries().find(|e| provider_of(e) == provider) else {
                continue;
            };
            if let Some(info) = Info::take(entry, order)? {
                return Ok(info);
            }
        }
        let asked = match query.order {
            Some(o) => format!("the ordering {}", o.name()),
            None => "any notification ordering".to_string(),
        };
        Err(FabricError::NoProvider {
            wanted: wanted(),
            reason: format!(
                "{provider} has no entry with {asked}{} that the layer can use \
                 (its registration modes, FI_THREAD_SAFE, no modes)",
                if query.atomics { " and FI_ATOMIC" } else { "" }
            ),
        })
    }

    /// Copies `entry` if it is usable with `order`.
    fn take(entry: &sys::fi_info, order: NotifyOrder) -> Result<Option<Info>> {
        // SAFETY: entries from fi_getinfo have every attribute struct set.
        let (tx, ep, dom, fab) = unsafe {
            (
                &*entry.tx_attr,
                &*entry.ep_attr,
                &*entry.domain_attr,
                &*entry.fabric_attr,
            )
        };
        let mut max_write = ep.max_msg_size.min(isize::MAX as usize);
        if order == NotifyOrder::InOrder {
            if tx.msg_order & (sys::FI_ORDER_RMA_WAW | sys::FI_ORDER_WAW as u64) == 0 {
                return Ok(None);
            }
            // Ordered only up to this size: larger writes are split by
            // the caller (the runtime splits to `max_write` anyway).
            max_write = max_write.min(ep.max_order_waw_size);
            if max_write < 4096 {
                return Ok(None);
            }
        }
        if dom.mr_key_size > 8 {
            // Keys longer than a u64 need FI_MR_RAW, which the layer does
            // not ask for; a provider should not return this.
            return Ok(None);
        }
        let attributes = Attributes {
            provider: cstr(fab.prov_name),
            fabric: cstr(fab.name),
            domain: cstr(dom.name),
            caps: entry.caps,
            atomics: entry.caps & sys::FI_ATOMIC as u64 != 0,
            order,
            mr_mode: dom.mr_mode as u32,
            mr_key_size: dom.mr_key_size,
            inject_size: tx.inject_size,
            max_write,
            cq_data_bytes: match dom.cq_data_size {
                n if n >= 8 => 8,
                n if n >= 4 => 4,
                _ => 0,
            },
            manual_progress: dom.data_progress == sys::FI_PROGRESS_MANUAL,
        };
        // SAFETY: copies one entry (not the list after it) into memory we
        // own and free on drop.
        let ptr = unsafe { sys::fi_dupinfo(entry) };
        if ptr.is_null() {
            return Err(FabricError::Invalid("fi_dupinfo: out of memory".into()));
        }
        Ok(Some(Info { ptr, attributes }))
    }

    /// What the entry offers.
    pub(crate) fn attributes(&self) -> &Attributes {
        &self.attributes
    }

    /// The raw entry, for the objects opened from it.
    pub(super) fn raw(&self) -> *mut sys::fi_info {
        self.ptr
    }
}
