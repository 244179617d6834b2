#!/usr/bin/env python3
"""Checks a shifted-critical-path --simulate-trace against the traces of
1F1B with full recomputation and without: on a stage s < p - 1 the `rcp`
and `bwd` of a micro-batch add up to 1F1B-full's backward (the split moves
time, it does not create or drop any); the last stage runs 1F1B without
recomputation (no rcp, the backward of --recompute none); `fwd-keep` (K) on
the last p - s - 1 micro-batches of stage s and `rcp` (R) on the others.

    check-scp-trace.py SCP.json FULL.json NONE.json STAGES MICROBATCHES
"""
import json
import sys


def events(path):
    out = {}
    for e in json.load(open(path))["traceEvents"]:
        if e.get("ph") == "X":
            out[(e["tid"], e["name"])] = e["dur"]
    return out


scp, full, none = (events(p) for p in sys.argv[1:4])
p, m = int(sys.argv[4]), int(sys.argv[5])
tol = 0.002  # the traces print microseconds with 3 decimals
bad = []
for s in range(p):
    kept = 0 if s == p - 1 else min(m, p - s - 1)
    for mb in range(m):
        keep = mb >= m - kept
        if ((s, "K%d" % mb) in scp) != keep or ((s, "F%d" % mb) in scp) == keep:
            bad.append("stage %d mb %d: fwd-keep expected %s" % (s, mb, keep))
        rcp = scp.get((s, "R%d" % mb))
        if s == p - 1 or keep:
            if rcp is not None:
                bad.append("stage %d mb %d: unexpected rcp" % (s, mb))
            if s == p - 1 and abs(scp[(s, "B%d" % mb)] - none[(s, "B%d" % mb)]) > tol:
                bad.append("stage %d mb %d: last stage's bwd is not none's" % (s, mb))
            continue
        if rcp is None or rcp <= 0:
            bad.append("stage %d mb %d: no rcp" % (s, mb))
            continue
        total = rcp + scp[(s, "B%d" % mb)]
        if abs(total - full[(s, "B%d" % mb)]) > tol:
            bad.append("stage %d mb %d: rcp + bwd = %.3f, 1f1b full bwd %.3f"
                       % (s, mb, total, full[(s, "B%d" % mb)]))
print("\n".join(bad) if bad else "scp trace ok")
sys.exit(1 if bad else 0)
