#!/usr/bin/env python3
"""capi_seeds.py - writes the seed corpora of fuzz targets `capi_calls` and
`capi_config` (decision 0088), in the encodings that
runtime/capi/tests/fuzz/{calls,config}.rs read:
- capi_calls: short programs of C-interface calls, each a call GASPI
  programs make (valid writes, reads, lists and notifications) or one at an
  edge (an offset at a segment's end, a size at the transfer limit, a list
  as long as the queue);
- capi_config: configurations GPI-2 programs set (then started), and ones
  just past each limit of gaspi_config_set.
The fuzzer mutates from there.

    python3 fuzz/capi_seeds.py      # writes fuzz/corpus/capi_{calls,config}/seed-*
"""
import os
import struct

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def seg(s):
    return bytes([s])


def rank():
    return bytes([0])


def queue(q):
    return bytes([q])


def off(v):
    # selector 0: a u16 taken modulo 4200
    return bytes([0]) + struct.pack("<H", v)


def word(i):
    return bytes([0, i])


def value(v):
    return bytes([0, v - 1])


def one(op, sl, ol, sr, orr, size, nid=0, val=1, q=0):
    """gaspi_write (0), _read (1), _write_notify (2), _read_notify (3)."""
    return bytes([op]) + seg(sl) + off(ol) + rank() + seg(sr) + off(orr) + off(size) + word(nid) + value(val) + queue(q)


def notify(s, nid, val, q=0):
    return bytes([4]) + seg(s) + rank() + word(nid) + value(val) + queue(q)


def reset(s, nid):
    return bytes([5]) + seg(s) + word(nid)


def waitsome(s, begin, num):
    return bytes([6]) + seg(s) + word(begin) + bytes([2, num])


def lst(op, elems, ns=0, nid=0, val=1, q=0):
    """gaspi_write_list (7), _read_list (8), _write_list_notify (9), _read_list_notify (10)."""
    b = bytes([op, 0, len(elems)]) + rank() + seg(ns) + word(nid) + value(val) + queue(q)
    for sl, ol, sr, orr, size in elems:
        b += seg(sl) + off(ol) + seg(sr) + off(orr) + off(size)
    return b


def seg_query(s):
    return bytes([11]) + seg(s) + rank()


def queue_query(q):
    return bytes([12]) + queue(q)


WORDS = bytes([13])

SEEDS = {
    "write-read": one(0, 0, 100, 1, 10, 50) + one(1, 3, 0, 0, 4095, 1) + WORDS,
    "write-notify": one(2, 0, 0, 1, 900, 100, nid=5, val=9, q=1) + waitsome(1, 0, 64) + reset(1, 5) + WORDS,
    "read-notify": one(3, 1, 0, 0, 2048, 1000, nid=63, q=3) + waitsome(1, 60, 4) + WORDS,
    "edges": one(0, 0, 2048, 0, 0, 2048) + one(0, 0, 2049, 0, 0, 2048) + one(0, 1, 999, 1, 0, 1)
    + one(0, 1, 1000, 1, 0, 1) + one(0, 3, 1, 3, 0, 0) + one(0, 2, 0, 0, 0, 1),
    "notify": notify(0, 0, 1) + notify(3, 63, 200, q=2) + notify(1, 64, 1) + waitsome(3, 0, 64)
    + reset(3, 63) + reset(3, 64) + waitsome(0, 0, 0) + WORDS,
    "write-list": lst(7, [(0, 0, 1, 0, 100), (1, 500, 0, 3000, 400), (3, 0, 0, 4095, 1)], q=2) + WORDS,
    "read-list": lst(8, [(0, 0, 1, 0, 100), (0, 100, 1, 100, 100)]) + WORDS,
    "write-list-notify": lst(9, [(0, 0, 1, 0, 1000)] * 3, ns=1, nid=7, val=3) + waitsome(1, 0, 64) + WORDS,
    "read-list-notify": lst(10, [(1, 0, 0, 0, 1000), (0, 4000, 0, 0, 96)], ns=0, nid=1) + WORDS,
    "list-full": lst(7, [(0, i * 100, 1, i * 50, 50) for i in range(16)])
    + lst(7, [(0, i * 100, 1, i * 50, 50) for i in range(17)]) + WORDS,
    "queries": seg_query(0) + seg_query(2) + seg_query(3) + queue_query(0) + queue_query(4) + queue_query(3),
}



def cfg(*fields):
    """One configuration: the defaults with `fields` (index as in
    config.rs's `fields`, value as a raw u64) changed."""
    return bytes([len(fields)]) + b"".join(bytes([i, 3]) + struct.pack("<Q", v) for i, v in fields)


INIT = 0x80  # the flags byte: start a runtime with the last accepted one
CONFIG_SEEDS = {
    "defaults-init": bytes([INIT]) + cfg(),
    "gpi2-typical-init": bytes([INIT]) + cfg((7, 1024), (8, 8), (12, 65536), (11, 1 << 30), (17, 255)),
    "small-init": bytes([INIT]) + cfg((7, 1), (8, 1), (9, 1), (10, 1), (12, 1)),
    "limits-just-past": bytes([3]) + cfg((7, 4097)) + cfg((8, 17)) + cfg((10, 256)) + cfg((11, (1 << 30) + 1)),
    "zero-fields": bytes([3]) + cfg((7, 0)) + cfg((8, 0)) + cfg((11, 0)) + cfg((17, 0)),
    "notification-num-zero-init": bytes([INIT]) + cfg((12, 0)),
    "ports-groups": bytes([3]) + cfg((1, 1023)) + cfg((1, 65536)) + cfg((9, 257)) + cfg((9, 256)),
    "passive-allreduce": bytes([2]) + cfg((14, 65535), (16, 1 << 20)) + cfg((14, 65536)) + cfg((16, 0)),
}

for target, seeds in (("capi_calls", SEEDS), ("capi_config", CONFIG_SEEDS)):
    out = os.path.join(CORPUS, target)
    os.makedirs(out, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(out, "seed-" + name), "wb") as f:
            f.write(data)
    print(f"{len(seeds)} seeds in {out}")
