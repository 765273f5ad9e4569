//! The checks of fuzz target `capi_config` (decision 0088):
//! `gaspi_config_set`'s argument checking through the exported functions
//! of `libGPI2`, and `gaspi_proc_init` with what it accepted.
//!
//! The fuzzer's bytes are a few configurations, each the defaults with
//! some fields changed (to values near GPI-2 1.6's limits, or anything),
//! each given to `gaspi_config_set`; some inputs then start a one-rank
//! runtime with the last one. Next to it, the limits GPI-2 1.6's
//! `gaspi_config_set` enforces and the runtime's own bounds, written out
//! here independently. Invariants:
//! - `gaspi_config_set` accepts a configuration exactly when every field
//!   is within those limits, and refuses it with `GASPI_ERR_CONFIG`;
//! - a refused configuration changes nothing: `gaspi_config_get` returns
//!   the one before, field for field; an accepted one is returned as given;
//! - `gaspi_proc_init` with an accepted configuration starts (or, for
//!   `notification_num` 0, which GPI-2's set lets through, is refused
//!   with `GASPI_ERR_CONFIG` and leaves nothing started); the running
//!   job reports the fields it uses as configured; `gaspi_config_set`
//!   while it runs is refused with `GASPI_ERR_INITED` and changes
//!   nothing; `gaspi_proc_term` ends it.
//!
//! Shared by the fuzz target (`fuzz/fuzz_targets/capi_config.rs`) and the
//! corpus replay test (`tests/fuzz_corpus_config.rs`); every input starts
//! from the default configuration, not started.

use std::sync::{Mutex, OnceLock, PoisonError};
use GPI2::*;

/// The fields of a configuration, in a form that compares (the struct
/// holds padding and a pointer).
type Fields = [u64; 20];

fn fields(c: &gaspi_config_t) -> Fields {
    [
        c.logger.into(),
        c.sn_port.into(),
        c.net_info.into(),
        c.user_net.into(),
        c.sn_persistent as u64,
        c.sn_timeout,
        c.network as u64,
        c.queue_size_max.into(),
        c.queue_num.into(),
        c.group_max.into(),
        c.segment_max.into(),
        c.transfer_size_max,
        c.notification_num.into(),
        c.passive_queue_size_max.into(),
        c.passive_transfer_size_max.into(),
        c.allreduce_buf_size,
        c.allreduce_elem_max.into(),
        c.rw_list_elem_max.into(),
        c.build_infrastructure as u64,
        c.user_defined as u64,
    ]
}

/// Sets field `i` (as `fields` orders them) of `c` to `v`, cut to its width.
fn set_field(c: &mut gaspi_config_t, i: usize, v: u64) {
    match i {
        0 => c.logger = v as u32,
        1 => c.sn_port = v as u32,
        2 => c.net_info = v as u32,
        3 => c.user_net = v as u32,
        4 => c.sn_persistent = v as i32,
        5 => c.sn_timeout = v,
        6 => c.network = v as i32,
        7 => c.queue_size_max = v as u32,
        8 => c.queue_num = v as u32,
        9 => c.group_max = v as u32,
        10 => c.segment_max = v as u32,
        11 => c.transfer_size_max = v,
        12 => c.notification_num = v as u32,
        13 => c.passive_queue_size_max = v as u32,
        14 => c.passive_transfer_size_max = v as u32,
        15 => c.allreduce_buf_size = v,
        16 => c.allreduce_elem_max = v as u32,
        17 => c.rw_list_elem_max = v as u32,
        18 => c.build_infrastructure = v as i32,
        // Never dereferenced by the library: any value will do.
        _ => c.user_defined = v as usize as gaspi_pointer_t,
    }
}

/// Whether `gaspi_config_set` must accept `c`: GPI-2 1.6's limits (its
/// `GPI2_CONFIG.c`) and the runtime's own (`Config::validate`).
fn acceptable(c: &gaspi_config_t) -> bool {
    (1024..=65536).contains(&c.sn_port)
        && (1..=4096).contains(&c.queue_size_max)
        && (1..=16).contains(&c.queue_num)
        && (1..=255).contains(&c.segment_max)
        && (1..=1 << 30).contains(&c.transfer_size_max)
        && c.passive_transfer_size_max <= 65_535
        && (1..=255).contains(&c.rw_list_elem_max)
        && (1..=256).contains(&c.group_max)
        && c.allreduce_elem_max >= 1
        && c.notification_num <= 1 << 24
}

fn get() -> gaspi_config_t {
    let mut c = std::mem::MaybeUninit::<gaspi_config_t>::uninit();
    // SAFETY: `c` is valid for writing one gaspi_config_t.
    let code = unsafe { gaspi_config_get(c.as_mut_ptr()) };
    assert_eq!(code, GASPI_SUCCESS, "gaspi_config_get");
    // SAFETY: gaspi_config_get succeeded, so it wrote the whole struct.
    unsafe { c.assume_init() }
}

fn initialized() -> bool {
    let mut n = u32::MAX;
    // SAFETY: `n` is valid for writing one value.
    let code = unsafe { gaspi_initialized(&mut n) };
    assert_eq!(code, GASPI_SUCCESS, "gaspi_initialized");
    n != 0
}

/// The default configuration, taken once before anything was set.
fn defaults() -> &'static Mutex<gaspi_config_t> {
    static DEFAULTS: OnceLock<Mutex<gaspi_config_t>> = OnceLock::new();
    DEFAULTS.get_or_init(|| {
        if std::env::var_os("GASPI_LOG").is_none() {
            std::env::set_var("GASPI_LOG", "error");
        }
        Mutex::new(get())
    })
}

/// The fuzzer's bytes; 0 once used up.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn u64(&mut self, bytes: usize) -> u64 {
        (0..bytes).fold(0, |v, i| v | u64::from(self.u8()) << (8 * i))
    }
    /// A field's value: near the limits mostly, else anything.
    fn value(&mut self) -> u64 {
        const EDGES: [u64; 24] = [
            0,
            1,
            2,
            15,
            16,
            17,
            255,
            256,
            257,
            1023,
            1024,
            4096,
            4097,
            65_535,
            65_536,
            65_537,
            1 << 24,
            (1 << 24) + 1,
            1 << 30,
            (1 << 30) + 1,
            u32::MAX as u64,
            1 << 32,
            i64::MAX as u64,
            u64::MAX,
        ];
        match self.u8() % 4 {
            0 => self.u64(1),
            1 => EDGES[self.u8() as usize % EDGES.len()],
            2 => self.u64(2),
            _ => self.u64(8),
        }
    }
}

/// Fuzz target `capi_config`: panics when an invariant breaks.
pub fn capi_config(data: &[u8]) {
    let base = *defaults().lock().unwrap_or_else(PoisonError::into_inner);
    assert!(!initialized(), "an input starts with no runtime");
    assert_eq!(
        gaspi_config_set(base),
        GASPI_SUCCESS,
        "the defaults are accepted"
    );
    let mut input = Input(data);
    let flags = input.u8();
    let mut current = base;
    for round in 0..(flags % 4 + 1) {
        let mut c = base;
        for _ in 0..input.u8() % 6 {
            let field = input.u8() as usize % 20;
            let v = input.value();
            set_field(&mut c, field, v);
        }
        let code = gaspi_config_set(c);
        let now = get();
        if acceptable(&c) {
            assert_eq!(code, GASPI_SUCCESS, "round {round}: refused {c:?}");
            assert_eq!(
                fields(&now),
                fields(&c),
                "round {round}: gaspi_config_get after set"
            );
            current = c;
        } else {
            assert_eq!(code, GASPI_ERR_CONFIG, "round {round}: code of {c:?}");
            assert_eq!(
                fields(&now),
                fields(&current),
                "round {round}: a refused set changed the configuration"
            );
        }
    }
    if flags & 0x80 == 0 {
        return;
    }
    // Start a one-rank runtime with the configuration accepted last.
    let code = gaspi_proc_init(GASPI_BLOCK);
    if current.notification_num == 0 {
        assert_eq!(code, GASPI_ERR_CONFIG, "init with notification_num 0");
        assert!(!initialized(), "a refused init left a runtime");
        return;
    }
    assert_eq!(code, GASPI_SUCCESS, "init with {current:?}");
    let running = get();
    let used = |c: &gaspi_config_t| {
        (
            c.queue_size_max,
            c.queue_num,
            c.group_max,
            c.segment_max,
            c.transfer_size_max,
            c.notification_num,
            c.allreduce_elem_max,
            c.rw_list_elem_max,
        )
    };
    assert_eq!(
        used(&running),
        used(&current),
        "the running job's configuration"
    );
    let mut max = 0;
    // SAFETY: `max` is valid for writing one value.
    assert_eq!(unsafe { gaspi_segment_max(&mut max) }, GASPI_SUCCESS);
    assert_eq!(max, current.segment_max, "gaspi_segment_max");
    for q in 0..current.queue_num.min(256) {
        let mut n = u32::MAX;
        // SAFETY: `n` is valid for writing one value.
        let code = unsafe { gaspi_queue_size(q as u8, &mut n) };
        assert_eq!(
            (code, n),
            (GASPI_SUCCESS, 0),
            "queue {q} of {}",
            current.queue_num
        );
    }
    assert_eq!(
        gaspi_config_set(base),
        GASPI_ERR_INITED,
        "set while running"
    );
    assert_eq!(
        used(&get()),
        used(&current),
        "a set while running changed the configuration"
    );
    assert_eq!(gaspi_proc_term(GASPI_BLOCK), GASPI_SUCCESS, "term");
    assert!(!initialized(), "term left a runtime");
}
