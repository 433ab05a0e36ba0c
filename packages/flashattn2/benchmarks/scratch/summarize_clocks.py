"""Scratch: median SM clock and power per span of clocks.py's loops (the middle 3 of 4 seconds)."""
import csv
import datetime
import json
import os
import statistics
import sys

out = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", ".")
rows = []
for r in csv.reader(open(os.path.join(out, "clocks.csv"))):
    try:
        ts = datetime.datetime.strptime(r[0].strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()
        rows.append((ts, float(r[1]), float(r[2]), float(r[3])))
    except (ValueError, IndexError):
        pass
for s in json.load(open(os.path.join(out, "clock_spans.json"))):
    inside = [x for x in rows if s["start"] + 0.5 < x[0] < s["end"] - 0.5]
    if inside:
        print(s["shape"], s["causal"], s["name"], f"{s['ms_per_call']:.3f} ms/call",
              f"clock {statistics.median(x[1] for x in inside):.0f} MHz power {statistics.median(x[2] for x in inside):.0f} W "
              f"temp {statistics.median(x[3] for x in inside):.0f} C, {len(inside)} samples")
