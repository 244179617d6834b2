#!/usr/bin/env python3
"""Mixture-of-Experts layers with and without merak-fuse-experts.

    $(scripts/venv-path.sh)/bin/python bench/moe_step.py --bin build/bin --workdir /tmp/bench-moe

A Mixtral-shaped model from its transformers config (hidden 256,
intermediate 512, 8 experts, top-2, 2 layers, 4 heads, vocabulary 512,
random weights), transformers' batched_mm experts, exported with
TorchScript at opset 17 with a batch of 4 x 64 tokens (512 routed rows per
layer). Compiled with --fused-experts on (merak.expert_matmul: one GEMM per
expert) and off (the export as it is: each row gathers its expert's weights
and multiplies them batched), AdamW; prints each program's arena peak (the
compiler's memory plan), the median step of steps 2-6 (OMP_NUM_THREADS=1),
and the first and last losses (equal up to float rounding). A benchmark,
not a test.
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "zoo"))
from zoo import CausalLM  # noqa: E402  (input_ids -> logits, an all-ones attention mask)

B, T, VOCAB = 4, 64, 512


def mixtral_model():
    """The benchmarks' Mixtral shape (hidden 256, intermediate 512, 8 experts,
    top-2, 2 layers, 4 heads, vocabulary 512; batched_mm experts), seeded."""
    import transformers as tf
    cfg = tf.MixtralConfig(vocab_size=VOCAB, hidden_size=256, intermediate_size=512,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                           num_local_experts=8, num_experts_per_tok=2, max_position_embeddings=T,
                           tie_word_embeddings=False, router_jitter_noise=0.0,
                           attention_dropout=0.0)
    cfg._experts_implementation = "batched_mm"
    torch.manual_seed(0)
    return CausalLM(tf.MixtralForCausalLM(cfg)).train()


def export_mixtral(workdir, batch=B):
    """mixtral_model() exported with TorchScript at opset 17 (a batch of
    `batch` x T tokens) to WORKDIR/mixtral.onnx; returns the path."""
    path = os.path.join(workdir, "mixtral.onnx")
    torch.onnx.export(mixtral_model(), (torch.zeros(batch, T, dtype=torch.int64),), path,
                      dynamo=False, opset_version=17, input_names=["input_ids"],
                      output_names=["logits"], training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--steps", type=int, default=6)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    onnx_path = export_mixtral(a.workdir)
    tokens = os.path.join(a.workdir, "tokens.bin")
    np.random.default_rng(0).integers(0, VOCAB, 200000).astype(np.uint16).tofile(tokens)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    rows = []
    for fused in ("on", "off"):
        exe = os.path.join(a.workdir, "train-" + fused)
        out = subprocess.run([os.path.join(a.bin, "merak-compile"), onnx_path, "--optimizer",
                              "adamw", "--fused-experts", fused, "-o", exe],
                             check=True, capture_output=True, text=True).stderr
        arena = int(re.search(r"arena peak (\d+) bytes", out).group(1))
        metrics = exe + ".jsonl"
        if os.path.exists(metrics):
            os.remove(metrics)
        subprocess.run([exe, "--data", tokens, "--steps", str(a.steps), "--sampler",
                        "sequential", "--metrics", metrics], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        lines = [json.loads(l) for l in open(metrics)]
        step = statistics.median(l["time_ms"] for l in lines[1:])
        rows.append((fused, arena, step, lines[0]["loss"], lines[-1]["loss"]))
        print("--fused-experts %s: arena peak %.1f MiB, step %.1f ms, losses %.6f -> %.6f"
              % (fused, arena / 2**20, step, lines[0]["loss"], lines[-1]["loss"]))
        sys.stdout.flush()
    on, off = rows
    print("\n| --fused-experts | arena peak (MiB) | step (ms) | first loss | last loss |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        print("| %s | %.1f | %.1f | %.6f | %.6f |" % (r[0], r[1] / 2**20, r[2], r[3], r[4]))
    print("\noff / on: arena %.1fx, step %.2fx" % (off[1] / on[1], off[2] / on[2]))


if __name__ == "__main__":
    main()
