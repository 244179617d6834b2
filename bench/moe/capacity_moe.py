#!/usr/bin/env python3
"""Expert capacity (--moe-capacity-factor) on the simulator: what token
dropping buys the static Megatron-style plan of a Mixtral-8x7B-shaped model
under routing skew, and what it costs in dropped rows (not measured).

    python3 bench/moe/capacity_moe.py --bin build/bin --workdir /tmp/bench-moe-capacity

The model and plan are bench/moe/plan_moe.py's (bench/paper/gpt_mlir.py's
32-layer generated IR, bf16; dp 16 x pp 4 with ep 8, 128 sequences of 2048
tokens, profiles/h200-node.json). For each Zipf skew S (--moe-skew) and
capacity factor C, the program is compiled to its schedule and simulated:
the step, the share of routed rows beyond the experts' capacity (which the
model no longer computes: the math changes, unlike shadowing and
rebalancing), and the busiest stage's peak memory (with a capacity the
dispatched buffers hold ep x P x capacity compact rows instead of ep x S
positional ones). A benchmark, not a test.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plan_moe import BATCH, SKEWS, setup  # noqa: E402

FACTORS = [0.0, 2.0, 1.25, 1.0]  # 0: dropless


def simulate(bin_dir, model, profile, skew, factor):
    cmd = [os.path.join(bin_dir, "merak-compile"), model, "--dp", "16", "--pp", "4", "--ep", "8",
           "--microbatches", str(BATCH // 16), "--moe-capacity-factor", str(factor),
           "--simulate", "--device-profile", profile, "--moe-skew", str(skew),
           "--compile-to=schedule", "--report=json", "-o", os.devnull]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stderr[-2000:], file=sys.stderr)
        return None
    sim = json.loads(p.stdout)["simulated"]
    return sim["step_time_s"], sim.get("moe_dropped") or 0.0, max(sim["peak_memory_bytes"])


def main():
    a, model = setup()
    print("| skew | capacity factor | step (s) | speed-up | rows dropped | peak memory (GB) |")
    print("|---:|---:|---:|---:|---:|---:|")
    for skew in SKEWS:
        base = None
        for factor in FACTORS:
            r = simulate(a.bin, model, a.profile, skew, factor)
            if not r:
                print("| %.1f | %s | failed | | | |" % (skew, factor or "dropless"))
                continue
            base = base or r
            print("| %.1f | %s | %.3f | %.2fx | %.1f %% | %.1f |" % (
                skew, factor or "dropless", r[0], base[0] / r[0], 100 * r[1], r[2] / 1e9))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
