"""End-to-end GPU check of `merak-compile --target cuda` (when it exists).

    python3 bench/gpu/e2e.py --bin build/bin --out OUT [--quick] [--steps 10]

1. Detects the target: `merak-compile --help` must list `--target` and
   `cuda`; a bf16 switch is looked for among the flags (`--precision`,
   `--dtype`, `--mixed-precision`, `--bf16`). Missing pieces are reported in
   OUT/e2e.json and the script exits 2 ("not available"), not 1.
2. Small fp32 model (GPT-2 shaped: 2 layers, C=64, 4 heads, vocab 97, T=32,
   B=4): compiled for the CPU and for CUDA from the same ONNX, both trained
   --steps steps on the same tokens with `--sampler sequential`; every
   per-step loss of the GPU program must be within 1e-3 relative of the CPU
   program's.
3. GPT-2 124M (12 layers, C=768, 12 heads, vocab 50304, T=1024, B=16; 8 in
   --quick), random init (seed 0), bf16 if a bf16 switch exists: trained
   --steps steps; checks that the loss falls (last < first) and that each
   step's loss is within 2e-2 relative of PyTorch's bf16 autocast run from
   the same weights on the same batches (bench/gpu/torch_ref.py; bf16
   rounding differs between the two, so this is "within bf16 noise", not
   bitwise); then prints tokens/s and MFU of merak, PyTorch eager and
   torch.compile, and the ratios, and the step-time breakdown of a traced
   run (GEMMs, attention, optimizer, collectives, the rest:
   bench/trace_breakdown.py).
Everything (ONNX, programs, metrics, logs, e2e.json) is written under OUT.
"""
import argparse
import inspect
import json
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "test", "torch"))
sys.path.insert(0, HERE)
import export_models as em  # noqa: E402
import torch_ref  # noqa: E402
sys.path.insert(0, os.path.join(HERE, ".."))
import trace_breakdown  # noqa: E402

WARMUP = 3


def log(msg):
    print("e2e: " + msg, flush=True)


def run(cmd, logfile, timeout, env=None):
    """Runs cmd with output to logfile; returns (rc, seconds)."""
    t0 = time.time()
    with open(logfile, "w") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        try:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout,
                                env=env).returncode
        except subprocess.TimeoutExpired:
            f.write("\n[timed out after %d s]\n" % timeout)
            rc = 124
    return rc, time.time() - t0


def tail(path, n=15):
    try:
        with open(path) as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def detect(compile_bin):
    info = {"merak_compile": compile_bin}
    if not os.path.exists(compile_bin):
        info["missing"] = "merak-compile not built (%s)" % compile_bin
        return info
    p = subprocess.run([compile_bin, "--help"], capture_output=True, text=True)
    h = p.stdout + p.stderr
    info["has_target"] = "--target" in h and "cuda" in h
    for flag in ("--precision", "--dtype", "--mixed-precision", "--bf16"):
        if flag in h:
            info["bf16_flag"] = flag
            break
    if not info["has_target"]:
        info["missing"] = "merak-compile has no --target cuda"
    return info


def bf16_args(info):
    flag = info.get("bf16_flag")
    if flag is None:
        return None
    return [flag] if flag == "--bf16" else [flag + "=bf16"]


def export(model, args_shape, path):
    ids = torch.zeros(args_shape, dtype=torch.int64)
    kw = dict(opset_version=17, input_names=["input_ids"], output_names=["logits"],
              training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kw["dynamo"] = False  # the TorchScript exporter (opset 17, names kept)
    torch.onnx.export(model, (ids,), path, **kw)


def losses_and_ms(metrics):
    with open(metrics) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    losses = [r["loss"] for r in rows]
    ms = [r["time_ms"] for r in rows if "time_ms" in r]
    return losses, (statistics.median(ms[WARMUP:]) if len(ms) > WARMUP else
                    (statistics.median(ms) if ms else None))


def compile_and_train(bin_dir, onnx, exe, extra, tokens, steps, out, tag, timeout):
    mc = os.path.join(bin_dir, "merak-compile")
    rc, secs = run([mc, onnx, "--compile-to=binary", "--frozen", "*.attn.bias",
                    "--optimizer", "adamw", "-o", exe] + extra,
                   os.path.join(out, tag + ".compile.log"), timeout)
    if rc != 0:
        return {"error": "compile failed (rc %d): %s" % (rc, tail(os.path.join(out, tag + ".compile.log")))}
    r = train(exe, tokens, steps, out, tag, timeout)
    if "error" not in r:
        r["compile_s"] = secs
    return r


def train(exe, tokens, steps, out, tag, timeout, env_extra=None):
    """Runs an already compiled ./train (env_extra: e.g. MERAK_MATMUL_PRECISION)."""
    metrics = os.path.join(out, tag + ".metrics.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    rc, tsecs = run([exe, "--data", tokens, "--steps", str(steps), "--sampler", "sequential",
                     "--metrics", metrics, "--log-every", "1000000"],
                    os.path.join(out, tag + ".train.log"), timeout,
                    env=dict(os.environ, OMP_NUM_THREADS=str(os.cpu_count() or 1),
                             **(env_extra or {})))
    if rc != 0:
        return {"error": "training failed (rc %d): %s" % (rc, tail(os.path.join(out, tag + ".train.log")))}
    losses, ms = losses_and_ms(metrics)
    return {"train_s": tsecs, "losses": losses, "step_ms": ms}


def rel_errors(a, b):
    return [abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b)]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--peak-tflops", type=float, default=790.0)
    ap.add_argument("--timeout", type=int, default=240)
    ap.add_argument("--self-test-cpu", action="store_true",
                    help="no GPU: compile the 'GPU' program for the CPU too and stop after "
                         "the small model (checks export, compile, metrics and comparison)")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    res = {"steps": args.steps}
    info = detect(os.path.join(args.bin, "merak-compile"))
    if args.self_test_cpu:
        info = {"merak_compile": info["merak_compile"], "self_test_cpu": True}
    res["detect"] = info
    target = [] if args.self_test_cpu else ["--target", "cuda"]
    status = 0

    def save():
        with open(os.path.join(args.out, "e2e.json"), "w") as f:
            json.dump(res, f, indent=1)

    if "missing" in info:
        log("not available: " + info["missing"])
        save()
        return 2

    # --- small fp32 model: GPU vs CPU program --------------------------------
    small = dict(vocab=97, embd=64, heads=4, layers=2, seq=32, batch=4)
    torch.manual_seed(0)
    model = em.GPT2(vocab_size=small["vocab"], n_embd=small["embd"], n_head=small["heads"],
                    n_layer=small["layers"], block_size=small["seq"])
    onnx_small = os.path.join(args.out, "small.onnx")
    export(model, (small["batch"], small["seq"]), onnx_small)
    tok_small = os.path.join(args.out, "small_tokens.bin")
    np.random.default_rng(1).integers(0, small["vocab"], 100000).astype(np.uint16).tofile(tok_small)
    cpu = compile_and_train(args.bin, onnx_small, os.path.join(args.out, "small_cpu"), [],
                            tok_small, args.steps, args.out, "small_cpu", args.timeout)
    gpu = compile_and_train(args.bin, onnx_small, os.path.join(args.out, "small_gpu"),
                            target, tok_small, args.steps, args.out, "small_gpu",
                            args.timeout)
    small_res = {"cpu": cpu, "gpu": gpu}
    if "losses" in cpu and "losses" in gpu and len(cpu["losses"]) == len(gpu["losses"]) > 0:
        errs = rel_errors(gpu["losses"], cpu["losses"])
        small_res["max_rel_err"] = max(errs)
        small_res["pass"] = max(errs) <= 1e-3
        log("small fp32 model, %d steps: max rel loss error GPU vs CPU %.2e (bound 1e-3): %s"
            % (len(errs), max(errs), "PASS" if small_res["pass"] else "FAIL"))
        if not small_res["pass"]:
            status = 1
    else:
        small_res["pass"] = False
        status = 1
        log("small fp32 model: %s" % (cpu.get("error") or gpu.get("error") or "no losses"))
    res["small_fp32"] = small_res
    save()
    if args.self_test_cpu:
        return status

    # --- GPT-2 124M, bf16 ------------------------------------------------------
    B = 8 if args.quick else 16
    cfg = dict(vocab=50304, embd=768, heads=12, layers=12, seq=1024, batch=B)
    torch.manual_seed(0)
    big = em.GPT2(vocab_size=cfg["vocab"], n_embd=cfg["embd"], n_head=cfg["heads"],
                  n_layer=cfg["layers"], block_size=cfg["seq"])
    state = os.path.join(args.out, "gpt2_124m_init.pt")
    torch.save(big.state_dict(), state)
    onnx_big = os.path.join(args.out, "gpt2_124m.onnx")
    export(big, (B, cfg["seq"]), onnx_big)
    del big
    tok_big = os.path.join(args.out, "gpt2_tokens.bin")
    np.random.default_rng(2).integers(0, cfg["vocab"], 4_000_000).astype(np.uint16).tofile(tok_big)
    prec = bf16_args(info)
    extra = ["--target", "cuda"] + (prec or [])
    m = compile_and_train(args.bin, onnx_big, os.path.join(args.out, "gpt2_gpu"), extra, tok_big,
                          args.steps, args.out, "gpt2_gpu", args.timeout)
    big_res = {"merak": m, "dtype": "bf16" if prec else "fp32 (no bf16 flag found)"}
    tref = os.path.join(args.out, "gpt2_torch.json")
    targs = ["--device", "cuda", "--dtype", "bf16" if prec else "fp32", "--modes", "eager,compile",
             "--layers", "12", "--embd", "768", "--heads", "12", "--vocab", "50304",
             "--seq", "1024", "--batch", str(B), "--steps", str(args.steps),
             "--warmup", str(WARMUP), "--tokens", tok_big, "--state", state,
             "--peak-tflops", str(args.peak_tflops), "--json", tref]
    rc, _ = run([sys.executable, os.path.join(HERE, "torch_ref.py")] + targs,
                os.path.join(args.out, "gpt2_torch.log"), args.timeout)
    truns = {}
    if os.path.exists(tref):
        with open(tref) as f:
            truns = {r["mode"]: r for r in json.load(f)["runs"]}
    big_res["torch"] = truns
    fpt = None
    if "eager" in truns and "flops_per_token" in truns["eager"]:
        fpt = truns["eager"]["flops_per_token"]
    if "losses" in m:
        L = m["losses"]
        big_res["loss_falls"] = len(L) > 1 and L[-1] < L[0]
        if "eager" in truns and "losses" in truns["eager"]:
            errs = rel_errors(L, truns["eager"]["losses"])
            big_res["max_rel_err_vs_torch"] = max(errs)
            big_res["pass"] = big_res["loss_falls"] and max(errs) <= 2e-2
            log("GPT-2 124M %s: losses %s; vs PyTorch max rel %.2e (bound 2e-2), falls: %s -> %s"
                % (big_res["dtype"], " ".join("%.4f" % x for x in L), max(errs),
                   big_res["loss_falls"], "PASS" if big_res["pass"] else "FAIL"))
        else:
            big_res["pass"] = big_res["loss_falls"]
        if m.get("step_ms") and fpt:
            tok_s = B * cfg["seq"] / (m["step_ms"] * 1e-3)
            m["tokens_per_s"] = tok_s
            m["mfu"] = tok_s * fpt / (args.peak_tflops * 1e12)
            line = "GPT-2 124M B=%d T=1024: merak %.1f ms/step, %.0f tokens/s, MFU %.1f%%" % (
                B, m["step_ms"], tok_s, 100 * m["mfu"])
            for mode in ("eager", "compile"):
                r = truns.get(mode, {})
                if "step_ms" in r:
                    line += "; torch %s %.0f tokens/s (MFU %.1f%%), merak/torch speed %.2fx" % (
                        mode, r["tokens_per_s"], 100 * r["mfu"], tok_s / r["tokens_per_s"])
            log(line)
        # Step-time breakdown: one more short run with --trace (each op
        # synchronised and timed on its own; bench/trace_breakdown.py).
        trace = os.path.join(args.out, "gpt2_gpu.trace.json")
        rc, _ = run([os.path.join(args.out, "gpt2_gpu"), "--data", tok_big, "--steps", "2",
                     "--sampler", "sequential", "--trace", trace],
                    os.path.join(args.out, "gpt2_gpu.trace.log"), args.timeout)
        if rc == 0 and os.path.exists(trace):
            big_res["breakdown"] = trace_breakdown.breakdown(trace)
            log("GPT-2 124M step-time breakdown: " + trace_breakdown.describe(big_res["breakdown"]))
        else:
            log("GPT-2 124M step-time breakdown: traced run failed (rc %d)" % rc)
        # bf16 attention (forward and backward) on the WMMA tensor-core
        # kernels (opt-in).
        if prec and m.get("step_ms"):
            mt = train(os.path.join(args.out, "gpt2_gpu"), tok_big, args.steps, args.out,
                       "gpt2_gpu_attn_tc", args.timeout, {"MERAK_ATTENTION_TC": "1"})
            big_res["merak_attention_tc"] = mt
            if "losses" in mt and mt.get("step_ms"):
                log("GPT-2 124M with MERAK_ATTENTION_TC=1: %.1f ms/step (SIMT %.1f); losses vs "
                    "SIMT max rel %.2e" % (mt["step_ms"], m["step_ms"],
                                          max(rel_errors(mt["losses"], m["losses"]))))
            else:
                log("GPT-2 124M with MERAK_ATTENTION_TC=1: %s" % mt.get("error", "no timing"))
        if not big_res.get("pass"):
            status = 1
        # The same fp32 program with its GEMMs on bf16 tensor cores (fp32
        # accumulation; MERAK_MATMUL_PRECISION, runtime/cuda/ops_linalg.cu).
        if not prec:
            mb = train(os.path.join(args.out, "gpt2_gpu"), tok_big, args.steps, args.out,
                       "gpt2_gpu_bf16gemm", args.timeout, {"MERAK_MATMUL_PRECISION": "bf16"})
            big_res["merak_bf16_gemm"] = mb
            if "losses" in mb and mb.get("step_ms") and fpt:
                errs = rel_errors(mb["losses"], L)
                tok_s = B * cfg["seq"] / (mb["step_ms"] * 1e-3)
                mb["tokens_per_s"], mb["mfu"] = tok_s, tok_s * fpt / (args.peak_tflops * 1e12)
                log("GPT-2 124M, bf16 GEMMs: %.1f ms/step, %.0f tokens/s, MFU %.1f%%; losses vs "
                    "the fp32 program max rel %.2e" % (mb["step_ms"], tok_s, 100 * mb["mfu"],
                                                       max(errs)))
            else:
                log("GPT-2 124M, bf16 GEMMs: %s" % mb.get("error", "no timing"))
    else:
        log("GPT-2 124M: %s" % m.get("error"))
        status = 1
    res["gpt2_124m"] = big_res
    save()
    return status


if __name__ == "__main__":
    sys.exit(main())
