import csv
import gzip
import sys

rows = list(csv.reader(gzip.open(sys.argv[1], "rt", errors="replace")))
hdr = rows[1]; body = [r for r in rows[2:] if len(r) >= len(hdr) - 1]
ai = hdr.index("Warp Stall Sampling (All Samples)"); ei = hdr.index("Instructions Executed")
def num(x):
    try: return float(x.replace(",", ""))
    except ValueError: return 0.0
# consumer segments: the two largest blocks containing HGMMA
segs = []; start = 0
for i, r in enumerate(body):
    s = r[1]
    if any(m in s for m in ("EXIT", "USETMAXREG", "BAR.SYNC.DEFER_BLOCKING 0x1")):
        segs.append((start, i)); start = i + 1
cons = sorted([sg for sg in segs if any("HGMMA" in body[j][1] for j in range(*sg))], key=lambda sg: sg[1]-sg[0])[-2:]
print("consumer segments", cons)
stall_cols = [i for i, c in enumerate(hdr) if c.startswith("stall_") and "Not Issued" not in c]
for sg in cons:
    part = body[sg[0]:sg[1]]
    tot = sum(num(r[ai]) for r in part)
    print(f"== {sg} samples {tot:.0f}, reasons:", {hdr[i][6:]: round(100*sum(num(r[i]) for r in part)/tot, 1) for i in stall_cols if sum(num(r[i]) for r in part) > 0.01*tot})
    top = sorted(range(len(part)), key=lambda i: -num(part[i][ai]))[:int(sys.argv[2])]
    for i in sorted(top):
        r = part[i]
        print(f"  {sg[0]+i:5d} {num(r[ai]):6.0f} {100*num(r[ai])/tot:5.1f}% {','.join(hdr[c][6:]+':'+r[c] for c in stall_cols if num(r[c]) > 0.2*num(r[ai])):28} {r[1].strip()[:80]}")
