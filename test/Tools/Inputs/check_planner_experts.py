"""merak-compile --devices on a Mixture-of-Experts model searches ep,
--moe-shadow, --moe-rebalance-every and --moe-chunks on compiled programs
(refinePlanForExperts). Checks, for one --moe-skew and memory budget: the
planner says so; its chosen plan, compiled again from the command line with
the plan's flags and --simulate, gives the same simulated step and fits; and
no other ep / shadow / rebalancing / chunking of that mesh that fits
simulates faster.
Prints one OK line per check.

    check_planner_experts.py MERAK_COMPILE MODEL.mlir PROFILE SKEW MEMORY
"""
import json
import subprocess
import sys

compiler, model, profile, skew, memory = sys.argv[1:6]


def simulate(c, ep, shadow, rebalance, chunks=1):
    zero = c["zero"]
    cmd = [compiler, model, "--dp", str(c["dp"]), "--tp", str(c["tp"]), "--pp", str(c["pp"]),
           "--microbatches", str(c["microbatches"]), "--schedule", c["schedule"],
           "--recompute", c["recompute"], "--zero", "1" if zero else "0",
           "--ep", str(ep), "--moe-shadow", str(shadow), "--moe-rebalance-every", str(rebalance),
           "--moe-chunks", str(chunks),
           "--simulate", "--moe-skew", skew,
           "--device-profile", profile, "--memory-per-device", memory,
           "--compile-to=schedule", "--report=json", "-o", "/dev/null"]
    if c["virtual_stages"] > 1:
        cmd += ["--virtual-stages", str(c["virtual_stages"])]
    if c["overlap"] and c["tp"] > 1:
        cmd += ["--tp-overlap", "sub-pipeline"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        # A variant whose stage cannot fit even with full recomputation is
        # refused by merak-recompute: it does not fit (None); any other
        # failure is an error.
        if "more than memory-per-device" in run.stderr:
            return None
        raise subprocess.CalledProcessError(run.returncode, cmd, run.stdout, run.stderr)
    sim = json.loads(run.stdout)["simulated"]
    return sim["step_time_s"], max(sim["peak_memory_bytes"])


out = subprocess.run([compiler, model, "--devices", "8", "--device-profile", profile,
                      "--moe-skew", skew, "--memory-per-device", memory, "--report=json"],
                     check=True, capture_output=True, text=True).stdout
plan = json.loads(out)["planner"]
chosen = plan["chosen"]
assert any("Mixture-of-Experts model" in n for n in plan["notes"]), plan["notes"]
print("OK searched: %s" % [n for n in plan["notes"] if "Mixture" in n][0])
result = simulate(chosen, chosen["ep"], chosen["moe_shadow"], chosen["moe_rebalance_every"],
                  chosen["moe_chunks"])
assert result is not None, ("the chosen plan does not compile within the memory", chosen)
step, peak = result
limit = float(memory)
assert abs(step - chosen["simulated_step_time_s"]) <= 1e-9 * step, (step, chosen)
assert peak <= limit, (peak, limit)
print("OK chosen ep %d shadow %d rebalance %d chunks %s: %.4e s, %d bytes <= %d" % (
    chosen["ep"], chosen["moe_shadow"], chosen["moe_rebalance_every"], chosen["moe_chunks"], step,
    peak, limit))
faster = []
for ep in [d for d in range(1, chosen["dp"] + 1) if chosen["dp"] % d == 0]:
    for shadow in ((0, 1, 2) if ep > 1 else (0,)):
        # Rebalancing: several experts per rank (8 here).
        for rebalance in ((0, 50) if 1 < ep <= 4 else (0,)):
            for chunks in ((1, "auto") if ep > 1 and shadow == 0 else (1,)):
                result = simulate(chosen, ep, shadow, rebalance, chunks)
                if result is None:
                    continue
                s, m = result
                if m <= limit and s < step * (1 - 1e-9):
                    faster.append((ep, shadow, rebalance, chunks, s))
assert not faster, faster
print("OK no other ep / shadow / rebalancing / chunking of dp %d tp %d pp %d that fits is "
      "faster" % (
    chosen["dp"], chosen["tp"], chosen["pp"]))
