"""Compile time and peak memory of merak-compile on a GPT-2-124M export from
torch's dynamo exporter (opset 20, external data), per phase:

    $(scripts/venv-path.sh)/bin/python bench/gpt2_compile.py --bin build/bin --workdir /tmp/gpt2c

The model is transformers' GPT2LMHeadModel at its default config (124M
parameters, 12 layers, d=768, vocabulary 50257, tied head) with random
weights, wrapped to return the logits (test/zoo/zoo.py's CausalLM), at
batch 8 x sequence 128 (dynamic batch bound with --input-shape). For each
phase (--compile-to=import, training, binary) it runs merak-compile from the
ONNX file under /usr/bin/time and prints wall seconds and peak RSS. A
benchmark, not a test.

GPT-2-XL-shaped (1.5B: 48 layers, d=1600, 32 heads of 50 so that tp
divides, sequence 1024), to a --tp 2 --pp 4 program only (printing the
IR of 6 GB of weights as text is not a phase anyone runs):

    ... bench/gpt2_compile.py --bin build/bin --workdir /tmp/gpt2xl --layers 48 \
        --width 1600 --heads 32 --seq 1024 --phases binary \
        --flags="--tp 2 --pp 4 --microbatches 4"
"""
import argparse
import os
import re
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "zoo"))
import zoo  # noqa: E402


def measure(cmd):
    start = time.time()
    r = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True)
    wall = time.time() - start
    if r.returncode:
        sys.exit("failed (%d): %s\n%s" % (r.returncode, " ".join(cmd), r.stderr[-3000:]))
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr).group(1))
    return wall, rss / 1024.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--width", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--phases", default="import,training,binary",
                    help="comma-separated; empty: export only (for bench/paper/plan_paper.py --onnx)")
    ap.add_argument("--flags", default="", help="more merak-compile flags (a mesh)")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    import transformers as tf
    torch.manual_seed(0)
    cfg = tf.GPT2Config(n_layer=args.layers, n_embd=args.width, n_head=args.heads,
                        n_positions=max(1024, args.seq), **zoo.no_dropout())
    model = zoo.CausalLM(tf.GPT2LMHeadModel(cfg))
    params = sum(p.numel() for p in model.parameters())
    onnx_path = os.path.join(args.workdir, "gpt2.onnx")
    ids = torch.zeros(2, args.seq, dtype=torch.long)
    start = time.time()
    with torch.no_grad():
        zoo.export(model, ids, onnx_path, "dynamo20")
    export_s = time.time() - start
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    frozen = zoo.non_parameter_initializers(onnx_path, model)
    del model  # its 6 GB at the XL shape
    data = sum(os.path.getsize(os.path.join(args.workdir, f)) for f in os.listdir(args.workdir)
               if f.startswith("gpt2.onnx"))
    print("GPT-2 %.1f M parameters (%.2f GB); dynamo opset 20 export %.1f s, %.0f MB on disk"
          % (params / 1e6, weights / 1e9, export_s, data / 1e6))
    base = [os.path.join(args.bin, "merak-compile"), onnx_path,
            "--input-shape", "input_ids=%dx%d" % (args.batch, args.seq)] + args.flags.split()
    for f in frozen:
        base += ["--frozen", f]
    outputs = {"import": "gpt2.mlir", "training": "train.mlir", "binary": "train"}
    for phase in filter(None, args.phases.split(",")):
        wall, rss = measure(base + ["--compile-to=" + phase, "-o",
                                    os.path.join(args.workdir, outputs[phase])])
        print("%-9s %6.1f s  peak RSS %6.0f MB (%.2fx the weights)"
              % (phase, wall, rss, rss * 2**20 / weights))


if __name__ == "__main__":
    main()
