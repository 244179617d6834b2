"""Fused attention (merak-fuse-attention) vs the exported decomposition, CPU.

    /usr/bin/python3 bench/attention_step.py --bin build/bin --workdir /tmp/bench-attn \
        [--seq 512] [--batch 4] [--threads 2] [--steps 12] [--rounds 2]
    $(scripts/venv-path.sh)/bin/python bench/attention_step.py ... --model bloom|falcon|modernbert

GPT-2-style decoder d=256, 4 heads (head dim 64), 2 layers, vocab 2048, the
given sequence length and batch, AdamW; --model bloom (ALiBi: the fused op's
per-key bias), falcon (multi-query: one key/value head, broadcast) or
modernbert (a global layer, then a local one whose band is the 64 keys on
each side of the query, as in the released model: the fused op's window
without causal) builds that transformers family at the same sizes instead
(the project venv's transformers). The same ONNX file is compiled twice,
--fused-attention=on and off; prints each program's planned arena peak (the
activation memory of one step, from merak-compile's memory plan) and the
median step time (per-step `time_ms` of the metrics after 3 warm-up steps),
the two programs run alternately `rounds` times, and the ratios fused/off.
Checks the two programs' losses agree (1e-4 relative). A benchmark, not a test.
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "torch"))
import export_models as em  # noqa: E402

D, LAYERS, HEADS, VOCAB = 256, 2, 4, 2048
WARMUP = 3


def compile_program(args, onnx_path, mode):
    exe = os.path.join(args.workdir, "train-" + mode)
    out = subprocess.run([os.path.join(args.bin, "merak-compile"), onnx_path,
                          "--compile-to=binary", "--frozen", "*.attn.bias",
                          "--fused-attention=" + mode, "-o", exe],
                         check=True, capture_output=True, text=True)
    m = re.search(r"arena peak (\d+) bytes", out.stderr + out.stdout)
    return exe, int(m.group(1)) if m else None


def build(name, seq):
    """The decoder at D, LAYERS, HEADS: export_models' GPT-2, or a
    transformers family (no dropout) wrapped to return its logits."""
    if name == "gpt2":
        return em.GPT2(vocab_size=VOCAB, n_embd=D, n_head=HEADS, n_layer=LAYERS, block_size=seq)
    import transformers as tf
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test",
                                    "zoo"))
    from zoo_models import CausalLM, MaskedLM
    if name == "bloom":
        return CausalLM(tf.BloomForCausalLM(tf.BloomConfig(
            vocab_size=VOCAB, hidden_size=D, n_layer=LAYERS, n_head=HEADS, hidden_dropout=0.0,
            attention_dropout=0.0)))
    if name == "modernbert":
        return MaskedLM(tf.ModernBertForMaskedLM(tf.ModernBertConfig(
            vocab_size=VOCAB, hidden_size=D, num_hidden_layers=LAYERS,
            num_attention_heads=HEADS, intermediate_size=4 * D, local_attention=128,
            global_attn_every_n_layers=2, max_position_embeddings=max(seq, 128),
            attention_dropout=0.0, embedding_dropout=0.0, mlp_dropout=0.0, pad_token_id=0,
            bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2)))
    return CausalLM(tf.FalconForCausalLM(tf.FalconConfig(
        vocab_size=VOCAB, hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
        multi_query=True, parallel_attn=True, new_decoder_architecture=False,
        max_position_embeddings=seq, hidden_dropout=0.0, attention_dropout=0.0)))


def run(args, exe, tokens, tag):
    metrics = os.path.join(args.workdir, "metrics-%s.jsonl" % tag)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads),
               OPENBLAS_NUM_THREADS=str(args.threads))
    subprocess.run([exe, "--data", tokens, "--steps", str(args.steps), "--metrics", metrics,
                    "--log-every", "1000000"], check=True, env=env, stdout=subprocess.DEVNULL,
                   cwd=args.workdir)
    with open(metrics) as f:
        rows = [json.loads(line) for line in f]
    return [r["time_ms"] for r in rows][WARMUP:], [r["loss"] for r in rows]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--model", choices=("gpt2", "bloom", "falcon", "modernbert"), default="gpt2")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    torch.manual_seed(0)
    model = build(args.model, args.seq)
    ids = torch.randint(0, VOCAB, (args.batch, args.seq), dtype=torch.int64)
    onnx_path = os.path.join(args.workdir, "gpt_t%d.onnx" % args.seq)
    torchscript = {"dynamo": False} if int(torch.__version__.split(".")[0]) >= 2 else {}
    torch.onnx.export(model, (ids,), onnx_path, opset_version=17, input_names=["input_ids"],
                      output_names=["logits"], training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, **torchscript)
    tokens = os.path.join(args.workdir, "tokens.bin")
    np.random.default_rng(0).integers(0, VOCAB, 400000).astype(np.uint16).tofile(tokens)
    progs = {mode: compile_program(args, onnx_path, mode) for mode in ("on", "off")}
    times = {"on": [], "off": []}
    losses = {}
    for r in range(args.rounds):
        for mode in ("on", "off"):
            t, losses[mode] = run(args, progs[mode][0], tokens, "%s%d" % (mode, r))
            times[mode] += t
    rel = max(abs(a - b) / abs(b) for a, b in zip(losses["on"], losses["off"]))
    print("%s d=%d layers=%d heads=%d (head dim %d) seq=%d batch=%d vocab=%d, %d threads"
          % (args.model, D, LAYERS, HEADS, D // HEADS, args.seq, args.batch, VOCAB,
             args.threads))
    for mode in ("on", "off"):
        print("--fused-attention=%-3s arena peak %7.1f MB, step %7.1f ms (median of %d)"
              % (mode, progs[mode][1] / 1e6, statistics.median(times[mode]), len(times[mode])))
    print("ratio fused/off: memory %.2f, step time %.2f; losses agree to %.1e relative"
          % (progs["on"][1] / progs["off"][1],
             statistics.median(times["on"]) / statistics.median(times["off"]), rel))
    if rel > 1e-4:
        sys.exit("the fused program's losses differ from the decomposed one's")


if __name__ == "__main__":
    main()
