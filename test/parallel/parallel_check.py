"""Parallel training programs against the serial one (mpirun on CPUs).

    /usr/bin/python3 test/parallel/parallel_check.py --bin BUILD/bin --workdir DIR [CHECK...]

A GPT-2-style decoder (4 layers, 4 heads; the test suite's model, exported
with a dynamic batch axis) is compiled serially and with --dp N and/or
--tp M, and each program trains 20 steps on the bundled corpus with
--sampler sequential (rows of a step split over the data-parallel ranks;
the tensor-parallel ranks of a data-parallel rank share its rows). Checks:
  equal-<opt>-dp<N>, equal-<opt>-tp<M>, equal-<opt>-dp<N>-tp<M>
                     per-step losses within 1e-5 (SGD) / 1e-4 (AdamW)
                     relative of the serial program, and the final
                     checkpoint's parameters (full tensors gathered from the
                     tensor-parallel shards) within the same tolerance;
  vocab-*            as equal-*, with --vocab-parallel (vocabulary 80; the
                     IR holds no [B, T, V] tensor); vocab-untied-*: an LM
                     head of its own, vocabulary 97: the input embedding
                     splits with it (both [97, 64] tables padded to tp x 49);
  resume-tp<A>-to-tp<B>  AdamW: 10 steps at tp=A with a checkpoint, then
                     resumed at tp=B for 10 more: losses and final parameters
                     match the uninterrupted serial run (1e-4);
  equal-<opt>-dp<N>-zero1  (also adamw-clip: clipping at 0.5 on every step)
                     as equal-*, with --zero 1 (optimizer state sharded
                     over dp): the checkpoint's parameters and optimizer state
                     (gathered to full tensors) match the serial run's;
  resume-zero-dp2-to-dp1, resume-dp1-to-zero-dp2  AdamW: 10 steps with one
                     configuration, resumed for 10 with the other;
  zero-padding       deep-lm (parameter sizes that do not divide by dp):
                     --zero 1 at dp 3 and 4, and a dp 4 -> dp 3 resume;
  zero-memory        per-rank parameter storage (params_bytes) at dp=2 and
                     dp=4, with and without --zero 1 (AdamW): ZeRO is smaller;
  launch-mismatch    a dp=2 program started with 3 processes exits non-zero
                     naming both counts;
  dead-rank          a rank killed mid-run ends the whole job non-zero within
                     60 s, and the output names the rank.
  stopped-rank       a rank stopped (SIGSTOP) mid-run: the job ends non-zero
                     within 60 s, and the ranks that time out name it.
Ends with "N passed, M failed".
"""
import json
import os
import shutil
import re
import signal
import subprocess
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import export_models as em  # noqa: E402
from program_check import param_rel_err  # noqa: E402
from merak_checkpoint import read_checkpoint  # noqa: E402
from check_runner import run_checks  # noqa: E402

STEPS = 20
BATCH, SEQ, VOCAB = 4, 16, 97
V_SPLIT = 80  # the vocab-* checks' vocabulary (divides by tp)
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]
CONFIGS = {
    "sgd": (["--optimizer", "sgd", "--opt", "lr=0.05", "--opt", "momentum=0.9"], 1e-5),
    "adamw": (["--optimizer", "adamw", "--opt", "lr=3e-3"], 1e-4),
    # Clipping on every step (the gradient norm is about 1-3): the global
    # norm must be right, e.g. summed from ZeRO's gradient parts.
    "adamw-clip": (["--optimizer", "adamw", "--opt", "lr=3e-3", "--opt", "clip-norm=0.5"], 1e-4),
}


def run(cmd, env=None, timeout=300):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                       timeout=timeout)
    if p.returncode:
        raise RuntimeError("%s failed (%d):\n%s" % (os.path.basename(cmd[0]), p.returncode,
                                                  p.stdout.decode()[-3000:]))
    return p.stdout.decode()


class Env:
    def __init__(self, bin_dir, work, vocab=VOCAB, extra=(), untied=False):
        self.bin_dir, self.work, self.vocab, self.extra = bin_dir, work, vocab, list(extra)
        os.makedirs(work, exist_ok=True)
        torch.manual_seed(0)
        model = em.GPT2(vocab_size=vocab, n_embd=64, n_head=4, n_layer=4, block_size=SEQ)
        if untied:  # an LM head of its own next to the input embedding (Llama's)
            model.lm_head.weight = torch.nn.Parameter(model.lm_head.weight.detach() * 0.5)
        ids = torch.zeros(BATCH, SEQ, dtype=torch.int64)
        self.onnx = os.path.join(work, "model.onnx")
        torch.onnx.export(model, (ids,), self.onnx, opset_version=17,
                          input_names=["input_ids"], output_names=["logits"],
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False,
                          dynamic_axes={"input_ids": {0: "batch"}})
        corpus = os.path.join(HERE, "..", "..", "examples", "gpt", "corpus.txt")
        text = np.frombuffer(open(corpus, "rb").read(), dtype=np.uint8)
        self.data = os.path.join(work, "tokens.bin")
        (text.astype(np.int64) % vocab).astype(np.uint16).tofile(self.data)
        self.env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        self.cache = {}
        self.params_bytes = {}

    def program(self, opt, dp, tp=1, zero=0):
        key = (opt, dp, tp, zero)
        if key not in self.cache:
            exe = os.path.join(self.work, "train-%s-dp%d-tp%d-zero%d" % (opt, dp, tp, zero))
            out = run([os.path.join(self.bin_dir, "merak-compile"), self.onnx,
                       "--input-shape", "input_ids=%dx%d" % (BATCH, SEQ), "--compile-to=binary",
                       "--frozen", "*.attn.bias", "--dp", str(dp), "--tp", str(tp),
                       "--zero", str(zero), "-o", exe] + CONFIGS[opt][0] + self.extra)
            # "parameters and state N bytes": the manifest's params_bytes.
            m = re.search(r"parameters and state (\d+) bytes", out)
            self.params_bytes[key] = int(m.group(1)) if m else None
            self.cache[key] = exe
        return self.cache[key]

    def train(self, opt, dp, tp=1, steps=STEPS, ckpt=None, resume=False, zero=0):
        """Per-step losses and the final checkpoint of one run."""
        name = "%s-dp%d-tp%d-zero%d" % (opt, dp, tp, zero)
        metrics = os.path.join(self.work, name + ".jsonl")
        if ckpt is None:
            ckpt = os.path.join(self.work, name + "-ckpt")
        if os.path.exists(metrics):
            os.remove(metrics)
        cmd = [self.program(opt, dp, tp, zero), "--data", self.data, "--steps", str(steps),
               "--sampler", "sequential", "--metrics", metrics, "--checkpoint-dir", ckpt]
        if resume:
            cmd.append("--resume")
        if dp * tp > 1:
            cmd = MPIRUN + ["-np", str(dp * tp)] + cmd
        run(cmd, env=self.env)
        with open(metrics) as f:
            losses = [json.loads(line)["loss"] for line in f]
        return losses, read_checkpoint(ckpt, steps)

    def serial(self, opt):
        if ("serial", opt) not in self.cache:
            self.cache[("serial", opt)] = self.train(opt, 1)
        return self.cache[("serial", opt)]


def max_param_err(params, serial_params):
    err = 0.0
    for name, want in serial_params.items():
        if want.dtype.kind != "f" or name.startswith("optimizer.hparams"):
            continue
        if params[name].shape != want.shape:
            return float("inf")
        err = max(err, param_rel_err(name, params[name], want))
    return err


def check_equal(env, opt, dp, tp=1, zero=0):
    tol = CONFIGS[opt][1]
    serial, serial_params = env.serial(opt)
    got, params = env.train(opt, dp, tp, zero=zero)
    if len(got) != STEPS:
        return False, "%d metrics lines" % len(got)
    loss_err = max(abs(a - b) / abs(b) for a, b in zip(got, serial))
    param_err = max_param_err(params, serial_params)
    ok = loss_err <= tol and param_err <= tol and serial[-1] < serial[0]
    return ok, ("losses %.4f -> %.4f, max rel err %.2e; parameters max rel err %.2e (tol %g)"
                % (got[0], got[-1], loss_err, param_err, tol))


def vocab_env(env):
    """The GPT with a vocabulary of 80 (divisible by tp 2 and 4), compiled
    with --vocab-parallel (a no-op at tp 1, so its serial program is the
    ordinary one)."""
    if "vocab" not in env.cache:
        env.cache["vocab"] = Env(env.bin_dir, os.path.join(env.work, "vocab80"), vocab=V_SPLIT,
                                 extra=["--vocab-parallel"])
    return env.cache["vocab"]


def vocab_training_ir(venv, opt, dp, tp):
    """The text of `venv`'s training step compiled with --vocab-parallel."""
    ir = os.path.join(venv.work, "train-%s-dp%d-tp%d.mlir" % (opt, dp, tp))
    run([os.path.join(venv.bin_dir, "merak-compile"), venv.onnx,
         "--input-shape", "input_ids=%dx%d" % (BATCH, SEQ), "--compile-to=training",
         "--frozen", "*.attn.bias", "--dp", str(dp), "--tp", str(tp), "--vocab-parallel",
         "-o", ir] + CONFIGS[opt][0])
    with open(ir) as f:
        return f.read()


def check_vocab(env, opt, dp, tp):
    """Vocabulary-parallel embedding, LM head and cross-entropy: equal to the
    serial program, and no tensor of the full logits' shape [B, T, V] (nor
    [V, C]) in the compiled training step of any rank."""
    venv = vocab_env(env)
    ok, msg = check_equal(venv, opt, dp, tp)
    # The params' declarations name the full initial value; every other type
    # is what a rank holds.
    text = "\n".join(l for l in vocab_training_ir(venv, opt, dp, tp).splitlines()
                     if "merak.param" not in l)
    rows, v = BATCH // dp, V_SPLIT
    full = ["tensor<%dx%dx%dxf32>" % (rows, SEQ, v), "tensor<%dx%dxf32>" % (rows * SEQ, v),
            "tensor<64x%dxf32>" % v, "tensor<%dx64xf32>" % v]
    local = "tensor<%dx%dx%dxf32>" % (rows, SEQ, v // tp)
    found = [s for s in full if s in text]
    if found or local not in text or "group = \"tp\"" not in text:
        return False, msg + "; IR has full-vocabulary tensors %s or lacks %s" % (found, local)
    return ok, msg + "; no [B, T, V] tensor, logits %s" % local


def check_vocab_untied(env, opt, dp, tp):
    """The GPT with an untied LM head and a vocabulary of 97 (padded to
    tp x 49): the input embedding `wte` splits with the head (both [97, 64]
    tables sharded on V), equal to the serial program in losses and in the
    final (assembled) parameters."""
    if "untied" not in env.cache:
        env.cache["untied"] = Env(env.bin_dir, os.path.join(env.work, "untied97"),
                                  extra=["--vocab-parallel"], untied=True)
    uenv = env.cache["untied"]
    ok, msg = check_equal(uenv, opt, dp, tp)
    local = (VOCAB + tp - 1) // tp
    shards = [n for n in re.findall(r"merak.param @(\S+) : tensor<%dx64xf32> = .*size = %d"
                                    % (local, VOCAB), vocab_training_ir(uenv, opt, dp, tp))
              if not n.startswith("optimizer.")]
    if sorted(shards) != ["lm_head.weight", "transformer.wte.weight"]:
        return False, msg + "; vocabulary shards %s" % shards
    return ok, msg + "; shards %s" % sorted(shards)


def check_resume(env, tp_from, tp_to):
    """A checkpoint written at one tp resumes at another (each piece records
    its place in the full tensor), matching the uninterrupted serial run."""
    opt, half = "adamw", STEPS // 2
    tol = CONFIGS[opt][1]
    serial, serial_params = env.serial(opt)
    ckpt = os.path.join(env.work, "resume-tp%d-to-tp%d-ckpt" % (tp_from, tp_to))
    first, _ = env.train(opt, 1, tp_from, steps=half, ckpt=ckpt)
    second, params = env.train(opt, 1, tp_to, steps=STEPS, ckpt=ckpt, resume=True)
    got = first + second
    if len(got) != STEPS:
        return False, "%d + %d metrics lines" % (len(first), len(second))
    loss_err = max(abs(a - b) / abs(b) for a, b in zip(got, serial))
    param_err = max_param_err(params, serial_params)
    ok = loss_err <= tol and param_err <= tol
    return ok, ("losses %.4f -> %.4f, max rel err %.2e; parameters max rel err %.2e (tol %g)"
                % (got[0], got[-1], loss_err, param_err, tol))


def check_resume_zero(env, dp_from, zero_from, dp_to, zero_to):
    """A checkpoint of ZeRO-sharded optimizer state (each dp rank's part)
    resumes without ZeRO and the reverse, matching the uninterrupted serial
    run."""
    opt, half = "adamw", STEPS // 2
    tol = CONFIGS[opt][1]
    serial, serial_params = env.serial(opt)
    ckpt = os.path.join(env.work, "resume-dp%d-z%d-to-dp%d-z%d-ckpt"
                        % (dp_from, zero_from, dp_to, zero_to))
    first, _ = env.train(opt, dp_from, steps=half, ckpt=ckpt, zero=zero_from)
    second, params = env.train(opt, dp_to, steps=STEPS, ckpt=ckpt, resume=True, zero=zero_to)
    got = first + second
    if len(got) != STEPS:
        return False, "%d + %d metrics lines" % (len(first), len(second))
    loss_err = max(abs(a - b) / abs(b) for a, b in zip(got, serial))
    param_err = max_param_err(params, serial_params)
    ok = loss_err <= tol and param_err <= tol
    return ok, ("losses %.4f -> %.4f, max rel err %.2e; parameters and state max rel err "
                "%.2e (tol %g)" % (got[0], got[-1], loss_err, param_err, tol))


def check_zero_padding(env):
    """Parameters whose sizes do not divide by dp (test/Tools/Inputs/deep-lm:
    15, 9 and 15 elements) are padded into equal parts: AdamW with --zero 1
    at dp 3 and 4 matches the serial program, and a checkpoint written at
    dp 4 resumes at dp 3 (parts of different sizes)."""
    model = os.path.join(HERE, "..", "Tools", "Inputs", "deep-lm.onnxtxt")
    work = os.path.join(env.work, "deep-lm")
    shutil.rmtree(work, ignore_errors=True)  # executables of an earlier build
    os.makedirs(work)
    data = os.path.join(work, "tokens.bin")
    (np.arange(4000) * 7 % 5).astype(np.uint16).tofile(data)
    tol = CONFIGS["adamw"][1]

    def train(dp, zero, steps, ckpt, resume=False):
        exe = os.path.join(work, "train-dp%d-zero%d" % (dp, zero))
        if not os.path.exists(exe):
            run([os.path.join(env.bin_dir, "merak-compile"), model, "--compile-to=binary",
                 "--dp", str(dp), "--zero", str(zero), "-o", exe] + CONFIGS["adamw"][0])
        metrics = os.path.join(work, "dp%d-zero%d-%s.jsonl" % (dp, zero, os.path.basename(ckpt)))
        if os.path.exists(metrics):
            os.remove(metrics)
        cmd = [exe, "--data", data, "--steps", str(steps), "--sampler", "sequential",
               "--metrics", metrics, "--checkpoint-dir", ckpt] + (["--resume"] if resume else [])
        if dp > 1:
            cmd = MPIRUN + ["-np", str(dp)] + cmd
        run(cmd, env=env.env)
        with open(metrics) as f:
            losses = [json.loads(line)["loss"] for line in f]
        return losses, read_checkpoint(ckpt, steps)

    serial, serial_params = train(1, 0, STEPS, os.path.join(work, "serial-ckpt"))
    msgs, ok = [], True
    for name, runs in (("dp3", [(3, STEPS, False)]), ("dp4", [(4, STEPS, False)]),
                       ("dp4-to-dp3", [(4, STEPS // 2, False), (3, STEPS, True)])):
        ckpt = os.path.join(work, name + "-ckpt")
        got = []
        for dp, steps, resume in runs:
            losses, params = train(dp, 1, steps, ckpt, resume)
            got += losses
        loss_err = max(abs(a - b) / abs(b) for a, b in zip(got, serial))
        param_err = max_param_err(params, serial_params)
        ok = ok and len(got) == STEPS and loss_err <= tol and param_err <= tol
        msgs.append("%s: losses %.2e, parameters and state %.2e" % (name, loss_err, param_err))
    return ok, "max rel err " + "; ".join(msgs) + " (tol %g)" % tol


def check_zero_memory(env):
    """Per-rank parameter storage (params, optimizer state, hparams) with and
    without --zero 1: the state shrinks to about 1/dp."""
    sizes = {}
    for dp in (1, 2, 4):
        for zero in ((0, 1) if dp > 1 else (0,)):
            env.program("adamw", dp, zero=zero)
            sizes[(dp, zero)] = env.params_bytes[("adamw", dp, 1, zero)]
    if None in sizes.values():
        return False, "no params_bytes in the compile output"
    serial = sizes[(1, 0)]
    ok = all(sizes[(dp, 0)] == serial and sizes[(dp, 1)] < serial for dp in (2, 4))
    ok = ok and sizes[(4, 1)] < sizes[(2, 1)]
    return ok, "params_bytes per rank: " + ", ".join(
        "dp%d%s %d" % (dp, " zero1" if z else "", b) for (dp, z), b in sorted(sizes.items()))


def check_launch_mismatch(env):
    exe = env.program("sgd", 2)
    p = subprocess.run(MPIRUN + ["-np", "3", exe, "--data", env.data, "--steps", "2"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env.env, timeout=120)
    out = p.stdout.decode()
    ok = p.returncode != 0 and "launched with 3 processes" in out and "dp=2" in out
    return ok, "exit %d: %s" % (p.returncode, out.strip().splitlines()[0] if out else "")


def check_dead_rank(env):
    exe = env.program("sgd", 2)
    start = time.time()
    p = subprocess.Popen(MPIRUN + ["-np", "2", exe, "--data", env.data, "--steps", "1000000",
                                   "--sampler", "sequential"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env.env)
    time.sleep(3)
    # The second rank: the newest process running the program.
    pids = subprocess.run(["pgrep", "-n", "-f", os.path.basename(exe)],
                          stdout=subprocess.PIPE).stdout.decode().split()
    if pids:
        os.kill(int(pids[0]), signal.SIGKILL)
    try:
        out, _ = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        return False, "the job did not end within 60 s of the kill"
    secs = time.time() - start - 3
    out = out.decode()
    ok = bool(pids) and p.returncode != 0 and "rank" in out and "exited on signal 9" in out
    return ok, "exit %d after %.1f s; %s" % (
        p.returncode, secs, next((l for l in out.splitlines() if "signal" in l), "").strip())


def check_stopped_rank(env):
    """dp 2 x tp 2: rank 2 is stopped (SIGSTOP) mid-run. With a 5 s
    communication timeout the job ends non-zero within 60 s, and the ranks
    that time out name rank 2 as stopped (the node's heartbeat), not
    themselves."""
    exe = env.program("sgd", 2, 2)
    p = subprocess.Popen(MPIRUN + ["-np", "4", "-x", "MERAK_COMM_TIMEOUT=5", exe, "--data",
                                   env.data, "--steps", "1000000", "--sampler", "sequential",
                                   "--log-every", "1000000"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env.env)
    time.sleep(3)
    stopped = None
    out = subprocess.run(["pgrep", "-P", str(p.pid)], stdout=subprocess.PIPE).stdout.decode()
    for pid in out.split():
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                if b"OMPI_COMM_WORLD_RANK=2\0" in f.read():
                    stopped = int(pid)
        except OSError:
            pass
    if stopped is None:
        p.kill()
        return False, "rank 2's process not found under mpirun"
    os.kill(stopped, signal.SIGSTOP)
    start = time.time()
    try:
        out, _ = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        os.kill(stopped, signal.SIGKILL)
        return False, "the job did not end within 60 s of the stop"
    secs = time.time() - start
    out = out.decode()
    # The first rank to time out names rank 2; the later ones may run after
    # mpirun began ending the job (it sends SIGCONT), but none blames another.
    want = "rank 2 (pid %d, this host) is stopped" % stopped
    lines = [l for l in out.splitlines() if "did not complete" in l]
    ok = (p.returncode != 0 and lines and want in lines[0]
          and not any(re.search(r"rank [013] \(pid", l) for l in lines))
    if not ok:
        return False, "exit %d after %.1f s:\n%s" % (p.returncode, secs, out[-3000:])
    return ok, "exit %d after %.1f s; %s" % (p.returncode, secs, lines[0].strip())


def checkpoint_dirs(ckpt):
    """The step directories in `ckpt`: complete ones and unfinished ones."""
    names = [n for n in os.listdir(ckpt) if n.startswith("step_")]
    return {"complete": sorted(n for n in names if not n.endswith(".partial")),
            "partial": sorted(n for n in names if n.endswith(".partial"))}


def check_kill_while_checkpointing(env):
    """dp 2 x tp 2 (4 ranks, sharded pieces), a checkpoint every step; one
    rank is SIGKILLed mid-run, several times at different delays. Every
    time the job ends non-zero within 60 s, `latest` names a complete
    checkpoint (all 4 shards, readable by the independent reader),
    --checkpoint-keep 3 left at most 3 checkpoints (4 when the kill cut the
    pruning short) and one unfinished one, and the serial program resumes
    from the last."""
    exe = env.program("adamw", 2, 2)
    ckpt = os.path.join(env.work, "kill-ckpt")
    latest = os.path.join(ckpt, "latest")
    kills, step = 0, 0
    for delay in (0.0, 0.05, 0.13, 0.31):
        before = os.stat(latest).st_mtime_ns if os.path.exists(latest) else None
        p = subprocess.Popen(MPIRUN + ["-np", "4", exe, "--data", env.data, "--steps", "1000000",
                                       "--sampler", "sequential", "--checkpoint-dir", ckpt,
                                       "--checkpoint-every", "1", "--checkpoint-keep", "3"]
                             + (["--resume"] if before is not None else []),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env.env)
        deadline = time.time() + 120
        while time.time() < deadline and p.poll() is None:
            if os.path.exists(latest) and os.stat(latest).st_mtime_ns != before:
                break
            time.sleep(0.01)
        time.sleep(delay)
        pids = subprocess.run(["pgrep", "-n", "-f", os.path.basename(exe)],
                              stdout=subprocess.PIPE).stdout.decode().split()
        if pids:
            os.kill(int(pids[0]), signal.SIGKILL)
        try:
            p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            return False, "the job did not end within 60 s of the kill"
        if not pids or p.returncode == 0:
            return False, "no rank was killed (exit %s)" % p.returncode
        kills += 1
        with open(latest) as f:
            name = f.read().strip()
        shards = [n for n in os.listdir(os.path.join(ckpt, name)) if n.endswith("-of-4.safetensors")]
        tensors = read_checkpoint(ckpt)
        if len(shards) != 4 or "transformer.wte.weight" not in tensors:
            return False, "checkpoint %s after a kill: %d shards" % (name, len(shards))
        step = int(name.split("_")[1])
        kept = checkpoint_dirs(ckpt)
        if len(kept["complete"]) > 4 or len(kept["partial"]) > 1:
            return False, "--checkpoint-keep 3 left %s" % kept
    # The serial program resumes from the last complete checkpoint.
    serial = env.program("adamw", 1, 1)
    metrics = os.path.join(env.work, "kill-resume.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    run([serial, "--data", env.data, "--steps", str(step + 2), "--sampler", "sequential",
         "--checkpoint-dir", ckpt, "--resume", "--metrics", metrics], env=env.env)
    with open(metrics) as f:
        resumed = [json.loads(line)["step"] for line in f]
    ok = resumed == [step, step + 1]
    return ok, "%d kills, last complete checkpoint step %d (4 shards) resumes serially: %s" % (
        kills, step, resumed)


CHECKS = {"equal-sgd-dp2": lambda e: check_equal(e, "sgd", 2),
          "equal-sgd-dp4": lambda e: check_equal(e, "sgd", 4),
          "kill-while-checkpointing": check_kill_while_checkpointing,
          "equal-adamw-dp2": lambda e: check_equal(e, "adamw", 2),
          "equal-adamw-dp4": lambda e: check_equal(e, "adamw", 4),
          "equal-sgd-tp2": lambda e: check_equal(e, "sgd", 1, 2),
          "equal-adamw-tp2": lambda e: check_equal(e, "adamw", 1, 2),
          "equal-sgd-dp2-tp2": lambda e: check_equal(e, "sgd", 2, 2),
          "equal-adamw-dp2-tp2": lambda e: check_equal(e, "adamw", 2, 2),
          "equal-sgd-tp4": lambda e: check_equal(e, "sgd", 1, 4),
          "vocab-sgd-tp2": lambda e: check_vocab(e, "sgd", 1, 2),
          "vocab-adamw-tp2": lambda e: check_vocab(e, "adamw", 1, 2),
          "vocab-sgd-dp2-tp2": lambda e: check_vocab(e, "sgd", 2, 2),
          "vocab-adamw-dp2-tp2": lambda e: check_vocab(e, "adamw", 2, 2),
          "vocab-adamw-tp4": lambda e: check_vocab(e, "adamw", 1, 4),
          "vocab-untied-adamw-dp2-tp2": lambda e: check_vocab_untied(e, "adamw", 2, 2),
          "equal-adamw-tp4": lambda e: check_equal(e, "adamw", 1, 4),
          "resume-tp2-to-tp1": lambda e: check_resume(e, 2, 1),
          "resume-tp1-to-tp2": lambda e: check_resume(e, 1, 2),
          "equal-sgd-dp2-zero1": lambda e: check_equal(e, "sgd", 2, zero=1),
          "equal-sgd-dp4-zero1": lambda e: check_equal(e, "sgd", 4, zero=1),
          "equal-adamw-dp2-zero1": lambda e: check_equal(e, "adamw", 2, zero=1),
          "equal-adamw-dp4-zero1": lambda e: check_equal(e, "adamw", 4, zero=1),
          "equal-adamw-clip-dp4-zero1": lambda e: check_equal(e, "adamw-clip", 4, zero=1),
          "resume-zero-dp2-to-dp1": lambda e: check_resume_zero(e, 2, 1, 1, 0),
          "resume-dp1-to-zero-dp2": lambda e: check_resume_zero(e, 1, 0, 2, 1),
          "zero-memory": check_zero_memory,
          "zero-padding": check_zero_padding,
          "launch-mismatch": check_launch_mismatch,
          "dead-rank": check_dead_rank,
          "stopped-rank": check_stopped_rank}


def main():
    return run_checks(Env, lambda env, name: CHECKS[name](env), CHECKS)


if __name__ == "__main__":
    sys.exit(main())
