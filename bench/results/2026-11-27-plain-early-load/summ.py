# summ.py FILE: median [lowest - highest launch median] of each gpu-pingpong
# and NVSHMEM record per size, by the TAGn prefix of callb.sh's lines.
import json,sys,re,statistics,collections
d=collections.defaultdict(list)
for line in open(sys.argv[1]):
    m=re.match(r"^([A-Z]+)\d+ (\{.*)",line)
    if not m: continue
    try: r=json.loads(m.group(2))
    except: continue
    if 'median_us' not in r: continue
    d[(m.group(1)+' '+r['transport'].replace('cuda-ipc ','').replace(' words-device',''),r['size'])].append(float(r['median_us']))
names=sorted({k[0] for k in d}); sizes=sorted({k[1] for k in d})
for n in names:
    if 'host-driven' in n: continue
    row=[]
    for s in sizes:
        v=d.get((n,s))
        if v: row.append(f"{s}:{statistics.median(v):.2f}[{min(v):.2f}-{max(v):.2f}]")
    print(f"{n[:40]:40s} "+"  ".join(row))
