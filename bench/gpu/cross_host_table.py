#!/usr/bin/env python3
"""Issue 41's table from bench/gpu/cross-host.sh's JSON lines: every figure
a median over the runs of the call (spread: the runs' min - max), ratios,
and the goals with what misses and by how much.

Usage: cross_host_table.py cross.jsonl
"""
import json
import statistics
import sys

SIZES = [8, 4096, 65536, 1048576, 4194304]


def load(path):
    recs = []
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            try:
                recs.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return recs


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def spread(xs):
    xs = [x for x in xs if x is not None]
    return (min(xs), max(xs)) if xs else None


def fmt(xs, unit=""):
    m = med(xs)
    if m is None:
        return "-"
    lo, hi = spread(xs)
    if len(xs) == 1:
        return f"{m:.3g}{unit}"
    return f"{m:.3g}{unit} ({lo:.3g}-{hi:.3g})"


def main():
    recs = load(sys.argv[1])
    rows = {}  # name -> size -> [values]

    def put(name, size, v):
        rows.setdefault(name, {}).setdefault(size, []).append(v)

    for r in recs:
        case, bench, size = r.get("case"), r.get("bench"), r.get("size")
        tr = r.get("transport", "")
        if case == "gpu-pingpong" and bench == "gpu-pingpong":
            if "host-driven" in tr:
                put("ours GPU segments, host-driven", size, r.get("median_us"))
            elif tr.split()[1:2] == ["device-driven"]:
                put("ours GPU segments, device-driven", size, r.get("median_us"))
        elif case == "pingpong" and bench == "pingpong":
            put("ours host segments", size, r.get("median_us"))
            if r.get("ref_name") == "raw-tcp-pingpong":
                put("raw TCP ping-pong", size, r.get("ref_us"))
        elif case == "nccl":
            put("NCCL send/recv (socket)", size, r.get("median_us"))
            put("bw NCCL send stream", size, r.get("gbps_median"))
        elif case == "duplex":
            put("bw raw TCP both ways at once (sum)", 0, r.get("total_gbps"))
        elif case == "write-bw" and bench == "write-bw":
            put("bw ours host segments", size, r.get("gbps"))
            if r.get("ref_name") == "raw-tcp-stream":
                put("bw raw TCP stream", size, r.get("ref_gbps"))
        elif case == "gpu-bw" and bench == "gpu-bw":
            put("bw ours GPU to GPU", size, r.get("gbps"))
        elif case == "host-gpu-bw" and bench == "host-gpu-bw":
            put("bw ours CPU to GPU", size, r.get("gbps"))
        elif case == "read-bw" and bench == "read-bw":
            put("read/write time, windows of 16", size, r.get("ratio"))
        elif case == "read-bw" and bench == "read-one":
            put("read/write time, one request", size, r.get("ratio"))
            put("read, one request (us)", size, r.get("median_us"))
        elif case in ("matvec-gpu", "matvec-host", "matvec-cpu") and "batch" in r:
            put(f"{case} M vectors/s", r["batch"], r.get("mvecs_per_s"))
            put(f"{case} max rel err", r["batch"], r.get("max_rel_err"))
        elif case == "matvec-2gpu-nodes" and r.get("mode") == "gpu-multi":
            put(f"matvec 1 CPU node -> {r['gpus']} GPU node(s) M vectors/s", r["batch"], r.get("mvecs_per_s"))
            put(f"matvec {r['gpus']} GPU node(s) max rel err", r["batch"], r.get("max_rel_err"))

    lat = ["ours GPU segments, host-driven", "ours GPU segments, device-driven", "ours host segments",
           "raw TCP ping-pong", "NCCL send/recv (socket)"]
    print("\n## Half round trip across two namespaces (us): median over runs (min-max)")
    print("| | " + " | ".join(str(s) for s in SIZES) + " |")
    print("|---|" + "---|" * len(SIZES))
    for name in lat:
        if name in rows:
            print(f"| {name} | " + " | ".join(fmt(rows[name].get(s, [])) for s in SIZES) + " |")
    print("\n## Reads of host segments beside writes, same run (read time / write time)")
    for name in ("read/write time, windows of 16", "read/write time, one request", "read, one request (us)"):
        if name in rows:
            print(f"| {name} | " + " | ".join(fmt(rows[name].get(s, [])) for s in SIZES) + " |")
    print("\n## Bandwidth across two namespaces (GB/s)")
    for name in sorted(k for k in rows if k.startswith("bw ")):
        if 0 in rows[name]:
            print(f"| {name[3:]} | {fmt(rows[name][0])} |")
            continue
        print(f"| {name[3:]} | " + " | ".join(f"{s}: {fmt(rows[name].get(s, []))}" for s in (1048576, 4194304)) + " |")
    print("\n## The mixed job (M vectors/s at batch 7680 / 15360)")
    for name in sorted(k for k in rows if k.startswith("matvec")):
        print(f"| {name} | " + " | ".join(f"{b}: {fmt(rows[name].get(b, []))}" for b in (7680, 15360)) + " |")

    print("\n## Goals")
    m = lambda name, s: med(rows.get(name, {}).get(s, []))
    for drv in ("host-driven", "device-driven"):
        name = f"ours GPU segments, {drv}"
        for s in SIZES:
            ours, host, nccl = m(name, s), m("ours host segments", s), m("NCCL send/recv (socket)", s)
            if ours is None:
                continue
            limit = 2.0 if s <= 4096 else 1.2
            if host is not None:
                ratio = ours / host
                print(f"{drv} {s} B: {ours:.3g} us = {ratio:.3f}x host segments (goal <= {limit}): {'met' if ratio <= limit else 'NOT met'}")
            elif s == 4194304:
                print(f"{drv} {s} B: {ours:.3g} us (no host-segment figure at this size)")
            if nccl is not None:
                print(f"{drv} {s} B: {ours / nccl:.3f}x NCCL (goal < 1): {'met' if ours < nccl else 'NOT met'}")
    for s in (1048576, 4194304):
        g, h = m("bw ours GPU to GPU", s), m("bw ours host segments", s)
        if g is not None and h is not None:
            print(f"GPU-to-GPU bandwidth {s} B: {g:.3g} GB/s = {g / h:.3f} of host segments' {h:.3g} (goal >= 0.9): {'met' if g / h >= 0.9 else 'NOT met'}")
    for s in SIZES:
        for name in ("read/write time, windows of 16", "read/write time, one request"):
            v = m(name, s)
            if v is not None:
                print(f"{name} {s} B: {v:.3f} (goal <= 1.1): {'met' if v <= 1.1 else 'NOT met'}")
    raw = m("bw raw TCP stream", 4194304) or m("bw raw TCP stream", 1048576)
    if raw:
        ceiling = raw * 1e9 / 128 / 1e6
        for b in (7680, 15360):
            v = m("matvec-gpu M vectors/s", b)
            if v is not None:
                print(f"mixed job batch {b}: {v:.3g} M vectors/s = {v / ceiling:.3f} of the link ceiling {ceiling:.3g} (raw TCP stream {raw:.3g} GB/s / 128 B; goal >= 0.8): {'met' if v / ceiling >= 0.8 else 'NOT met'}")
    duplex = m("bw raw TCP both ways at once (sum)", 0)
    if duplex:
        ceiling2 = duplex * 1e9 / 256 / 1e6
        for b in (7680, 15360):
            v = m("matvec-gpu M vectors/s", b)
            if v is not None:
                print(f"mixed job batch {b}: {v:.3g} M vectors/s = {v / ceiling2:.3f} of the both-ways ceiling {ceiling2:.3g} (raw TCP both ways at once {duplex:.3g} GB/s / 256 B: 128 in, 128 back)")
    for b in (7680, 15360):
        one = m("matvec 1 CPU node -> 1 GPU node(s) M vectors/s", b)
        two = m("matvec 1 CPU node -> 2 GPU node(s) M vectors/s", b)
        if one and two:
            print(f"two GPU nodes batch {b}: {two:.3g} / {one:.3g} = {two / one:.3f}x one (goal >= 1.8): {'met' if two / one >= 1.8 else 'NOT met'}")
    errs = [v for k, d in rows.items() if "err" in k for vs in d.values() for v in vs if v is not None]
    if errs:
        print(f"products checked: largest relative error {max(errs):.2e}")


if __name__ == "__main__":
    main()
