#!/usr/bin/env python3
"""Expert-parallel plans for a Mixtral-8x7B-shaped model under routing skew,
on the simulator (not measured).

    python3 bench/moe/plan_moe.py --bin build/bin --workdir /tmp/bench-moe-plan

The model is bench/paper/gpt_mlir.py's generated IR (bf16, no weights): 32
layers, hidden 4096, 32 heads, sequence 2048, vocabulary 32000, and in
every layer a Mixture-of-Experts block of 8 experts (top-2, expert hidden
14336); global batch 128 sequences. Every plan is compiled to its schedule
and simulated (`--simulate`) with profiles/h200-node.json (8 GPUs per
node, 64 in all) under a Zipf routing skew S (`--moe-skew`: expert e gets a
share of the rows proportional to (e + 1)^-S; the busiest rank's expert
GEMMs and all-to-alls set the pace).

The static Megatron-style plan is dp 16 x pp 4 with ep 8 (all-to-all
dispatcher, no shadowing, no rebalancing). merak's choice here is the
fastest simulated plan that fits the GPU's memory among dp x tp x pp
meshes of 64 GPUs with every ep dividing dp (ep 1: the experts stay with
the tokens, tensor-parallel when tp > 1) and, with ep > 1, dynamic
shadowing of 0, 1 or 2 experts per layer (`--moe-shadow`: the simulator
applies merak.expert_shadow_plan's greedy rule to the skewed shares and
counts the weights' broadcast and the copies' GEMMs) and, where a rank
holds several experts (ep 2, 4), dynamic placement (`--moe-rebalance-every
50`: the simulator places the experts as the trainer's rebalancing does,
the hottest first onto the least loaded rank; the moves, paid once when
the routing settles, are not counted). A second table
holds the static mesh with shadowing alone, and a third merak's own
planner (`merak-compile --devices 64 --moe-skew S`: its search over
meshes, schedules, recomputation and ZeRO, then ep and shadowing on the
best plans' compiled programs). A benchmark, not a test.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "bench", "paper"))
import gpt_mlir  # noqa: E402

SKEWS = [0.0, 0.5, 1.0, 1.5]
STATIC = (16, 1, 4, 8)  # dp, tp, pp, ep
MESHES = [(16, 1, 4), (8, 2, 4), (8, 1, 8), (8, 8, 1), (4, 4, 4)]
BATCH = 128


def simulate(bin_dir, model, profile, dp, tp, pp, ep, skew, shadow=0, rebalance=0):
    m = BATCH // dp
    cmd = [os.path.join(bin_dir, "merak-compile"), model, "--dp", str(dp), "--tp", str(tp),
           "--pp", str(pp), "--ep", str(ep), "--moe-shadow", str(shadow),
           "--moe-rebalance-every", str(rebalance),
           "--microbatches", str(m), "--simulate",
           "--device-profile", profile, "--moe-skew", str(skew), "--compile-to=schedule",
           "--report=json", "-o", os.devnull]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None
    sim = json.loads(p.stdout)["simulated"]
    with open(profile) as f:
        memory = json.load(f).get("memory_bytes", 0)
    fits = not memory or max(sim["peak_memory_bytes"]) <= memory
    return sim["step_time_s"], fits, max(sim["peak_memory_bytes"])


def planner(bin_dir, model, profile, skew):
    """merak-compile --devices 64's own choice at this skew: (plan, simulated step)."""
    cmd = [os.path.join(bin_dir, "merak-compile"), model, "--devices", "64",
           "--device-profile", profile, "--moe-skew", str(skew), "--report=json"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None
    c = json.loads(p.stdout)["planner"]["chosen"]
    name = "dp %d tp %d pp %d mb %d %s ep %d shadow %d rebalance %d" % (
        c["dp"], c["tp"], c["pp"], c["microbatches"], c["schedule"], c["ep"], c["moe_shadow"],
        c.get("moe_rebalance_every", 0))
    return name, c.get("simulated_step_time_s")


def setup():
    """The command line (--bin, --workdir, --profile) and the generated
    Mixtral-8x7B-shaped model's path in the work directory."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--profile", default=os.path.join(ROOT, "profiles", "h200-node.json"))
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    model = os.path.join(a.workdir, "mixtral-8x7b.mlir")
    with open(model, "w") as f:
        f.write(gpt_mlir.generate(32, 4096, 32, 2048, 32000, BATCH, "bf16", experts=8, top_k=2,
                                  ffn=14336))
    return a, model


def main():
    a, model = setup()
    rows, shadowed, planned = [], [], []
    for skew in SKEWS:
        planned.append((skew, planner(a.bin, model, a.profile, skew)))
        print("skew %.1f: the planner chooses %s" % (skew, planned[-1][1]))
        results = {}
        for dp, tp, pp in MESHES:
            for ep in (1, 2, 4, 8):
                if dp % ep:
                    continue
                for shadow in ((0, 1, 2) if ep > 1 else (0,)):
                    for rebalance in ((0, 50) if ep in (2, 4) else (0,)):
                        r = simulate(a.bin, model, a.profile, dp, tp, pp, ep, skew, shadow,
                                     rebalance)
                        if r:
                            results[(dp, tp, pp, ep, shadow, rebalance)] = r
                            print("skew %.1f dp %d tp %d pp %d ep %d shadow %d rebalance %d: "
                                  "step %.3f s, peak %.1f GB%s" % (
                                      skew, dp, tp, pp, ep, shadow, rebalance, r[0], r[2] / 1e9,
                                      "" if r[1] else " (does not fit)"))
                            sys.stdout.flush()
        static = results.get(STATIC + (0, 0))
        shadowed.append((skew, static, [results.get(STATIC + (n, 0)) for n in (1, 2)]))
        fitting = {k: v for k, v in results.items() if v[1]}
        best = min(fitting, key=lambda k: fitting[k][0]) if fitting else None
        rows.append((skew, static, best, fitting.get(best)))
    print("\n| skew | static dp16 pp4 ep8 (s) | merak's choice | its step (s) | speed-up |")
    print("|---:|---:|---|---:|---:|")
    for skew, static, best, r in rows:
        if not static or not best:
            print("| %.1f | %s | %s | | |" % (skew, static and "%.3f" % static[0], best))
            continue
        print("| %.1f | %.3f%s | dp %d tp %d pp %d ep %d shadow %d rebalance %d | %.3f | %.2fx |" % (
            skew, static[0], "" if static[1] else " (no fit)", *best, r[0], static[0] / r[0]))
    print("\n| skew | static dp16 pp4 ep8 (s) | merak-compile --devices 64 chooses | its step (s) "
          "| speed-up |")
    print("|---:|---:|---|---:|---:|")
    for (skew, static, _, _), (_, p) in zip(rows, planned):
        if static and p and p[1]:
            print("| %.1f | %.3f | %s | %.3f | %.2fx |" % (skew, static[0], p[0], p[1],
                                                         static[0] / p[1]))
    print("\n| skew | static (s) | + --moe-shadow 1 (s) | speed-up | + --moe-shadow 2 (s) | "
          "speed-up |")
    print("|---:|---:|---:|---:|---:|---:|")
    for skew, static, (one, two) in shadowed:
        if static and one and two:
            print("| %.1f | %.3f | %.3f | %.2fx | %.3f | %.2fx |" % (
                skew, static[0], one[0], static[0] / one[0], two[0], static[0] / two[0]))


if __name__ == "__main__":
    main()
