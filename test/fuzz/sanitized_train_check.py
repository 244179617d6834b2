#!/usr/bin/env python3
"""A generated training program linked against the sanitized runtime.

  sanitized_train_check.py --merak-compile build/bin/merak-compile --src . \\
      --instrumented build-fuzz --workdir DIR

Compiles the bundled GPT (examples/gpt/model.onnx) with AdamW, clipping and
a cosine schedule, links it against the instrumented build's runtime
(MERAK_RUNTIME_SANITIZE: ASan+UBSan) through --runtime-dir, with the step
itself compiled under the sanitizers too (MERAK_CXXFLAGS), and trains it:
4 steps with a checkpoint every 2, metrics and a trace, then a resume to 6
steps. With mpirun, the same model with --tp 2 on two ranks (the
collectives). Any sanitizer report fails.
"""
import argparse
import os
import shutil
import subprocess
import sys

SANITIZE = "-fsanitize=address,undefined -fno-sanitize-recover=undefined"
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]
REPORTS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
           "WARNING: AddressSanitizer")


def runtime_dir(args):
    """include/ and lib/ laid out as `cmake --install` does, from the
    instrumented build tree (symbolic links)."""
    d = os.path.join(args.workdir, "runtime")
    os.makedirs(os.path.join(d, "lib"), exist_ok=True)
    links = {os.path.join(d, "include"): os.path.join(args.src, "runtime", "include")}
    for lib in ("libmerak_runtime_cpu.a", "libmerak_runtime_main.a"):
        target = os.path.join(args.instrumented, "runtime", lib)
        if not os.path.exists(target):
            sys.exit("FAIL: %s is missing (test/fuzz/build_instrumented.sh builds it)" % target)
        links[os.path.join(d, "lib", lib)] = target
    for link, target in links.items():
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(os.path.abspath(target), link)
    return d


def compile_gpt(args, out, extra=()):
    cmd = [args.merak_compile, os.path.join(args.src, "examples", "gpt", "model.onnx"),
           "--compile-to=binary", "--frozen", "*.attn.bias", "--optimizer", "adamw",
           "--opt", "lr=2e-3", "--opt", "clip-norm=1.0", "--opt", "schedule=cosine",
           "--opt", "warmup-steps=2", "--opt", "total-steps=6",
           "--runtime-dir", runtime_dir(args), "-o", out] + list(extra)
    env = dict(os.environ, MERAK_CXXFLAGS=SANITIZE)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit("FAIL: %s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))


# Leaks are checked at exit; Open MPI's own are suppressed (lsan.supp), which
# needs its plugins kept mapped (their frames named) and full stacks through
# the uninstrumented libraries.
ENV = {"OMP_NUM_THREADS": "2",
       "ASAN_OPTIONS": "detect_leaks=1:fast_unwind_on_malloc=0",
       "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
       "LSAN_OPTIONS": "suppressions=" + os.path.join(
           os.path.dirname(os.path.abspath(__file__)), "lsan.supp"),
       "OMPI_MCA_mca_base_component_disable_dlclose": "1"}


def run(cmd, what):
    env = dict(os.environ, **ENV)
    print("sanitized_train_check: " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    out = r.stdout + r.stderr
    reports = [m for m in REPORTS if m in out]
    if r.returncode != 0 or reports:
        sys.exit("FAIL: %s (exit %d, %s)\n%s" % (what, r.returncode,
                                                 ", ".join(reports) or "no report", out[-12000:]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--merak-compile", required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("--instrumented", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)

    with open(os.path.join(args.src, "examples", "gpt", "corpus.txt"), "rb") as f:
        text = f.read()[:20000]
    data = os.path.join(args.workdir, "tokens.bin")
    with open(data, "wb") as f:  # bytes as uint16 tokens, vocabulary 128
        f.write(b"".join(bytes([c % 128, 0]) for c in text))

    exe = os.path.join(args.workdir, "train")
    compile_gpt(args, exe)
    ckpt = os.path.join(args.workdir, "checkpoints")
    common = ["--data", data, "--sampler", "random", "--seed", "1", "--checkpoint-dir", ckpt,
              "--checkpoint-every", "2", "--log-every", "1"]
    run([exe, "--steps", "4", "--metrics", os.path.join(args.workdir, "m.jsonl"),
         "--trace", os.path.join(args.workdir, "trace.json")] + common, "4 steps")
    out = run([exe, "--steps", "6", "--resume"] + common, "resume to 6 steps")
    if "6 steps" not in out and "step 6/6" not in out:
        sys.exit("FAIL: the resumed run did not reach step 6\n" + out[-4000:])

    if shutil.which("mpirun"):
        exe_tp = os.path.join(args.workdir, "train-tp2")
        compile_gpt(args, exe_tp, ["--tp", "2"])
        forward = [arg for name in ENV for arg in ("-x", name)]
        run(MPIRUN + forward + ["-np", "2", exe_tp, "--steps", "3", "--data", data, "--log-every", "1"],
            "--tp 2 on two ranks")
    print("sanitized_train_check: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
