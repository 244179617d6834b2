#!/usr/bin/env python3
"""Simulated against measured step times of small plans on this CPU.

    /usr/bin/python3 bench/sim_vs_measured.py --bin build/bin \
        --calibrate build/runtime/merak-calibrate --workdir /tmp/bench-sim [--steps 12]

1. `mpirun -np 2 merak-calibrate -o cpu.json`: this machine as a device
   profile (single-threaded sgemm rate, STREAM bandwidth, MPI ping-pong).
2. A GPT-2-style decoder (d 128, 4 heads, 4 layers, seq 64, batch 8, vocab
   256; exported with a dynamic batch) is compiled for each plan
   (dp, tp, pp, micro-batches) with `--simulate --device-profile cpu.json
   --report=json` (the simulated step) and `--compile-to=binary`, and run
   under `mpirun -np dp*tp*pp` with OMP_NUM_THREADS=1; the measured step
   is the median `time_ms` of the metrics after 3 warm-up steps, and with
   --rounds N (default 3) the median of N such runs, the plans run in turn
   in every round.
3. Profile-guided costs: before the measurement, every plan's program runs
   once with `--profile-ops op-costs.json` (a few steps), which times its
   ops and merges the medians by op shape into the one shared file; each
   plan is then simulated twice, with the roofline alone and with
   `--op-costs op-costs.json` (the measured seconds of every op whose shape
   was timed).
Prints both simulations, the measurement and their ratios per plan, and the
order of the plans (those with at most one rank per core) by each. A
benchmark, not a test: the numbers depend on the machine and its load.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import numpy as np
import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "test", "torch"))
import export_models as em  # noqa: E402

B, T, D, LAYERS, HEADS, VOCAB = 8, 64, 128, 4, 4, 256
PLANS = [(1, 1, 1, 2), (2, 1, 1, 2), (1, 2, 1, 2), (1, 1, 2, 2), (1, 1, 2, 4), (2, 1, 2, 2)]
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]
WARMUP = 3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--calibrate", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=3,
                    help="measurement rounds: every plan is run once per round, in turn, and its "
                         "measured step is the median over the rounds (this shared VM's step "
                         "times drift by 10-20 %% within minutes)")
    ap.add_argument("--profile-steps", type=int, default=6,
                    help="steps of each plan's --profile-ops run (the first is a warm-up)")
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    profile = os.path.join(a.workdir, "cpu.json")
    subprocess.run(MPIRUN + ["-np", "2", a.calibrate, "-o", profile], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    print("profile:", json.dumps({k: v for k, v in json.load(open(profile)).items()
                                  if k != "comment"}))
    torch.manual_seed(0)
    model = em.GPT2(vocab_size=VOCAB, n_embd=D, n_head=HEADS, n_layer=LAYERS, block_size=T)
    onnx_path = os.path.join(a.workdir, "gpt.onnx")
    torch.onnx.export(model, (torch.zeros(B, T, dtype=torch.int64),), onnx_path,
                      opset_version=17, input_names=["input_ids"], output_names=["logits"],
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      dynamic_axes={"input_ids": {0: "batch"}})
    tokens = os.path.join(a.workdir, "tokens.bin")
    np.random.default_rng(0).integers(0, VOCAB, 200000).astype(np.uint16).tofile(tokens)
    compiler = os.path.join(a.bin, "merak-compile")
    costs = os.path.join(a.workdir, "op-costs.json")
    if os.path.exists(costs):
        os.remove(costs)

    def plan_flags(dp, tp, pp, m):
        return [onnx_path, "--input-shape", "input_ids=%dx%d" % (B, T), "--frozen",
                "*.attn.bias", "--dp", str(dp), "--tp", str(tp), "--pp", str(pp),
                "--microbatches", str(m), "--schedule", "1f1b", "--simulate",
                "--device-profile", profile]

    def run(exe, ranks, extra):
        cmd = [exe, "--data", tokens, "--log-every", "1000000"] + extra
        if ranks > 1:
            cmd = MPIRUN + ["-np", str(ranks)] + cmd
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)

    def simulated(flags, extra):
        report = os.path.join(a.workdir, "report.json")
        subprocess.run([compiler] + flags + extra + ["--compile-to=schedule", "-o", os.devnull,
                                                     "--report=json", "--report-file", report],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return json.load(open(report))["simulated"]["step_time_s"] * 1e3

    # 1. Every plan's program, and its ops timed once into the shared op-cost
    #    file (--profile-ops; the first step is a warm-up).
    exes = {}
    for dp, tp, pp, m in PLANS:
        name = "d%dt%dp%dm%d" % (dp, tp, pp, m)
        exe = os.path.join(a.workdir, "train-" + name)
        subprocess.run([compiler] + plan_flags(dp, tp, pp, m) + ["--compile-to=binary", "-o", exe],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        run(exe, dp * tp * pp, ["--steps", str(a.profile_steps), "--profile-ops", costs])
        exes[(dp, tp, pp, m)] = (name, exe)
    # 2. Measured: every plan once per round, the plans in turn, so that a
    #    slow minute of the machine does not fall on one plan only.
    per_round = {plan: [] for plan in PLANS}
    for _ in range(a.rounds):
        for dp, tp, pp, m in PLANS:
            name, exe = exes[(dp, tp, pp, m)]
            metrics = os.path.join(a.workdir, name + ".jsonl")
            if os.path.exists(metrics):
                os.remove(metrics)
            run(exe, dp * tp * pp, ["--steps", str(a.steps), "--metrics", metrics])
            with open(metrics) as f:
                per_round[(dp, tp, pp, m)].append(
                    statistics.median([json.loads(l)["time_ms"] for l in f][WARMUP:]))
    # 3. Simulated with the roofline and with the measured op costs.
    rows = []
    for dp, tp, pp, m in PLANS:
        flags = plan_flags(dp, tp, pp, m)
        roofline = simulated(flags, [])
        profiled = simulated(flags, ["--op-costs", costs])
        runs = per_round[(dp, tp, pp, m)]
        measured = statistics.median(runs)
        rows.append((dp, tp, pp, m, roofline, profiled, measured))
        print("(dp %d, tp %d, pp %d) x %d micro-batches: simulated %.2f ms (roofline), %.2f ms "
              "(measured op costs); measured %.2f ms (rounds %s); measured / simulated %.2f, %.2f"
              % (dp, tp, pp, m, roofline, profiled, measured,
                 ", ".join("%.2f" % r for r in runs), measured / roofline, measured / profiled))
        sys.stdout.flush()
    print()
    print("| dp | tp | pp | micro-batches | simulated, roofline (ms) | simulated, measured op "
          "costs (ms) | measured (ms) | measured / roofline | measured / op costs |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for dp, tp, pp, m, r, p, me in rows:
        print("| %d | %d | %d | %d | %.2f | %.2f | %.2f | %.2f | %.2f |"
              % (dp, tp, pp, m, r, p, me, me / r, me / p))
    # The order of the plans that fit the machine (one rank per core).
    cores = os.cpu_count() or 1
    fit = [r for r in rows if r[0] * r[1] * r[2] <= cores]
    label = lambda r: "d%dt%dp%dm%d" % r[:4]
    for col, what in ((4, "roofline"), (5, "measured op costs"), (6, "measured")):
        print("order by %s: %s" % (what, " < ".join(label(r) for r in
                                                    sorted(fit, key=lambda r: r[col]))))
    worst = max(abs(r[6] / r[5] - 1) for r in fit)
    print("largest |measured / simulated - 1| with measured op costs over the plans of at most "
          "%d ranks: %.1f%%" % (cores, 100 * worst))

if __name__ == "__main__":
    main()
