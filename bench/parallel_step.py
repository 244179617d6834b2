"""Training-step time of a small GPT on CPU meshes (dp, tp, pp) under mpirun.

    /usr/bin/python3 bench/parallel_step.py --bin build/bin --workdir /tmp/bench-pstep \
        [--steps 12] [--microbatches 4] [--mesh 1,1,1 --mesh 2,2,2 ...]

GPT-2-style decoder, d=128, 4 layers, 4 heads, seq 64, batch 8, vocab 512
(the test suite's model family, tied embeddings), AdamW, exported with a
dynamic batch axis. Each mesh is compiled with merak-compile --compile-to=binary
(--pp > 1 runs --microbatches micro-batches, default 4) and trained on the
same random tokens with --sampler sequential, OMP_NUM_THREADS=1, under
`mpirun --oversubscribe -np dp*tp*pp` (without mpirun for one rank). Prints a
table: median step time after 3 warm-up steps, tokens/s, the first and last
loss (every mesh trains the same model on the same rows, so the losses
agree with the serial ones), and the compile time. A mesh the compiler
rejects is "unsupported" (with the message), one that fails at run time
"failed". A benchmark, not a test: on a machine with fewer cores than ranks
the times measure oversubscription, not scaling.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

from gpt_onnx import export_gpt

B, T, D, LAYERS, HEADS, VOCAB = 8, 64, 128, 4, 4, 512
WARMUP = 3
MESHES = ["1,1,1", "2,1,1", "1,2,1", "1,1,2", "2,2,1", "1,2,2", "2,1,2", "2,2,2"]
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]



def first_error(text):
    for line in text.splitlines():
        if "error" in line.lower():
            return line.strip()[:160]
    lines = text.strip().splitlines()
    return lines[-1][:160] if lines else "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--mesh", action="append", help="dp,tp,pp (repeatable; default: all 8)")
    ap.add_argument("--timeout", type=int, default=600)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    onnx_path = os.path.join(args.workdir, "gpt_d%d_l%d.onnx" % (D, LAYERS))
    export_gpt(onnx_path, VOCAB, D, HEADS, LAYERS, T)
    tokens = os.path.join(args.workdir, "tokens.bin")
    np.random.default_rng(0).integers(0, VOCAB, 100000).astype(np.uint16).tofile(tokens)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    print("GPT d=%d layers=%d heads=%d seq=%d batch=%d vocab=%d, AdamW, OMP_NUM_THREADS=1, "
          "%d CPU cores" % (D, LAYERS, HEADS, T, B, VOCAB, os.cpu_count()))
    print("| dp | tp | pp | micro-batches | ranks | step (median) | tokens/s | loss first -> last "
          "| compile |")
    print("|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for mesh in args.mesh or MESHES:
        dp, tp, pp = (int(x) for x in mesh.split(","))
        m = args.microbatches if pp > 1 else 1
        ranks = dp * tp * pp
        name = "dp%d-tp%d-pp%d" % (dp, tp, pp)
        exe = os.path.join(args.workdir, "train-" + name)
        row = "| %d | %d | %d | %d | %d |" % (dp, tp, pp, m, ranks)
        t0 = time.time()
        p = subprocess.run([os.path.join(args.bin, "merak-compile"), onnx_path,
                            "--input-shape", "input_ids=%dx%d" % (B, T), "--compile-to=binary",
                            "--frozen", "*.attn.bias", "--dp", str(dp), "--tp", str(tp),
                            "--pp", str(pp), "--microbatches", str(m), "-o", exe],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        compile_s = time.time() - t0
        if p.returncode:
            print(row + " unsupported: %s | | | |" % first_error(p.stdout.decode()))
            sys.stdout.flush()
            continue
        metrics = os.path.join(args.workdir, name + ".jsonl")
        if os.path.exists(metrics):
            os.remove(metrics)
        cmd = [exe, "--data", tokens, "--steps", str(args.steps), "--sampler", "sequential",
               "--metrics", metrics, "--log-every", "1000000"]
        if ranks > 1:
            cmd = MPIRUN + ["-np", str(ranks)] + cmd
        try:
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                               timeout=args.timeout)
            failed = r.returncode != 0
            out = r.stdout.decode()
        except subprocess.TimeoutExpired:
            failed, out = True, "timed out after %d s" % args.timeout
        if failed or not os.path.exists(metrics):
            print(row + " failed: %s | | | %.1f s |" % (first_error(out), compile_s))
            sys.stdout.flush()
            continue
        with open(metrics) as f:
            lines = [json.loads(line) for line in f]
        ms = statistics.median(l["time_ms"] for l in lines[WARMUP:] or lines)
        print(row + " %.1f ms | %.0f | %.4f -> %.4f | %.1f s |"
              % (ms, B * T / (ms / 1e3), lines[0]["loss"], lines[-1]["loss"], compile_s))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
