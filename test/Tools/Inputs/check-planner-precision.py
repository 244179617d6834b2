"""Reads the --report=json of two planner runs of the same model on
tiny-profile-bf16.json (bf16 GEMMs 4x the f32 rate, compute-bound): with
--precision fp32 and with --precision bf16. The bf16 plan's step must be
the faster by most of the 4x: its GEMMs are bf16 (merak-mixed-precision)
and the planner must cost them at the bf16 rate (it once read the dtype
before the precision pass and costed them as f32)."""
import json
import sys

fp32, bf16 = (json.load(open(p))["planner"]["chosen"]["step_time_s"] for p in sys.argv[1:3])
ratio = fp32 / bf16
assert 2.5 < ratio <= 4.0, (fp32, bf16, ratio)
print("bf16 plan %.2fx faster" % ratio)
