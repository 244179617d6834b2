#!/usr/bin/env python3
"""Dynamic shadowing (--moe-shadow), placement (--moe-rebalance-every) and
chunked all-to-alls (--moe-chunks) on CPU/MPI with a skewed router.

    $(scripts/venv-path.sh)/bin/python bench/moe/shadow_step.py --bin build/bin --workdir /tmp/bench-shadow

bench/moe_step.py's Mixtral shape (hidden 256, intermediate 512, 8
experts, top-2, 2 layers; random weights) with each router's logits
offset by -S log(e + 1) (a constant in the export), so that expert e's
prior share of the rows is proportional to (e + 1)^-S: the simulator's
Zipf skew (--moe-skew S), here measured. Global batch 8 x 64 tokens,
AdamW, OMP_NUM_THREADS=1. For each mesh (--dp N --ep N) the static plan
(all-to-all, no shadowing, no rebalancing) runs against --moe-shadow 1
and 2 (min_rows from the cost model: 192 rows here), --moe-rebalance-every
K (default 5; the move taken only when it pays by the cost model: 576
rows saved over the next K steps per moved expert here; "forced" with
./train --moe-rebalance-min-rows 0, whenever it balances the rows at
all), shadowing with rebalancing, and --moe-chunks 2 and 4 (the
all-to-alls in chunks started under the previous chunk's GEMM); prints
the median step of steps K..N-1 (after the first rebalancing; the same
steps for every plan), the step that moved experts (its time includes
the move), the experts shadowed per step (the metrics' moe_shadowed: per
layer and micro-batch), the experts moved in all, and the losses, which
must agree (<= 1e-6). The
4-rank mesh runs 4 processes on however many cores there are (on the
2-core CI machine, oversubscribed: its times are mostly waiting). A
benchmark, not a test.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "test", "zoo"))
from moe_step import T, VOCAB, mixtral_model  # noqa: E402
from zoo import MPIRUN  # noqa: E402

B = 8


def skewed_export(workdir, skew):
    """mixtral_model() with Zipf-skewed routers, exported like moe_step.py's."""
    model = mixtral_model()
    for name, gate in model.named_modules():
        if not name.endswith("mlp.gate"):
            continue
        offset = -skew * torch.log(torch.arange(1, gate.weight.shape[0] + 1, dtype=torch.float32))

        def forward(h, gate=gate, offset=offset):
            h = h.reshape(-1, gate.hidden_dim)
            logits = torch.nn.functional.linear(h, gate.weight) + offset
            probs = torch.softmax(logits.float(), dim=-1)
            top, idx = torch.topk(probs, gate.top_k, dim=-1)
            return logits, top / top.sum(dim=-1, keepdim=True), idx
        gate.forward = forward
    path = os.path.join(workdir, "mixtral-skew.onnx")
    torch.onnx.export(model, (torch.zeros(B, T, dtype=torch.int64),), path, dynamo=False,
                      opset_version=17, input_names=["input_ids"], output_names=["logits"],
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    return path


def run(bin_dir, workdir, onnx_path, tokens, flags, ranks, steps, first, run_flags=()):
    exe = os.path.join(workdir, "train" + "".join(f.strip("-") for f in flags))
    subprocess.run([os.path.join(bin_dir, "merak-compile"), onnx_path, "--optimizer", "adamw",
                    "-o", exe] + flags, check=True, capture_output=True)
    metrics = exe + ".jsonl"
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = MPIRUN + ["--oversubscribe", "-np", str(ranks), exe, "--data", tokens, "--steps",
                    str(steps), "--sampler", "sequential", "--metrics", metrics] + list(run_flags)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                         env=dict(os.environ, OMP_NUM_THREADS="1",
                                  OPENBLAS_NUM_THREADS="1")).stdout
    lines = [json.loads(l) for l in open(metrics)]
    moves = [l["time_ms"] for l in lines if l.get("moe_moved", 0) > 0]
    # The trainer's last line: "... | peak memory N MiB (largest rank)".
    peak = re.search(r"peak memory (\d+) MiB", out)
    return (statistics.median(l["time_ms"] for l in lines[first:]),
            statistics.mean(l.get("moe_shadowed", 0) for l in lines),
            [l["loss"] for l in lines], sum(l.get("moe_moved", 0) for l in lines),
            moves[0] if moves else None, int(peak.group(1)) if peak else None,
            statistics.mean(l.get("moe_drop_fraction", 0) for l in lines))


def variants(k):
    """(label, merak-compile flags, ./train flags); "forced" moves experts
    whenever that balances the rows at all (--moe-rebalance-min-rows 0)."""
    rebalance, forced = ["--moe-rebalance-every", str(k)], ["--moe-rebalance-min-rows", "0"]
    return (("static", [], []), ("shadow 1", ["--moe-shadow", "1"], []),
            ("shadow 2", ["--moe-shadow", "2"], []), ("rebalance %d" % k, rebalance, []),
            ("rebalance %d forced" % k, rebalance, forced),
            ("shadow 2 + rebalance %d" % k, ["--moe-shadow", "2"] + rebalance, []),
            ("shadow 2 + rebalance %d forced" % k, ["--moe-shadow", "2"] + rebalance, forced),
            ("chunks 2", ["--moe-chunks", "2"], []), ("chunks 4", ["--moe-chunks", "4"], []))


def setup(extra=()):
    """The command line (--bin, --workdir, --steps, --skew and `extra`
    (flag, type, default) triples), the skewed export and a token file in
    the work directory."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--steps", type=int, default=14)
    ap.add_argument("--skew", type=float, default=1.5)
    for flag, kind, default in extra:
        ap.add_argument(flag, type=kind, default=default)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    onnx_path = skewed_export(a.workdir, a.skew)
    tokens = os.path.join(a.workdir, "tokens.bin")
    np.random.default_rng(0).integers(0, VOCAB, 400000).astype(np.uint16).tofile(tokens)
    return a, onnx_path, tokens


def main():
    a, onnx_path, tokens = setup([("--rebalance-every", int, 5)])
    rows = []
    for n in (2, 4):
        mesh = ["--dp", str(n), "--ep", str(n)]
        k = a.rebalance_every
        static = run(a.bin, a.workdir, onnx_path, tokens, mesh, n, a.steps, k)
        for label, flags, run_flags in variants(k):
            r = static if not flags else run(a.bin, a.workdir, onnx_path, tokens, mesh + flags,
                                             n, a.steps, k, run_flags)
            err = max(abs(x - y) / abs(y) for x, y in zip(r[2], static[2]))
            move = "%.1f" % r[4] if r[4] is not None else "-"
            rows.append((n, label, r[0], r[1], r[3], move, static[0] / r[0], err))
            print("dp %d ep %d %s: step %.1f ms (%.2fx static), %.1f experts shadowed per step, "
                  "%d moved (that step %s ms), losses %.6f -> %.6f, max rel err vs static "
                  "%.1e" % (n, n, label, r[0], static[0] / r[0], r[1], r[3], move, r[2][0],
                            r[2][-1], err))
            sys.stdout.flush()
    print("\n| mesh | plan | step (ms) | vs static | shadowed per step | moved | moving step "
          "(ms) | loss rel err |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for n, label, step, shadowed, moved, move, speed, err in rows:
        print("| dp %d ep %d | %s | %.1f | %.2fx | %.1f | %d | %s | %.1e |" % (
            n, n, label, step, speed, shadowed, moved, move, err))


if __name__ == "__main__":
    main()
