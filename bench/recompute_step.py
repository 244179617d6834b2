"""Peak memory per pipeline stage and step time for each --recompute mode
and --schedule.

    /usr/bin/python3 bench/recompute_step.py --bin build/bin --workdir /tmp/bench-rc \
        [--pp 2] [--microbatches 4] [--steps 4] [--mode none --mode full ...]
        [--mode stage-aware --memory-per-device 600MiB]
        [--schedule 1f1b --schedule zb-h1 --schedule interleaved ...]

GPT-2-style decoder d=512, 8 layers, 8 heads, vocab 8192 (29M parameters,
the model of bench/README.md's memory numbers), seq 128, batch 4, AdamW,
1F1B (or each --schedule; interleaved with 2 virtual stages) with
--microbatches micro-batches on --pp stages. Each (schedule, mode) pair is
compiled with --schedule S --recompute MODE and run under `mpirun -np pp /usr/bin/time -f ...`
(OMP_NUM_THREADS=1, --sampler sequential on the same random tokens), which
gives every rank's (= stage's) peak RSS. Prints a table: per stage the peak
RSS and the stashed bytes per micro-batch (from --compile-to=recompute),
the median step time after one warm-up step, and the first and last loss
(the same in every mode). A benchmark, not a test.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

import numpy as np

from gpt_onnx import export_gpt

B, T, D, LAYERS, HEADS, VOCAB = 4, 128, 512, 8, 8, 8192
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--pp", type=int, default=2)
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--mode", action="append")
    ap.add_argument("--schedule", action="append")
    ap.add_argument("--memory-per-device", help="the budget of mode stage-aware (e.g. 600MiB)")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    onnx_path = os.path.join(args.workdir, "gpt_d%d_l%d.onnx" % (D, LAYERS))
    export_gpt(onnx_path, VOCAB, D, HEADS, LAYERS, T)
    tokens = os.path.join(args.workdir, "tokens.bin")
    np.random.default_rng(0).integers(0, VOCAB, 200000).astype(np.uint16).tofile(tokens)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    print("GPT d=%d layers=%d heads=%d seq=%d batch=%d vocab=%d, AdamW, pp %d, %d micro-batches, "
          "%d steps, %d CPU cores" % (D, LAYERS, HEADS, T, B, VOCAB, args.pp,
                                      args.microbatches, args.steps, os.cpu_count()))
    print("| schedule | recompute | per stage: mode, stash/micro-batch, peak RSS | "
          "step (median) | loss first -> last |")
    print("|---|---|---|---:|---|")
    variants = [(sched, mode) for sched in args.schedule or ["1f1b"]
                for mode in args.mode or ["none", "selective", "full"]]
    for sched, mode in variants:
        name = sched + "-" + mode
        exe = os.path.join(args.workdir, "train-" + name)
        base = [os.path.join(args.bin, "merak-compile"), onnx_path, "--input-shape",
                "input_ids=%dx%d" % (B, T), "--frozen", "*.attn.bias", "--pp", str(args.pp),
                "--microbatches", str(args.microbatches), "--recompute", mode,
                "--schedule", sched]
        if sched == "interleaved":
            base += ["--virtual-stages", "2"]
        if mode == "stage-aware":
            base += ["--memory-per-device", args.memory_per_device]
        plan = subprocess.run(base + ["--compile-to=recompute"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT).stdout.decode()
        stash = re.findall(r"stage (\d+) (\S+) \(stash (\d+) bytes", plan)
        subprocess.run(base + ["--compile-to=binary", "-o", exe], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        metrics = os.path.join(args.workdir, name + ".jsonl")
        if os.path.exists(metrics):
            os.remove(metrics)
        rss_file = os.path.join(args.workdir, name + "-rss")
        # Every rank appends "<pp rank> <peak KiB>" (OMPI_COMM_WORLD_RANK =
        # stage when dp = tp = 1).
        if os.path.exists(rss_file):
            os.remove(rss_file)
        cmd = MPIRUN + ["-np", str(args.pp), "sh", "-c",
                        '/usr/bin/time -f "$OMPI_COMM_WORLD_RANK %%M" -a -o %s "$@"' % rss_file,
                        "sh", exe, "--data", tokens, "--steps", str(args.steps), "--sampler",
                        "sequential", "--metrics", metrics, "--log-every", "1000000"]
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.STDOUT)
        rss = {}
        for line in open(rss_file):
            r, kib = line.split()
            rss[int(r)] = int(kib) / 1024.0
        with open(metrics) as f:
            lines = [json.loads(line) for line in f]
        ms = statistics.median(l["time_ms"] for l in lines[1:] or lines)
        # Model stage k runs on rank k mod pp (interleaved: two per rank).
        stages = "; ".join("%s %s %.1f MiB stash, rank %d %.0f MiB RSS" % (
            s, m, int(b) / 2**20, int(s) % args.pp, rss.get(int(s) % args.pp, float("nan")))
            for s, m, b in stash)
        print("| %s | %s | %s | %.0f ms | %.4f -> %.4f |" % (sched, mode, stages, ms,
                                                             lines[0]["loss"], lines[-1]["loss"]))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
