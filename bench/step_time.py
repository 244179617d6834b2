"""Training-step time of the generated CPU program vs PyTorch on the same model.

    /usr/bin/python3 bench/step_time.py --bin build/bin --workdir /tmp/bench-step \
        [--vocab 8192] [--threads 2] [--steps 20]

GPT-2-style decoder, d=256, 4 layers, 8 heads, seq 128, batch 8 (the model of
the test suite, tied embeddings), AdamW. merak: merak-compile
--compile-to=binary, then ./train on random tokens; the time is the median
of the per-step `time_ms` of the metrics after 5 warm-up steps. PyTorch:
forward, cross-entropy, backward and torch.optim.AdamW.step() in float32 with
the same number of threads, median over the same steps. Prints both and the
ratio merak / PyTorch (goal <= 0.8). A benchmark, not a test.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "torch"))
import export_models as em  # noqa: E402

B, T, D, LAYERS, HEADS = 8, 128, 256, 4, 8
WARMUP = 5


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    model = em.GPT2(vocab_size=args.vocab, n_embd=D, n_head=HEADS, n_layer=LAYERS, block_size=T)
    ids = torch.randint(0, args.vocab, (B, T), dtype=torch.int64)
    onnx_path = os.path.join(args.workdir, "gpt_d%d_v%d.onnx" % (D, args.vocab))
    torch.onnx.export(model, (ids,), onnx_path, opset_version=17, input_names=["input_ids"],
                      output_names=["logits"], training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    exe = os.path.join(args.workdir, "train")
    t0 = time.time()
    subprocess.run([os.path.join(args.bin, "merak-compile"), onnx_path, "--compile-to=binary",
                    "--frozen", "*.attn.bias", "--optimizer", "adamw", "-o", exe], check=True)
    compile_s = time.time() - t0
    tokens = os.path.join(args.workdir, "tokens.bin")
    np.random.default_rng(0).integers(0, args.vocab, 200000).astype(np.uint16).tofile(tokens)
    metrics = os.path.join(args.workdir, "metrics.jsonl")
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads),
               OPENBLAS_NUM_THREADS=str(args.threads))
    subprocess.run([exe, "--data", tokens, "--steps", str(args.steps), "--metrics", metrics,
                    "--log-every", "1000000"], check=True, env=env, stdout=subprocess.DEVNULL)
    with open(metrics) as f:
        ms = [json.loads(line)["time_ms"] for line in f][WARMUP:]
    merak_ms = statistics.median(ms)

    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    times = []
    for step in range(args.steps):
        x = torch.randint(0, args.vocab, (B, T), dtype=torch.int64)
        y = torch.randint(0, args.vocab, (B, T), dtype=torch.int64)
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        loss.backward()
        opt.step()
        times.append((time.perf_counter() - start) * 1e3)
    torch_ms = statistics.median(times[WARMUP:])
    print("GPT d=%d layers=%d heads=%d seq=%d batch=%d vocab=%d, %d threads"
          % (D, LAYERS, HEADS, T, B, args.vocab, args.threads))
    print("merak-compile --compile-to=binary: %.1f s" % compile_s)
    print("merak ./train step: %.1f ms (median of %d)" % (merak_ms, len(ms)))
    print("PyTorch %s eager step: %.1f ms (median of %d)"
          % (torch.__version__, torch_ms, len(times) - WARMUP))
    print("ratio merak / PyTorch: %.2f (goal <= 0.80)" % (merak_ms / torch_ms))


if __name__ == "__main__":
    main()
