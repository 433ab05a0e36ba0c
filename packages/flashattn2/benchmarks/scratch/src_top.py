"""Scratch: top SASS instructions by warp-stall samples from `ncu --page source --csv` output."""
import csv
import sys
from collections import defaultdict

rows = list(csv.reader(open(sys.argv[1], errors="replace")))
hdr_i = next(i for i, r in enumerate(rows) if any(c == "Source" or "Address" in c for c in r))
hdr = rows[hdr_i]
print("columns:", hdr)
src = next(i for i, c in enumerate(hdr) if c.strip() == "Source")
cols = [i for i, c in enumerate(hdr) if "Sampl" in c]
def num(x):
    try: return float(x.replace(",", ""))
    except ValueError: return 0.0
body = [r for r in rows[hdr_i + 1:] if len(r) == len(hdr)]
for ci in cols:
    tot = sum(num(r[ci]) for r in body)
    print(f"\n== {hdr[ci]}: total {tot:.0f}")
    byop = defaultdict(float)
    for r in body:
        op = r[src].strip().split(" ")[0] if not r[src].strip().startswith("@") else r[src].strip().split(" ")[1]
        byop[op] += num(r[ci])
    for op, s in sorted(byop.items(), key=lambda t: -t[1])[:15]:
        print(f"  {op:28} {s:8.0f} {100*s/max(tot,1):5.1f}%")
    print("  -- top instructions")
    for r in sorted(body, key=lambda r: -num(r[ci]))[:30]:
        print(f"  {num(r[ci]):8.0f} {100*num(r[ci])/max(tot,1):5.1f}%  {r[0][:8]} {r[src].strip()[:110]}")
