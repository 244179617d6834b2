"""Step time with and without communication/computation overlap (merak-overlap).

    /usr/bin/python3 bench/overlap_step.py --bin build/bin --workdir /tmp/bench-overlap \
        [--model small|29m] [--steps 12] [--rounds 2] [--mesh dp2 --mesh tp2 ...]

For each mesh (dp2: --dp 2; tp2: --tp 2; dp2tp2: both; dp2m2: --dp 2
--microbatches 2, a one-stage pipeline) the GPT is compiled
twice, without overlap (--dp-overlap off --tp-overlap none: every
collective blocking) and with it (--dp-overlap on, and --tp-overlap
sub-pipeline when tp > 1), and both programs train on the same random
tokens under `mpirun --oversubscribe -np ranks`, OMP_NUM_THREADS=1. The
two are run alternately `--rounds` times; a variant's time is the median
step (after 3 warm-up steps) over all its rounds. Prints a table and the
ratio overlap / blocking (< 1: overlap is faster), and checks that both
variants' losses agree (they compute the same thing).

Models: `small` (d=128, 4 layers, 4 heads, seq 64, batch 8, vocab 512: the
model of parallel_step.py) or `29m` (d=512, 8 layers, 8 heads, seq 128,
batch 8, vocab 8192: 29M parameters, the memory benchmark's GPT). AdamW,
`--frozen '*.attn.bias'`. A benchmark, not a test: with MPI on a CPU the
non-blocking collectives progress only inside MPI calls (the generated
step polls them between kernels), and on a 2-core machine shared with
other work the effect is small and noisy.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import numpy as np

from gpt_onnx import export_gpt

MODELS = {"small": dict(B=8, T=64, D=128, L=4, H=4, V=512),
          "29m": dict(B=8, T=128, D=512, L=8, H=8, V=8192)}
# mesh -> (dp, tp, micro-batches); dp2m2 is a one-stage pipeline (gradient
# accumulation): its dp all-reduce runs under the last micro-batch's
# backward (@stage0_backward_last).
MESHES = {"dp2": (2, 1, 1), "tp2": (1, 2, 1), "dp2tp2": (2, 2, 1), "dp2m2": (2, 1, 2)}
WARMUP = 3
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--model", choices=sorted(MODELS), default="small")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--mesh", action="append", choices=sorted(MESHES))
    args = ap.parse_args()
    c = MODELS[args.model]
    os.makedirs(args.workdir, exist_ok=True)
    onnx_path = os.path.join(args.workdir, "gpt-%s.onnx" % args.model)
    export_gpt(onnx_path, c["V"], c["D"], c["H"], c["L"], c["T"])
    tokens = os.path.join(args.workdir, "tokens.bin")
    np.random.default_rng(0).integers(0, c["V"], 200000).astype(np.uint16).tofile(tokens)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    print("GPT %s: d=%d layers=%d heads=%d seq=%d batch=%d vocab=%d, AdamW, %d steps x %d "
          "rounds, %d CPU cores" % (args.model, c["D"], c["L"], c["H"], c["T"], c["B"], c["V"],
                                    args.steps, args.rounds, os.cpu_count()))
    print("| mesh | blocking (median) | overlap (median) | overlap / blocking | losses agree |")
    print("|---|---:|---:|---:|---|")
    for mesh in args.mesh or ["dp2", "tp2"]:
        dp, tp, m = MESHES[mesh]
        variants = {"blocking": ["--dp-overlap", "off", "--tp-overlap", "none"],
                    "overlap": ["--dp-overlap", "on", "--tp-overlap",
                                "sub-pipeline" if tp > 1 else "none"]}
        exes = {}
        for v, flags in variants.items():
            exe = os.path.join(args.workdir, "train-%s-%s-%s" % (args.model, mesh, v))
            subprocess.run([os.path.join(args.bin, "merak-compile"), onnx_path, "--input-shape",
                            "input_ids=%dx%d" % (c["B"], c["T"]), "--compile-to=binary",
                            "--frozen", "*.attn.bias", "--dp", str(dp), "--tp", str(tp),
                            "--microbatches", str(m), "-o", exe] + flags, check=True,
                           stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            exes[v] = exe
        times = {v: [] for v in variants}
        losses = {}
        for _ in range(args.rounds):
            for v, exe in exes.items():
                metrics = os.path.join(args.workdir, "%s-%s.jsonl" % (mesh, v))
                if os.path.exists(metrics):
                    os.remove(metrics)
                subprocess.run(MPIRUN + ["-np", str(dp * tp), exe, "--data", tokens, "--steps",
                                         str(args.steps), "--sampler", "sequential",
                                         "--metrics", metrics, "--log-every", "1000000"],
                               check=True, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
                with open(metrics) as f:
                    lines = [json.loads(line) for line in f]
                times[v] += [l["time_ms"] for l in lines[WARMUP:]]
                losses[v] = [l["loss"] for l in lines]
        off, on = statistics.median(times["blocking"]), statistics.median(times["overlap"])
        agree = max(abs(a - b) / abs(b) for a, b in zip(losses["overlap"], losses["blocking"]))
        print("| %s | %.1f ms | %.1f ms | %.3f | max rel diff %.1e |" % (mesh, off, on, on / off,
                                                                        agree))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
