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
                 to 1e-4 relative (FP32_LOSS_BOUND). Needs a GPU: exits 77 (skip) without one.
  par-link-MESH  MESH in dp2, tp2, dp2-tp2-zero1, dp2-bf16-reduce or a pipeline (PIPELINES
                 below): the small GPT (the test
                 suite's, exported here with a dynamic batch axis) compiled
                 with --target cuda and that mesh compiles and links; without a
                 GPU, `mpirun -np N ./train` must exit non-zero with "no CUDA
                 device" (with one it must train).
  par-vs-cpu-MESH  MESH as for par-link: the small GPT with that
                 mesh, cuda vs cpu program, both under mpirun, 10 steps, losses
                 within 1e-4 relative. On a machine with fewer GPUs than ranks
                 this is the host-staged MPI path (MERAK_GPU_COLLECTIVES=auto;
                 set it to force one). Exits 77 without a GPU.

PIPELINES (--target cuda pipelined programs: the pipeline runner on device
memory, stage messages host-staged over MPI): pp2-1f1b, mb4 (micro-batches
on one rank), pp2-zbh1, pp2-interleaved (2 virtual stages per rank),
pp2-scp-selective (shifted critical path with selective recomputation),
pp2-dp2 (with the dp gradient buckets started in the last backward), pp2-tp2
(GPipe; the vocabulary-parallel cross-entropy on the last stage).
"""
import argparse
import inspect
import json
import os
import shutil
import subprocess

# fp32 CUDA vs CPU: every kernel agrees to 1e-5 relative (runtime.cuda.abi);
# the two programs differ only in summation order (cuBLASLt vs OpenBLAS, the
# reduction trees), and 10 optimizer steps carry those differences into the
# weights. AdamW divides each update by the gradient's running RMS, so only a
# gradient within rounding of zero can move its weight differently; 1e-4 on
# the losses leaves a factor 10 over the kernels. (1e-3 until issue 20; the
# tighter bound is not yet measured on a GPU.)
FP32_LOSS_BOUND = 1e-4
import sys

import numpy as np

SKIP = 77
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]
MESHES = {
    "dp2": (["--dp", "2"], 2),
    "tp2": (["--tp", "2"], 2),
    "dp2-tp2-zero1": (["--dp", "2", "--tp", "2", "--zero", "1"], 4),
    # Gradients reduced in bf16 (ncclBfloat16 / the staged MPI bf16 sum).
    "dp2-bf16-reduce": (["--dp", "2", "--grad-reduce", "bf16"], 2),
    # Sequence parallelism: tp reduce-scatters and all-gathers (NCCL).
    "tp2-sp": (["--tp", "2", "--sequence-parallel", "on"], 2),
}
PIPELINES = {
    "pp2-1f1b": (["--pp", "2", "--microbatches", "4", "--schedule", "1f1b"], 2),
    "mb4": (["--microbatches", "4"], 1),
    "pp2-zbh1": (["--pp", "2", "--microbatches", "4", "--schedule", "zb-h1"], 2),
    "pp2-interleaved": (["--pp", "2", "--virtual-stages", "2", "--microbatches", "4",
                         "--schedule", "interleaved"], 2),
    "pp2-scp-selective": (["--pp", "2", "--microbatches", "4", "--schedule",
                           "shifted-critical-path", "--recompute", "selective"], 2),
    "pp2-dp2": (["--pp", "2", "--dp", "2", "--microbatches", "2"], 4),
    "pp2-tp2": (["--pp", "2", "--tp", "2", "--microbatches", "2", "--schedule", "gpipe"], 4),
    "pp2-tp2-sp": (["--pp", "2", "--tp", "2", "--microbatches", "2", "--schedule", "gpipe",
                    "--sequence-parallel", "on"], 4),
}
MESHES.update(PIPELINES)


def have_gpu():
    if not shutil.which("nvidia-smi"):
        return False
    r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return r.returncode == 0 and "GPU" in r.stdout


def model_path(src, name):
    if os.path.isabs(name):
        return name
    if name == "gpt":
        return os.path.join(src, "examples", "gpt", "model.onnx")
    return os.path.join(src, "test", "Tools", "Inputs", name + ".onnxtxt")


def vocab(name):
    if name == "gpt-dyn":
        return GPT_DYN_VOCAB
    return 128 if name == "gpt" else 5


GPT_DYN_VOCAB, GPT_DYN_BATCH, GPT_DYN_SEQ = 97, 4, 16


def small_gpt(args):
    """The test suite's small GPT-2 (test/torch/export_models.py: 4 layers, 4
    heads, d 64, vocab 97, seq 16) exported with a dynamic batch axis, as
    test/parallel/parallel_check.py does (the bundled examples/gpt model
    hard-codes its batch, which --dp cannot split). Returns (path, flags)."""
    path = os.path.join(args.workdir, "gpt-dyn.onnx")
    if not os.path.exists(path):
        import torch
        sys.path.insert(0, os.path.join(args.src, "test", "torch"))
        import export_models as em
        torch.manual_seed(0)
        model = em.GPT2(vocab_size=GPT_DYN_VOCAB, n_embd=64, n_head=4, n_layer=4,
                        block_size=GPT_DYN_SEQ)
        ids = torch.zeros(GPT_DYN_BATCH, GPT_DYN_SEQ, dtype=torch.int64)
        kw = dict(opset_version=17, input_names=["input_ids"], output_names=["logits"],
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                  dynamic_axes={"input_ids": {0: "batch"}})
        if "dynamo" in inspect.signature(torch.onnx.export).parameters:
            kw["dynamo"] = False  # the TorchScript exporter (newer torch on GPU machines)
        torch.onnx.export(model, (ids,), path, **kw)
    return path, ["--input-shape", "input_ids=%dx%d" % (GPT_DYN_BATCH, GPT_DYN_SEQ),
                  "--frozen", "*.attn.bias"]


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


def run_train(exe, data, metrics, steps=10, ranks=0, timeout=None):
    cmd = [exe, "--data", data, "--steps", str(steps), "--sampler", "sequential",
           "--metrics", metrics, "--log-every", "100"]
    if ranks:
        cmd = MPIRUN + ["-np", str(ranks)] + cmd
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


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


def check_link(args, model, extra=()):
    exe = os.path.join(args.workdir, "train-" + model)
    compile_model(args, model, "cuda", exe, extra)
    r = subprocess.run([exe, "--help"], capture_output=True, text=True)
    if r.returncode != 0 or "--data" not in r.stdout:
        sys.exit("FAIL: %s --help exited %d:\n%s" % (exe, r.returncode, r.stderr))
    print("ok: %s links and runs --help" % model)


def losses(path):
    with open(path) as f:
        return [json.loads(line)["loss"] for line in f if line.strip()]


def check_vs_cpu(args, model, extra=(), bound=FP32_LOSS_BOUND):
    """10 steps of the cuda and the cpu program on the same tokens; with
    --precision bf16 (extra) both round their GEMM results to bf16, the GPU
    after fp32 tensor-core accumulation, the CPU after sgemm's."""
    if not have_gpu():
        print("SKIP: no GPU")
        sys.exit(SKIP)
    data = tokens(args, model)
    got = {}
    for target in ("cpu", "cuda"):
        exe = os.path.join(args.workdir, "train-" + target)
        compile_model(args, model, target, exe, extra)
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
    if worst > bound:
        sys.exit("FAIL: largest relative loss difference %.3g > %g" % (worst, bound))
    print("ok: %s, largest relative loss difference %.3g" % (model, worst))


def check_par_link(args, mesh):
    flags, ranks = MESHES[mesh]
    model, model_flags = small_gpt(args)
    exe = os.path.join(args.workdir, "train-cuda-" + mesh)
    compile_model(args, model, "cuda", exe, model_flags + flags)
    metrics = os.path.join(args.workdir, "m.jsonl")
    r = run_train(exe, tokens(args, "gpt-dyn"), metrics, 2, ranks, timeout=300)
    if have_gpu():
        if r.returncode != 0:
            sys.exit("FAIL: with a GPU mpirun -np %d ./train failed (%d):\n%s"
                     % (ranks, r.returncode, r.stderr))
        print("ok: gpt %s trained on the GPU" % mesh)
        return
    if r.returncode == 0 or "no CUDA device" not in r.stderr:
        sys.exit("FAIL: expected a non-zero exit and 'no CUDA device', got %d:\n%s%s"
                 % (r.returncode, r.stdout, r.stderr))
    line = [l for l in r.stderr.splitlines() if "no CUDA device" in l][0]
    print("ok: gpt %s links; without a GPU: exit %d, %s" % (mesh, r.returncode, line.strip()))


def check_par_vs_cpu(args, mesh):
    if not have_gpu():
        print("SKIP: no GPU")
        sys.exit(SKIP)
    flags, ranks = MESHES[mesh]
    model, model_flags = small_gpt(args)
    data = tokens(args, "gpt-dyn")
    got = {}
    for target in ("cpu", "cuda"):
        exe = os.path.join(args.workdir, "train-%s-%s" % (target, mesh))
        compile_model(args, model, target, exe, model_flags + flags)
        metrics = os.path.join(args.workdir, "%s-%s.jsonl" % (target, mesh))
        if os.path.exists(metrics):
            os.remove(metrics)
        r = run_train(exe, data, metrics, 10, ranks, timeout=400)
        if r.returncode != 0:
            sys.exit("FAIL: %s %s program exited %d:\n%s%s"
                     % (target, mesh, r.returncode, r.stdout, r.stderr))
        if target == "cuda":
            for line in r.stdout.splitlines():
                if "GPU collectives" in line or "pipeline messages" in line:
                    print(line)
        got[target] = losses(metrics)
    cpu, gpu = got["cpu"], got["cuda"]
    if len(cpu) != 10 or len(gpu) != 10:
        sys.exit("FAIL: expected 10 losses, got cpu %d, cuda %d" % (len(cpu), len(gpu)))
    for i, (c, g) in enumerate(zip(cpu, gpu)):
        print("step %d: cpu %.6f cuda %.6f" % (i, c, g))
    worst = max(abs(g - c) / max(abs(c), 1e-12) for c, g in zip(cpu, gpu))
    if worst > FP32_LOSS_BOUND:
        sys.exit("FAIL: largest relative loss difference %.3g > %g" % (worst, FP32_LOSS_BOUND))
    print("ok: gpt %s, largest relative loss difference %.3g" % (mesh, worst))


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
    elif args.check == "link-gpt-bf16":
        check_link(args, "gpt", ["--precision", "bf16"])
    elif args.check == "vs-cpu-gpt-bf16":
        # bf16 roundings of GEMM results flip where the two accumulations
        # straddle a boundary: bf16 noise, not fp32's bound.
        check_vs_cpu(args, "gpt", ["--precision", "bf16"], bound=1e-2)
    elif args.check.startswith("vs-cpu-") and args.check[7:] in ("tiny-lm", "mlp-lm", "gpt"):
        check_vs_cpu(args, args.check[7:])
    elif args.check.startswith("par-link-") and args.check[9:] in MESHES:
        check_par_link(args, args.check[9:])
    elif args.check.startswith("par-vs-cpu-") and args.check[11:] in MESHES:
        check_par_vs_cpu(args, args.check[11:])
    else:
        sys.exit("unknown check %r" % args.check)


if __name__ == "__main__":
    main()
