"""Preemption: a stop signal ends ./train after the current step with a
coordinated checkpoint and exit 128 + signal; --resume continues bitwise.

    /usr/bin/python3 test/parallel/preempt_check.py --bin BUILD/bin --workdir DIR [CHECK...]

The model is parallel_check.py's GPT (4 layers, dynamic batch), AdamW,
--sampler sequential. Each run is started with far more steps than it will
take, and signalled once its metrics show a few steps. Checks:
  serial-term      SIGTERM: exit 143, one line naming the signal, the step
                   and the checkpoint; the checkpoint is that step's; the
                   run resumed from it has per-step losses bitwise equal to
                   an uninterrupted run of the same length;
  serial-twice     SIGINT and SIGTERM delivered together (the process is
                   stopped while both are sent; no periodic checkpoints):
                   the second exits at once, saying so, and the checkpoint
                   directory holds nothing;
  serial-configured  --stop-signals USR2 stops on SIGUSR2 (exit 140);
                   --stop-signals none leaves SIGTERM's default (killed);
  dp2-tp2-one-rank SIGTERM to one of 4 ranks (dp 2 x tp 2) only: every
                   rank stops after the same step, mpirun exits 143, the
                   checkpoint has all 4 shards and the 4-rank resume is
                   bitwise equal to an uninterrupted 4-rank run;
  dp2-pp2-mpirun   SIGUSR1 to mpirun (which forwards it to every rank) of
                   a dp 2 x pp 2 pipeline (2 micro-batches): exit 138, and
                   the resume is bitwise equal to an uninterrupted run.
Ends with "N passed, M failed".
"""
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
from parallel_check import BATCH, CONFIGS, MPIRUN, SEQ, Env, run  # noqa: E402
from check_runner import run_checks  # noqa: E402
from merak_checkpoint import read_checkpoint  # noqa: E402

MANY = "1000000"  # --steps of a run that a signal stops


def compile_program(env, name, flags):
    exe = os.path.join(env.work, "train-" + name)
    if not os.path.exists(exe):
        run([os.path.join(env.bin_dir, "merak-compile"), env.onnx, "--input-shape",
             "input_ids=%dx%d" % (BATCH, SEQ), "--compile-to=binary", "--frozen", "*.attn.bias",
             "-o", exe] + CONFIGS["adamw"][0] + flags)
    return exe


def metrics_lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.endswith("\n")]


def start(env, exe, ranks, name, *extra):
    """A run of `exe` on `ranks` processes with a checkpoint dir and metrics
    under `name`, started fresh."""
    ckpt = os.path.join(env.work, name + "-ckpt")
    metrics = os.path.join(env.work, name + ".jsonl")
    subprocess.run(["rm", "-rf", ckpt, metrics])
    cmd = [exe, "--data", env.data, "--steps", MANY, "--sampler", "sequential",
           "--metrics", metrics, "--checkpoint-dir", ckpt] + list(extra)
    if ranks > 1:
        cmd = MPIRUN + ["-np", str(ranks)] + cmd
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env.env,
                         start_new_session=True)
    return p, ckpt, metrics


def wait_for_steps(p, metrics, steps=5, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline and p.poll() is None:
        if len(metrics_lines(metrics)) >= steps:
            return True
        time.sleep(0.02)
    return False


def finish(p, timeout=120):
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return None, out.decode()
    return p.returncode, out.decode()


def latest_step(ckpt):
    with open(os.path.join(ckpt, "latest")) as f:
        return int(f.read().strip().split("_")[1].split(".")[0])


def resume_equal(env, exe, ranks, name, ckpt, metrics, stopped):
    """Resumes 5 steps past the stop and compares every step's loss with an
    uninterrupted run of the same length (bitwise)."""
    steps = str(stopped + 5)
    cmd = [exe, "--data", env.data, "--steps", steps, "--sampler", "sequential"]
    mpi = MPIRUN + ["-np", str(ranks)] if ranks > 1 else []
    run(mpi + cmd + ["--metrics", metrics, "--checkpoint-dir", ckpt, "--resume"], env=env.env)
    full = os.path.join(env.work, name + "-full.jsonl")
    run(mpi + cmd + ["--metrics", full], env=env.env)
    got = [m["loss"] for m in metrics_lines(metrics)]
    want = [m["loss"] for m in metrics_lines(full)]
    return got == want and len(want) == stopped + 5


def check_stopped(env, exe, ranks, name, p, ckpt, metrics, signame, code):
    rc, out = finish(p)
    if rc != code:
        return False, "exit %s, expected %d:\n%s" % (rc, code, out[-2000:])
    stopped = latest_step(ckpt)
    line = "train: %s: stopped after step %d of %s: checkpoint %s/step_%d written" % (
        signame, stopped, MANY, ckpt, stopped)
    if line not in out:
        return False, "no '%s' in:\n%s" % (line, out[-2000:])
    if len(metrics_lines(metrics)) != stopped:
        return False, "metrics hold %d steps, the checkpoint %d" % (
            len(metrics_lines(metrics)), stopped)
    shards = read_checkpoint(ckpt, stopped)  # every shard present and readable
    if not shards:
        return False, "the checkpoint of step %d is empty" % stopped
    if not resume_equal(env, exe, ranks, name, ckpt, metrics, stopped):
        return False, "the resume from step %d differs from an uninterrupted run" % stopped
    return True, "exit %d after step %d; resumed run bitwise equal" % (code, stopped)


def check_serial_term(env):
    exe = compile_program(env, "serial", [])
    p, ckpt, metrics = start(env, exe, 1, "serial-term")
    if not wait_for_steps(p, metrics):
        return False, "the run did not start: %s" % finish(p)[1][-2000:]
    p.send_signal(signal.SIGTERM)
    return check_stopped(env, exe, 1, "serial-term", p, ckpt, metrics, "SIGTERM", 143)


def check_serial_twice(env):
    # No periodic checkpoints: one that was being written when the process
    # was stopped would land after SIGCONT (the main thread finishes its
    # rename while the signal thread exits), which is not the stop's
    # checkpoint. Any checkpoint after the two signals is a failure.
    exe = compile_program(env, "serial", [])
    p, ckpt, metrics = start(env, exe, 1, "serial-twice")
    if not wait_for_steps(p, metrics):
        return False, "the run did not start: %s" % finish(p)[1][-2000:]
    p.send_signal(signal.SIGSTOP)
    time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    p.send_signal(signal.SIGTERM)
    p.send_signal(signal.SIGCONT)
    rc, out = finish(p)
    left = sorted(os.listdir(ckpt)) if os.path.isdir(ckpt) else []
    ok = rc in (130, 143) and "a second stop signal: exiting at once" in out and not left
    return ok, "exit %s, checkpoint directory holds %s; %s" % (
        rc, left or "nothing", out.strip().splitlines()[-1] if out.strip() else "")


def check_serial_configured(env):
    exe = compile_program(env, "serial", [])
    p, ckpt, metrics = start(env, exe, 1, "serial-usr2", "--stop-signals", "USR2")
    if not wait_for_steps(p, metrics):
        return False, "the run did not start: %s" % finish(p)[1][-2000:]
    p.send_signal(signal.SIGUSR2)
    ok, msg = check_stopped(env, exe, 1, "serial-usr2", p, ckpt, metrics, "SIGUSR2", 140)
    if not ok:
        return ok, msg
    p, ckpt, metrics = start(env, exe, 1, "serial-none", "--stop-signals", "none")
    if not wait_for_steps(p, metrics):
        return False, "the run did not start: %s" % finish(p)[1][-2000:]
    p.send_signal(signal.SIGTERM)
    rc, out = finish(p)
    if rc != -signal.SIGTERM:
        return False, "--stop-signals none: exit %s, expected killed by SIGTERM" % rc
    return True, msg + "; with --stop-signals none SIGTERM kills"


def rank_pids(mpirun_pid, exe):
    out = subprocess.run(["pgrep", "-P", str(mpirun_pid)], stdout=subprocess.PIPE).stdout
    pids = []
    for pid in out.decode().split():
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if f.read().split(b"\0")[0].decode() == exe:
                    pids.append(int(pid))
        except OSError:
            pass
    return sorted(pids)


def check_dp2_tp2_one_rank(env):
    exe = env.program("adamw", 2, 2)
    p, ckpt, metrics = start(env, exe, 4, "dp2-tp2-term")
    if not wait_for_steps(p, metrics):
        return False, "the run did not start: %s" % finish(p)[1][-2000:]
    pids = rank_pids(p.pid, exe)
    if len(pids) != 4:
        finish(p, timeout=1)
        return False, "found %d rank processes under mpirun" % len(pids)
    os.kill(pids[-1], signal.SIGTERM)  # one rank only: the others must agree
    return check_stopped(env, exe, 4, "dp2-tp2-term", p, ckpt, metrics, "SIGTERM", 143)


def check_dp2_pp2_mpirun(env):
    exe = compile_program(env, "dp2-pp2", ["--dp", "2", "--pp", "2", "--microbatches", "2"])
    p, ckpt, metrics = start(env, exe, 4, "dp2-pp2-usr1")
    if not wait_for_steps(p, metrics):
        return False, "the run did not start: %s" % finish(p)[1][-2000:]
    p.send_signal(signal.SIGUSR1)  # mpirun forwards SIGUSR1 to every rank
    return check_stopped(env, exe, 4, "dp2-pp2-usr1", p, ckpt, metrics, "SIGUSR1", 138)


CHECKS = {
    "serial-term": check_serial_term,
    "serial-twice": check_serial_twice,
    "serial-configured": check_serial_configured,
    "dp2-tp2-one-rank": check_dp2_tp2_one_rank,
    "dp2-pp2-mpirun": check_dp2_pp2_mpirun,
}


def main():
    return run_checks(Env, lambda env, name: CHECKS[name](env), CHECKS)


if __name__ == "__main__":
    sys.exit(main())
