#!/usr/bin/env python3
"""Expert capacity (--moe-capacity-factor) on CPU/MPI with a skewed router:
the step time, the rows dropped and the peak memory against dropless
expert parallelism.

    $(scripts/venv-path.sh)/bin/python bench/moe/capacity_step.py --bin build/bin --workdir /tmp/bench-capacity

The model, router skew (Zipf S = 1.5), batch and runs are
bench/moe/shadow_step.py's (hidden 256, 8 experts, top-2, 2 layers; global
batch 8 x 64 tokens; AdamW; OMP_NUM_THREADS=1; the 4-rank mesh
oversubscribes a 2-core machine). For --dp N --ep N, N = 2 and 4: dropless
against capacity factors 2, 1.25 and 1 (probs policy); prints the median
step of steps 5..13, the mean share of rows dropped (the metrics'
moe_drop_fraction, rank 0) and the largest rank's peak memory. Token
dropping changes the math, so the losses differ from dropless. A
benchmark, not a test.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shadow_step import run, setup  # noqa: E402

FACTORS = [None, "2.0", "1.25", "1.0"]  # None: dropless


def main():
    a, onnx_path, tokens = setup()
    print("| mesh | capacity factor | step (ms) | vs dropless | rows dropped | peak memory (MiB) |")
    print("|---|---:|---:|---:|---:|---:|")
    for n in (2, 4):
        mesh = ["--dp", str(n), "--ep", str(n)]
        base = None
        for factor in FACTORS:
            flags = mesh + (["--moe-capacity-factor", factor] if factor else [])
            r = run(a.bin, a.workdir, onnx_path, tokens, flags, n, a.steps, 5)
            base = base or r
            print("| dp %d ep %d | %s | %.1f | %.2fx | %.1f %% | %s |" % (
                n, n, factor or "dropless", r[0], base[0] / r[0], 100 * r[6], r[5]))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
