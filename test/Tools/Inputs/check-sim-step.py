"""Reads merak-compile --pp 2 --microbatches 1 --simulate --device-profile
tiny-profile.json --report=json on stdin and checks simulated.step_time_s
against the cost model by hand (see simulate-profile.test)."""
import json
import sys

r = json.load(sys.stdin)
# flops.f32 (efficiency 1), or the rate given (flops.bf16 of
# tiny-profile-bf16.json for --precision bf16).
rate = float(sys.argv[1]) if len(sys.argv) > 1 else 1e6
msg = 1e-3 + 1152 / 1.152e6     # inter-node latency + the 24x4x3 f32 cut
s0, s1 = (s["flops"] for s in r["stages"])
# The update: its FLOPs, then the grad-norm all-reduce over the two stages
# (one f32 on the inter-node link): 2 (n-1)/n * 4 B / bw + 2 (n-1) latency.
norm = 4 / 1.152e6 + 2e-3
# The pipeline runner copies each fragment's arguments and results into and
# out of the arena: 2 x bytes / memory bandwidth (1e12) per call.
copies = [r["stages"][s]["activations"]["copy_bytes"] for s in (0, 1)]
copy = 2 * (copies[0]["stage0_forward"] + copies[1]["stage1_forward"] +
            copies[1]["stage1_backward"] + copies[0]["stage0_backward"] +
            copies[0]["stage0_update"]) / 1e12
want = (s0["forward"] + s1["forward"] + s1["backward"] + s0["backward"] + s0["update"]) / rate \
    + 2 * msg + norm + copy
got = r["simulated"]["step_time_s"]
assert abs(got - want) < 1e-9 * want, (got, want)
print("step ok %.6e" % got)
mem = r["simulated"]["peak_memory_bytes"]
for s, m in zip(r["stages"], mem):
    a = s["activations"]
    assert m == s["param_bytes"] + s["optimizer_state_bytes"] + s["grad_accumulator_bytes"] \
        + a["arena_peak_bytes"] + a["stash_bytes"], (m, s)
print("memory ok", mem)
