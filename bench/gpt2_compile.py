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
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    import transformers as tf
    torch.manual_seed(0)
    cfg = tf.GPT2Config(**zoo.no_dropout())
    model = zoo.CausalLM(tf.GPT2LMHeadModel(cfg))
    params = sum(p.numel() for p in model.parameters())
    onnx_path = os.path.join(args.workdir, "gpt2.onnx")
    ids = torch.zeros(2, args.seq, dtype=torch.long)
    start = time.time()
    zoo.export(model, ids, onnx_path, "dynamo20")
    export_s = time.time() - start
    data = sum(os.path.getsize(os.path.join(args.workdir, f)) for f in os.listdir(args.workdir)
               if f.startswith("gpt2.onnx"))
    frozen = zoo.non_parameter_initializers(onnx_path, model)
    print("GPT-2 %.1f M parameters; dynamo opset 20 export %.1f s, %.0f MB on disk"
          % (params / 1e6, export_s, data / 1e6))
    base = [os.path.join(args.bin, "merak-compile"), onnx_path,
            "--input-shape", "input_ids=%dx%d" % (args.batch, args.seq)]
    for f in frozen:
        base += ["--frozen", f]
    for phase, out in (("import", "gpt2.mlir"), ("training", "train.mlir"),
                       ("binary", "train")):
        wall, rss = measure(base + ["--compile-to=" + phase, "-o",
                                    os.path.join(args.workdir, out)])
        print("%-9s %6.1f s  peak RSS %6.0f MB" % (phase, wall, rss))


if __name__ == "__main__":
    main()
