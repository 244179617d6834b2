#!/usr/bin/env python3
"""Mixture-of-Experts programs for --target cuda (the expert GEMMs, routing
kernels and all-to-all of runtime/cuda), end to end.

    moe_cuda_check.py --bin BUILD/bin --workdir DIR CHECK

The model is expert_parallel_check.py's scaled-down Mixtral (transformers
config, random weights), batch 8. MESHES: serial, ep2 (--dp 2 --ep 2),
ep2-chunks (started all-to-alls), ep2-capacity (token dropping with compact
buffers), ep2-shadow (dynamic shadowing), ep2-pp2 (MoE layers inside
pipeline stages), tp2-sp and ep2-tp2-sp (sequence parallelism: the
combine's reduce-scatter of the expert rows and its grouped sum).

CHECK:
  link       every mesh compiles with --target cuda and links; its step calls
             the GPU ABI's expert entry points (gpu::expertMatmul, and
             gpu::expertAllToAll with ep); without a GPU `mpirun -np N ./train`
             exits non-zero with "no CUDA device" (with one it must train).
  vs-cpu     with a GPU: every mesh's cuda program against its cpu program,
             10 steps on the same tokens, losses within 1e-4 relative (fp32
             summation order: cuBLASLt against OpenBLAS). Exits 77 (skip)
             without a GPU.
  errors     --moe-rebalance-every with --target cuda is refused naming the
             flag (the placement moves experts in the host's parameters).
Ends with "N passed, M failed".
"""
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import expert_parallel_check as epc  # noqa: E402

SKIP = 77
BOUND = 1e-4
MESHES = {
    "serial": ([], 1),
    "ep2": (["--dp", "2", "--ep", "2"], 2),
    "ep2-chunks": (["--dp", "2", "--ep", "2", "--moe-chunks", "2"], 2),
    "ep2-capacity": (["--dp", "2", "--ep", "2", "--moe-capacity-factor", "1.25",
                      "--moe-drop-policy", "position"], 2),
    "ep2-shadow": (["--dp", "2", "--ep", "2", "--moe-shadow", "1"], 2),
    "ep2-pp2": (["--dp", "2", "--ep", "2", "--pp", "2", "--microbatches", "2"], 4),
    "tp2-sp": (["--tp", "2", "--sequence-parallel", "on"], 2),
    "ep2-tp2-sp": (["--dp", "2", "--ep", "2", "--tp", "2", "--sequence-parallel", "on"], 4),
}


def have_gpu():
    if not shutil.which("nvidia-smi"):
        return False
    r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return r.returncode == 0 and "GPU" in r.stdout


def check_link(env):
    notes = []
    for mesh, (flags, ranks) in MESHES.items():
        src = env.compile("mixtral", "cuda-" + mesh + ".cpp",
                          flags + ["--target", "cuda", "--compile-to=emit"])
        text = open(src).read()
        wanted = ["gpu::expertMatmul("] + (["gpu::expertAllToAll"] if "--ep" in flags else [])
        missing = [w for w in wanted if w not in text]
        if missing or "merak::rt::cpu::expert" in text:
            return False, "%s: the cuda source lacks %s" % (mesh, missing)
        exe = env.compile("mixtral", "cuda-" + mesh, flags + ["--target", "cuda"])
        cmd = [exe, "--data", env.data, "--steps", "2", "--sampler", "sequential"]
        if ranks > 1:
            cmd = epc.zoo.MPIRUN + ["-np", str(ranks)] + cmd
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, OMP_NUM_THREADS="1"))
        if have_gpu():
            if r.returncode != 0:
                return False, "%s: with a GPU ./train failed (%d):\n%s" % (
                    mesh, r.returncode, r.stderr)
            notes.append("%s trained" % mesh)
        elif r.returncode == 0 or "no CUDA device" not in r.stderr:
            return False, "%s: expected a non-zero exit and 'no CUDA device', got %d:\n%s" % (
                mesh, r.returncode, r.stderr)
        else:
            notes.append("%s links" % mesh)
    return True, ", ".join(notes) + ("" if have_gpu() else " (no GPU: each exits 'no CUDA device')")


def check_vs_cpu(env):
    worst_all, lines = 0.0, []
    for mesh, (flags, ranks) in MESHES.items():
        got = {}
        for target in ("cpu", "cuda"):
            exe = env.compile("mixtral", "vs-%s-%s" % (target, mesh), flags + ["--target", target])
            got[target] = env.train(exe, 10, ranks)
        worst = epc.rel_err(got["cuda"], got["cpu"])
        worst_all = max(worst_all, worst)
        lines.append("%s %.1e" % (mesh, worst))
    return worst_all <= BOUND, "cuda vs cpu, max rel loss difference: " + ", ".join(lines)


def check_errors(env):
    p = env.compile("mixtral", "cuda-rebalance",
                    ["--dp", "2", "--ep", "2", "--moe-rebalance-every", "2", "--target", "cuda"],
                    check=False)
    want = "--moe-rebalance-every is supported on --target cpu only"
    return p.returncode != 0 and want in p.stdout, "exit %d: %s" % (
        p.returncode, p.stdout.strip().splitlines()[-1] if p.stdout.strip() else "")


CHECKS = {"link": check_link, "vs-cpu": check_vs_cpu, "errors": check_errors}


def main():
    if "vs-cpu" in sys.argv[1:] and not have_gpu():
        print("SKIP: no GPU")
        return SKIP
    return epc.run_checks(epc.Env, lambda env, name: CHECKS[name](env), list(CHECKS))


if __name__ == "__main__":
    sys.exit(main())
