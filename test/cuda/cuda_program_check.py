#!/usr/bin/env python3
"""merak-compile --target cuda programs, end to end.

    cuda_program_check.py --bin BUILD/bin --src SOURCE_ROOT --workdir DIR CHECK

CHECK:
  no-device      compiles Inputs/tiny-lm.onnxtxt for cuda and runs it: with no
                 GPU (no working `nvidia-smi -L`) ./train must exit 1 with
                 "train: error: no CUDA device: ..."; with one it must train.
  link-gpt       examples/gpt/model.onnx (the bundled GPT) compiles and links
  link-mlp       Inputs/mlp-lm.onnxtxt (an MLP language model) compiles and links
                 (both: ./train --help runs anywhere, it opens no device)
  vs-cpu-MODEL   MODEL in tiny-lm, mlp-lm, gpt: the cuda and the cpu program
                 train 10 steps on the same tokens; every step's loss must agree
                 to 1e-3 relative. Needs a GPU: exits 77 (skip) without one.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

SKIP = 77


def have_gpu():
    if not shutil.which("nvidia-smi"):
        return False
    r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return r.returncode == 0 and "GPU" in r.stdout


def model_path(src, name):
    if name == "gpt":
        return os.path.join(src, "examples", "gpt", "model.onnx")
    return os.path.join(src, "test", "Tools", "Inputs", name + ".onnxtxt")


def vocab(name):
    return 128 if name == "gpt" else 5


def compile_model(args, model, target, out, extra=()):
    cmd = [os.path.join(args.bin, "merak-compile"), model_path(args.src, model),
           "--compile-to=binary", "--target", target, "--opt", "lr=0.01", "-o", out]
    cmd += list(extra)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("FAIL: %s\n%s" % (" ".join(cmd), r.stderr))
    if not os.access(out, os.X_OK):
        sys.exit("FAIL: %s wrote no executable" % out)


def tokens(args, model):
    path = os.path.join(args.workdir, model + "-tokens.bin")
    rng = np.random.default_rng(0)
    np.asarray(rng.integers(0, vocab(model), 20000), dtype=np.uint16).tofile(path)
    return path


def run_train(exe, data, metrics, steps=10):
    cmd = [exe, "--data", data, "--steps", str(steps), "--sampler", "sequential",
           "--metrics", metrics, "--log-every", "100"]
    return subprocess.run(cmd, capture_output=True, text=True)


def check_no_device(args):
    exe = os.path.join(args.workdir, "train-cuda")
    compile_model(args, "tiny-lm", "cuda", exe)
    r = run_train(exe, tokens(args, "tiny-lm"), os.path.join(args.workdir, "m.jsonl"), 2)
    if have_gpu():
        if r.returncode != 0:
            sys.exit("FAIL: with a GPU ./train failed (%d):\n%s" % (r.returncode, r.stderr))
        print("ok: trained on the GPU")
        return
    if r.returncode != 1 or "train: error: no CUDA device: " not in r.stderr:
        sys.exit("FAIL: expected exit 1 and 'train: error: no CUDA device: ...', got %d:\n%s%s"
                 % (r.returncode, r.stdout, r.stderr))
    print("ok: %s" % r.stderr.strip().splitlines()[-1])


def check_link(args, model):
    exe = os.path.join(args.workdir, "train-" + model)
    compile_model(args, model, "cuda", exe)
    r = subprocess.run([exe, "--help"], capture_output=True, text=True)
    if r.returncode != 0 or "--data" not in r.stdout:
        sys.exit("FAIL: %s --help exited %d:\n%s" % (exe, r.returncode, r.stderr))
    print("ok: %s links and runs --help" % model)


def losses(path):
    with open(path) as f:
        return [json.loads(line)["loss"] for line in f if line.strip()]


def check_vs_cpu(args, model):
    if not have_gpu():
        print("SKIP: no GPU")
        sys.exit(SKIP)
    data = tokens(args, model)
    got = {}
    for target in ("cpu", "cuda"):
        exe = os.path.join(args.workdir, "train-" + target)
        compile_model(args, model, target, exe)
        metrics = os.path.join(args.workdir, target + ".jsonl")
        if os.path.exists(metrics):
            os.remove(metrics)
        r = run_train(exe, data, metrics)
        if r.returncode != 0:
            sys.exit("FAIL: %s program exited %d:\n%s" % (target, r.returncode, r.stderr))
        got[target] = losses(metrics)
    cpu, gpu = got["cpu"], got["cuda"]
    if len(cpu) != 10 or len(gpu) != 10:
        sys.exit("FAIL: expected 10 losses, got cpu %d, cuda %d" % (len(cpu), len(gpu)))
    worst = max(abs(g - c) / max(abs(c), 1e-12) for c, g in zip(cpu, gpu))
    for i, (c, g) in enumerate(zip(cpu, gpu)):
        print("step %d: cpu %.6f cuda %.6f" % (i, c, g))
    if worst > 1e-3:
        sys.exit("FAIL: largest relative loss difference %.3g > 1e-3" % worst)
    print("ok: %s, largest relative loss difference %.3g" % (model, worst))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("check")
    args = p.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    if args.check == "no-device":
        check_no_device(args)
    elif args.check in ("link-gpt", "link-mlp"):
        check_link(args, "gpt" if args.check == "link-gpt" else "mlp-lm")
    elif args.check.startswith("vs-cpu-") and args.check[7:] in ("tiny-lm", "mlp-lm", "gpt"):
        check_vs_cpu(args, args.check[7:])
    else:
        sys.exit("unknown check %r" % args.check)


if __name__ == "__main__":
    main()
