import sys, json, re, statistics as st
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r'^(\S+?)(\d+) (\{.*)', line)
    if not m: continue
    tag, rnd, js = m.group(1), m.group(2), m.group(3)
    try: r = json.loads(js)
    except Exception: continue
    if 'gbps' not in r: continue
    key = f"{tag} {r.get('transport','')} {r.get('size')}"
    note = r.get('note', '')
    pw = re.search(r'posting ([\d.]+) us, wait ([\d.]+)', note)
    rows.setdefault(key, []).append((rnd, r['gbps'], r.get('ref_gbps'), pw.groups() if pw else None))
for k, v in rows.items():
    print(k, ' | '.join(f"{g:.0f}" + (f" ({p[0]}+{p[1]})" if p else '') for _, g, _, p in v))
