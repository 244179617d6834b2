#!/usr/bin/env python3
"""Expert parallelism on CPU/MPI: step time, memory and losses per plan.

    $(scripts/venv-path.sh)/bin/python bench/moe/ep_step.py --bin build/bin --workdir /tmp/bench-ep

A Mixtral-shaped model from its transformers config (hidden 256,
intermediate 512, 8 experts, top-2, 2 layers, 4 heads, vocabulary 512,
random weights; transformers' batched_mm experts), exported with
TorchScript at opset 17 with a global batch of 8 x 64 tokens. Compiled
serially and at --dp 2 without and with --ep 2 (both dispatchers), AdamW;
prints per plan the parameter-and-state bytes of one rank (the compiler's
memory plan), the median step of steps 2..N (OMP_NUM_THREADS=1, one rank
per core on a 2-core machine), the all-to-all / all-gather bytes of a step
(--report), and the first and last losses. A benchmark, not a test.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "test", "zoo"))
from moe_step import VOCAB, export_mixtral  # noqa: E402  (the same Mixtral shape)
from zoo import MPIRUN  # noqa: E402

B = 8  # the global batch (moe_step.py's is 4)
PLANS = [  # (name, flags, ranks)
    ("serial", [], 1),
    ("dp2", ["--dp", "2"], 2),
    ("dp2 ep2 alltoall", ["--dp", "2", "--ep", "2"], 2),
    ("dp2 ep2 allgather", ["--dp", "2", "--ep", "2", "--moe-dispatcher", "allgather"], 2),
]


def expert_traffic(bin_dir, onnx_path, flags):
    """The "ep" collectives' bytes per step of rank 0 (--report=json)."""
    out = subprocess.run([os.path.join(bin_dir, "merak-compile"), onnx_path, "--optimizer",
                          "adamw", "--report=json"] + flags,
                         check=True, capture_output=True, text=True).stdout
    report = json.loads(out)
    total = 0
    for stage in report["stages"]:
        for kind, groups in stage["collectives"].items():
            if kind in ("all_to_all", "all_gather", "reduce_scatter") and "ep" in groups:
                total += groups["ep"]["bytes"]
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--steps", type=int, default=8)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    onnx_path = export_mixtral(a.workdir, B)
    tokens = os.path.join(a.workdir, "tokens.bin")
    np.random.default_rng(0).integers(0, VOCAB, 400000).astype(np.uint16).tofile(tokens)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    rows = []
    for name, flags, ranks in PLANS:
        exe = os.path.join(a.workdir, "train-" + name.replace(" ", "-"))
        out = subprocess.run([os.path.join(a.bin, "merak-compile"), onnx_path, "--optimizer",
                              "adamw", "-o", exe] + flags,
                             check=True, capture_output=True, text=True).stderr
        state = int(re.search(r"parameters and state (\d+) bytes", out).group(1))
        traffic = expert_traffic(a.bin, onnx_path, flags)
        metrics = exe + ".jsonl"
        if os.path.exists(metrics):
            os.remove(metrics)
        cmd = [exe, "--data", tokens, "--steps", str(a.steps), "--sampler", "sequential",
               "--metrics", metrics]
        if ranks > 1:
            cmd = MPIRUN + ["-np", str(ranks)] + cmd
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
        lines = [json.loads(l) for l in open(metrics)]
        step = statistics.median(l["time_ms"] for l in lines[1:])
        rows.append((name, state, traffic, step, lines[0]["loss"], lines[-1]["loss"]))
        print("%s: parameters and state %.2f MiB per rank, expert traffic %.2f MiB, step %.1f ms,"
              " losses %.6f -> %.6f" % (name, state / 2**20, traffic / 2**20, step,
                                        lines[0]["loss"], lines[-1]["loss"]))
        sys.stdout.flush()
    print("\n| plan | params + state per rank (MiB) | ep traffic per step (MiB) | step (ms) "
          "| first loss | last loss |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print("| %s | %.2f | %.2f | %.1f | %.6f | %.6f |" % (r[0], r[1] / 2**20, r[2] / 2**20,
                                                           r[3], r[4], r[5]))


if __name__ == "__main__":
    main()
