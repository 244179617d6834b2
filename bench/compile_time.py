"""Compile time of GPT-2-shaped models (d=768, 12 heads, vocab 50304, seq 1024).

    /usr/bin/python3 bench/compile_time.py --bin build/bin --workdir /tmp/bench \
        --layers 12 24

Exports each model from PyTorch (training mode, batch 1), then times
merak-compile --compile-to=import, --compile-to=training (bytecode output) and
--compile-to=binary (ONNX to the linked ./train executable)
and prints seconds, peak RSS and the ratio to the 12-layer time (the phases
should grow linearly with depth). A benchmark, not a test: it prints numbers.
"""
import argparse
import os
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "torch"))
import export_models as em  # noqa: E402


def export(layers, path):
    if os.path.exists(path):
        return
    torch.manual_seed(0)
    model = em.GPT2(vocab_size=50304, n_embd=768, n_head=12, n_layer=layers, block_size=1024)
    ids = torch.zeros(1, 1024, dtype=torch.int64)
    torch.onnx.export(model, (ids,), path, opset_version=17, input_names=["input_ids"],
                      output_names=["logits"], training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)


def timed(cmd):
    """Wall seconds and peak RSS (MB) of one tool run."""
    # Through /usr/bin/time: the rusage of a child forked from this (large,
    # torch-holding) process would count the parent's pages before exec.
    start = time.time()
    p = subprocess.run(["/usr/bin/time", "-f", "maxrss_kb=%M"] + cmd,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    secs = time.time() - start
    err = p.stderr.decode()
    if p.returncode:
        raise RuntimeError(err[-1000:])
    kb = int(err.strip().splitlines()[-1].split("=")[1])
    return secs, kb / 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--layers", type=int, nargs="+", default=[12, 24])
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    compile_ = os.path.join(os.path.abspath(args.bin), "merak-compile")
    base = {}
    for layers in args.layers:
        onnx_path = os.path.join(args.workdir, "gpt_%d.onnx" % layers)
        t0 = time.time()
        export(layers, onnx_path)
        print("layers %d: exported in %.1f s" % (layers, time.time() - t0))
        for phase in ("import", "training", "binary"):
            out = os.path.join(args.workdir, "gpt_%d_%s" % (layers, phase))
            cmd = [compile_, onnx_path, "--compile-to=" + phase, "-o", out]
            if phase != "binary":
                cmd.append("--emit-bytecode")
            if phase != "import":
                cmd += ["--frozen", "*.attn.bias"]
            secs, rss = timed(cmd)
            base.setdefault(phase, secs / layers)
            print("layers %d: --compile-to=%s %.2f s (%.2fx linear from the first size), "
                  "peak RSS %.0f MB"
                  % (layers, phase, secs, secs / (base[phase] * layers), rss))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
