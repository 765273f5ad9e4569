# pick.py ALL.TXT A B: prints B if B's plain (device-driven-count) median is
# at most A's at every size and lower by >= 0.02 us at one at least, and B's
# route median is within one timer tick (0.017 us) of A's at every size;
# else A. (gpu26b's last call: the GPU tests then run on the binaries kept.)
import collections, json, re, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"^([A-Z]+)\d+ (\{.*)", line)
    if not m:
        continue
    try:
        r = json.loads(m.group(2))
    except ValueError:
        continue
    d[(m.group(1), r["transport"].split()[1], r["size"])].append(r["median_us"])
a, b = sys.argv[2], sys.argv[3]
sizes = sorted({k[2] for k in d if k[0] == a})
med = lambda t, s, z: statistics.median(d[(t, s, z)]) if d[(t, s, z)] else None
ok = bool(sizes) and all(med(b, "device-driven-count", z) is not None for z in sizes)
better = False
for z in sizes:
    if not ok:
        break
    pa, pb = med(a, "device-driven-count", z), med(b, "device-driven-count", z)
    ra, rb = med(a, "device-driven-route", z), med(b, "device-driven-route", z)
    ok = pb <= pa and rb <= ra + 0.017
    better = better or pb <= pa - 0.02
print(b if ok and better else a)
