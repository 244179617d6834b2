#!/usr/bin/env python3
"""The device path of pipelined programs, without a GPU.

    pipeline_staged_check.py --bin BUILD/bin --src SOURCE_ROOT --workdir DIR
        --runtime-lib libmerak_runtime_cpu.a --staged-main libmerak_runtime_main_staged_test.a
        --include RUNTIME_INCLUDE CHECK

A --target cuda pipelined program runs the pipeline runner on device regions
through a PipelineMemory that is not host memory: stashes on the device,
messages staged through host buffers around MPI, the tied-gradient exchange
staged, losses and outputs copied back (runtime/src/pipeline.cpp,
runtime/cuda/main/train_main_cuda.cpp). Here the CPU program of the small GPT
(the test suite's, tied embeddings) is linked once as usual and once with
runtime/test/staged_device_main.cpp's main (merak-compile --runtime-dir),
whose backend stands in for a GPU with separate host memory: device -> host
copies only land at synchronize(), and a host buffer rewritten while a copy
could still read it is an error. Both run 6 steps on the same tokens; every
step's loss and gradient norm, and every tensor of the final checkpoint
(written from the device parameters), must be bitwise the same.

CHECK is a pipeline of test/cuda/cuda_program_check.py's PIPELINES (pp2-1f1b,
mb4, pp2-zbh1, pp2-interleaved, pp2-scp-selective, pp2-dp2), or an error path
of the staged pp 2 program:
  resume      the staged pp 2 program checkpointed after 3 steps (parameters
              copied back from its device) and resumed to 6 (restored, copied
              in again): every loss bitwise equal to the uninterrupted host run
  dead-rank   rank 1 killed mid-run (SIGKILL): the job ends non-zero within
              60 s and mpirun names the rank
  timeout     rank 1 stopped mid-run (SIGSTOP) with MERAK_COMM_TIMEOUT=3:
              rank 0 gives up within seconds with a message naming
              itself, the pp group, what it waited for and rank 1 as
              the stopped rank (the node's heartbeat)
"""
import argparse
import json
import os
import re
import signal
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cuda"))
import cuda_program_check as cpc  # noqa: E402


def runtime_dir(args):
    """A runtime tree (include/, lib/) whose main is the staged test main."""
    d = os.path.join(args.workdir, "staged-runtime")
    os.makedirs(os.path.join(d, "lib"), exist_ok=True)
    links = {os.path.join(d, "include"): args.include,
             os.path.join(d, "lib", "libmerak_runtime_cpu.a"): args.runtime_lib,
             os.path.join(d, "lib", "libmerak_runtime_main.a"): args.staged_main}
    for link, target in links.items():
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(os.path.abspath(target), link)
    return d


def safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    return {k: data[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in header.items()}


def checkpoint_tensors(root):
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            if name.endswith(".safetensors"):
                rel = os.path.relpath(os.path.join(dirpath, name), root)
                for k, v in safetensors(os.path.join(dirpath, name)).items():
                    out[(rel, k)] = v
    return out


def rank_pids(exe):
    """{world rank: pid} of the running ranks of `exe` (its full path)."""
    out = subprocess.run(["pgrep", "-f", exe], capture_output=True, text=True).stdout.split()
    ranks = {}
    for pid in out:
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv0 = f.read().split(b"\0")[0].decode()
            with open("/proc/%s/environ" % pid, "rb") as f:
                env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
        except OSError:
            continue
        rank = env.get(b"OMPI_COMM_WORLD_RANK")
        if os.path.basename(argv0) == os.path.basename(exe) and rank is not None:  # not mpirun
            ranks[int(rank)] = int(pid)
    return ranks


def check_error_path(args, kind):
    flags, ranks = cpc.PIPELINES["pp2-1f1b"]
    model, model_flags = cpc.small_gpt(args)
    data = cpc.tokens(args, "gpt-dyn")
    exe = os.path.join(args.workdir, "train-staged-" + kind)
    cpc.compile_model(args, model, "cpu", exe,
                      model_flags + flags + ["--runtime-dir", runtime_dir(args)])
    metrics = os.path.join(args.workdir, kind + ".jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    env = dict(os.environ, OMP_NUM_THREADS="1", MERAK_COMM_TIMEOUT="3")
    p = subprocess.Popen(cpc.MPIRUN + ["-np", "2", exe, "--data", data, "--steps", "100000000",
                                       "--sampler", "sequential", "--metrics", metrics,
                                       "--log-every", "1000000"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    # Both ranks are training once steps are being written.
    deadline = time.time() + 60
    while time.time() < deadline and (not os.path.exists(metrics)
                                      or os.path.getsize(metrics) < 200):
        time.sleep(0.2)
    pids = rank_pids(exe)
    victim = pids.get(1) if len(pids) == 2 else None
    start = time.time()
    if victim:
        os.kill(victim, signal.SIGKILL if kind == "dead-rank" else signal.SIGSTOP)
    try:
        out, _ = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        out += "\n(the job did not end within 60 s)"
    secs = time.time() - start
    if victim and kind == "timeout":  # the stopped rank, if mpirun left it
        for sig in (signal.SIGKILL, signal.SIGCONT):
            try:
                os.kill(victim, sig)
            except ProcessLookupError:
                pass
    print(out.rstrip())
    if not victim:
        sys.exit("FAIL: expected 2 running ranks of %s, found %s" % (exe, pids))
    if p.returncode == 0 or secs > 60:
        sys.exit("FAIL: exit %d after %.1f s" % (p.returncode, secs))
    if kind == "dead-rank":
        if not re.search(r"process rank 1 .*exited on signal 9", out):
            sys.exit("FAIL: mpirun did not name the dead rank 1")
    else:
        # Where rank 0 waits depends on when rank 1 stopped: a stage message
        # (receive of gradients, send of activations), the loss broadcast,
        # the tied-gradient exchange or the update's norm, all on pp.
        m = re.search(r"rank 0: (.+) on the pp group did not complete within 3 s; the rank it "
                      r"waits for: rank 1 \(pid \d+, this host\) is stopped", out)
        if not m:
            sys.exit("FAIL: no timeout message of rank 0 naming the pp group, what it waited "
                     "for and rank 1 as stopped")
        print("rank 0 waited for: " + m.group(1))
    print("ok: %s: the job ended %.1f s after rank 1 was %s, exit %d"
          % (kind, secs, "killed" if kind == "dead-rank" else "stopped", p.returncode))


def check_resume(args):
    flags, ranks = cpc.PIPELINES["pp2-1f1b"]
    model, model_flags = cpc.small_gpt(args)
    data = cpc.tokens(args, "gpt-dyn")
    runs = {}
    for kind, plan in (("host", [6]), ("staged", [3, 6])):
        exe = os.path.join(args.workdir, "train-resume-" + kind)
        extra = model_flags + flags
        if kind == "staged":
            extra += ["--runtime-dir", runtime_dir(args)]
        cpc.compile_model(args, model, "cpu", exe, extra)
        metrics = os.path.join(args.workdir, "resume-%s.jsonl" % kind)
        ckpt = os.path.join(args.workdir, "resume-%s-ckpt" % kind)
        subprocess.run(["rm", "-rf", ckpt, metrics], check=True)
        for i, steps in enumerate(plan):
            cmd = cpc.MPIRUN + ["-np", str(ranks), exe, "--data", data, "--steps", str(steps),
                                "--sampler", "sequential", "--metrics", metrics, "--log-every",
                                "100", "--checkpoint-dir", ckpt] + (["--resume"] if i else [])
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                               env=dict(os.environ, OMP_NUM_THREADS="1"))
            if r.returncode != 0:
                sys.exit("FAIL: %s (%d):\n%s%s" % (" ".join(cmd), r.returncode, r.stdout,
                                                     r.stderr))
        with open(metrics) as f:
            runs[kind] = [json.loads(l)["loss"] for l in f if l.strip()]
    if len(runs["host"]) != 6 or runs["host"] != runs["staged"]:
        sys.exit("FAIL: resumed staged losses %r, uninterrupted host %r"
                 % (runs["staged"], runs["host"]))
    print("ok: resume: 3 + 3 steps on the staged device bitwise equal to 6 on the host "
          "(final loss %.6f)" % runs["host"][-1])


def main():
    p = argparse.ArgumentParser()
    for flag in ("--bin", "--src", "--workdir", "--runtime-lib", "--staged-main", "--include"):
        p.add_argument(flag, required=True)
    p.add_argument("check")
    args = p.parse_args()
    if args.check == "resume":
        os.makedirs(args.workdir, exist_ok=True)
        return check_resume(args)
    if args.check in ("dead-rank", "timeout"):
        os.makedirs(args.workdir, exist_ok=True)
        return check_error_path(args, args.check)
    if args.check not in cpc.PIPELINES:
        sys.exit("unknown check %r (expected one of %s)" % (args.check, ", ".join(cpc.PIPELINES)))
    os.makedirs(args.workdir, exist_ok=True)
    flags, ranks = cpc.PIPELINES[args.check]
    model, model_flags = cpc.small_gpt(args)
    data = cpc.tokens(args, "gpt-dyn")
    staged_rt = runtime_dir(args)
    got = {}
    for kind in ("host", "staged"):
        exe = os.path.join(args.workdir, "train-" + kind)
        extra = model_flags + flags + (["--runtime-dir", staged_rt] if kind == "staged" else [])
        cpc.compile_model(args, model, "cpu", exe, extra)
        metrics = os.path.join(args.workdir, kind + ".jsonl")
        ckpt = os.path.join(args.workdir, kind + "-ckpt")
        for path in (metrics,):
            if os.path.exists(path):
                os.remove(path)
        subprocess.run(["rm", "-rf", ckpt], check=True)
        cmd = [exe, "--data", data, "--steps", "6", "--sampler", "sequential", "--metrics",
               metrics, "--log-every", "100", "--checkpoint-dir", ckpt]
        if ranks > 1:
            cmd = cpc.MPIRUN + ["-np", str(ranks)] + cmd
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, OMP_NUM_THREADS="1"))
        if r.returncode != 0:
            sys.exit("FAIL: the %s program exited %d:\n%s%s" % (kind, r.returncode, r.stdout,
                                                                 r.stderr))
        if kind == "staged":
            lines = [l for l in r.stdout.splitlines() if l.startswith("staged device:")]
            if len(lines) != ranks or any(" 0 synchronizations" in l for l in lines):
                sys.exit("FAIL: the staged program did not run on its test device:\n" + r.stdout)
            for l in sorted(lines):
                print(l)
        with open(metrics) as f:
            rows = [json.loads(l) for l in f if l.strip()]
        got[kind] = ([(m["loss"], m["grad_norm"]) for m in rows], checkpoint_tensors(ckpt))
    (host, host_ckpt), (staged, staged_ckpt) = got["host"], got["staged"]
    if len(host) != 6 or host != staged:
        for i, (a, b) in enumerate(zip(host, staged)):
            print("step %d: host %r staged %r" % (i, a, b))
        sys.exit("FAIL: the staged device's losses/gradient norms differ from the CPU program's")
    if not host_ckpt or host_ckpt.keys() != staged_ckpt.keys():
        sys.exit("FAIL: checkpoints hold different tensors: %d vs %d"
                 % (len(host_ckpt), len(staged_ckpt)))
    differ = [k for k in host_ckpt if host_ckpt[k] != staged_ckpt[k]]
    if differ:
        sys.exit("FAIL: %d checkpoint tensors differ, e.g. %s" % (len(differ), differ[:3]))
    print("ok: %s: 6 steps, losses and gradient norms bitwise equal (final loss %.6f), "
          "%d checkpoint tensors bitwise equal" % (args.check, host[-1][0], len(host_ckpt)))


if __name__ == "__main__":
    main()
