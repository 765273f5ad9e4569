#!/usr/bin/env python3
# summ.py FILE: per (tag without round, bench, transport, size): median of
# the launches' figures [lowest - highest]; GB/s for bandwidth, us else.
import json, re, sys, collections, statistics
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"^([A-Za-z]+)(\d+) (\{.*\})$", line.strip())
    if not m: continue
    tag, rec = m.group(1), json.loads(m.group(3))
    v = rec.get('gbps') if rec.get('gbps') is not None else rec.get('median_us')
    d[(rec.get('bench'), rec.get('size'), rec.get('transport'), tag)].append(v)
for k in sorted(d, key=lambda k: (str(k[0]), k[1] or 0, str(k[2]), k[3])):
    v = d[k]
    print(f"{k[0]:<10} {k[1]:>9} {k[3]:<8} {statistics.median(v):8.2f} [{min(v):.2f} - {max(v):.2f}] n={len(v)}  {k[2]}")
