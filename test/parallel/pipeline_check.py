"""Pipeline-parallel (and gradient-accumulating) programs against the serial one.

    /usr/bin/python3 test/parallel/pipeline_check.py --bin BUILD/bin --workdir DIR [CHECK...]

A GPT-2-style decoder (4 heads; 4 layers, or 3 for the uneven checks;
exported with a dynamic batch axis) is compiled serially and with --pp P
--microbatches M [--schedule S] [--dp D] [--tp T], and each program trains
20 steps on the bundled corpus with --sampler sequential. A check named
`<opt>-pp<P>-m<M>-<schedule>[-dp<D>][-tp<T>][-l<layers>][-zero]` passes when the
per-step losses are within 1e-5 (SGD with momentum) / 1e-4 (AdamW) relative
of the serial program's, and the final checkpoint's parameters (gathered on
world rank 0 from every stage and tensor-parallel shard) within the same
tolerance (param_rel_err of program_check.py).
`resume-pp2`: 10 steps, then --resume to 20, give bitwise the losses of
one 20-step run (the checkpoint gathers every stage's parameters and
optimizer state on world rank 0; every rank resumes from it).
`resume-<A>-to-<B>` with A, B mesh spellings `d<dp>t<tp>p<pp>` (AdamW,
micro-batches 2 when pipelined): 10 steps at A with a checkpoint, then
--resume at B to 20: losses and final parameters match the uninterrupted
serial run (1e-4); checkpoints keep the serial format at any mesh.
`vocab-<check>`: the same with a vocabulary of 80, which divides by tp 2,
so that --tp splits it by default (vocabulary parallelism: the tied wte is
a [40, 64] shard on the first and last stage, whose gradient shards the
runtime sums over those stages per tp rank); the compiled stages must also
hold no tensor of the full vocabulary (no [.., 80] logits). The split
logits (40 floats a token) are narrower than the residual stream (64).
`vocab-off-<check>`: that model with --vocab-parallel=false (replicated
embedding, LM head and loss; the stages do hold [.., 80] logits).
`-zero` (and a mesh spelling ending in `z`) compiles with --zero 1: the
optimizer state is split over dp (of the tensor-parallel shards too) and
the checkpoint gathers it back to the serial format. `zero1` runs the ZeRO
matrix in one process (one serial program per optimizer, OMP_NUM_THREADS=1).
`planner-<opt>-devices<N>`: compiled with --devices N instead of a mesh (the
planner picks dp, tp, pp, micro-batches and schedule; the report's
planner.chosen says which), trained under mpirun -np N: losses and final
parameters match the serial program's.

Schedules in check names: gpipe, 1f1b, zbh1 / zbh2 (--schedule zb-h1 / zb-h2:
the backward split into input and weight gradients), scp (--schedule
shifted-critical-path: the recomputation split off and run before the
gradient arrives), int2 (--schedule interleaved --virtual-stages 2: 2 x pp
model stages, two per rank).

`<check>-bf16` compiles the pipelined program with --precision bf16 (bf16
GEMMs, float32 master weights), where each stage reads its weights from the
bf16 copy its prepare fragment casts once a step (merak-cache-param-casts),
and compares it with the same program compiled with --weight-cast-cache off
(the weights cast in every fragment): losses and final parameters must be
bitwise equal (tolerance 0), and the program must hold cached weights.

`<check>-rc<mode>` compiles with --recompute <mode> (none, full,
selective, stage-aware; the default is none): the same equivalence, and the
choice per stage recorded by merak-recompute (--compile-to=recompute) must
be the mode asked for (scp: none on the last stage); stage-aware gets a --memory-per-device between the
first and the last stage's estimate without recomputation, so under 1F1B
with pp > 1 stage 0 must recompute and the last stage must not.
`<check>-sp` (a check with tp) compiles with --sequence-parallel on
(merak-sequence-parallel: the ops between the tensor-parallel blocks split
over the token rows): the same equivalence with the serial program, and
the stages must hold tp reduce-scatters.
Ends with "N passed, M failed".
"""
import json
import os
import re
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import export_models as em  # noqa: E402
from program_check import compare_with_serial, read_safetensors  # noqa: E402
from merak_checkpoint import read_checkpoint  # noqa: E402
from check_runner import run_checks  # noqa: E402

STEPS = 20
BATCH, SEQ, VOCAB = 4, 16, 97
V_SPLIT = 80  # the vocab-* checks' vocabulary (divides by tp 2)
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]
# Check-name spelling of a schedule -> its --schedule value.
SCHEDULES = {"gpipe": ["gpipe"], "1f1b": ["1f1b"], "zbh1": ["zb-h1"], "zbh2": ["zb-h2"],
             "scp": ["shifted-critical-path"],
             "int2": ["interleaved", "--virtual-stages", "2"]}
SCHED = "(" + "|".join(SCHEDULES) + ")"
OPTS = {
    "sgd": (["--optimizer", "sgd", "--opt", "lr=0.05", "--opt", "momentum=0.9"], 1e-5),
    "adamw": (["--optimizer", "adamw", "--opt", "lr=3e-3"], 1e-4),
}
CHECKS = ["sgd-pp2-m4-gpipe", "sgd-pp2-m4-1f1b", "adamw-pp2-m4-gpipe", "adamw-pp2-m4-1f1b",
          "sgd-pp4-m4-gpipe", "sgd-pp4-m4-1f1b", "adamw-pp4-m4-gpipe", "adamw-pp4-m4-1f1b",
          "sgd-pp1-m4-1f1b", "adamw-pp1-m4-1f1b", "adamw-pp2-m2-1f1b-dp2",
          "sgd-pp2-m4-1f1b-l3", "adamw-pp2-m4-gpipe-l3", "resume-pp2",
          # 3D: tensor parallelism inside pipeline stages.
          "sgd-pp2-m2-gpipe-tp2", "sgd-pp2-m2-1f1b-tp2", "adamw-pp2-m2-gpipe-tp2",
          "adamw-pp2-m2-1f1b-tp2", "sgd-pp2-m2-gpipe-dp2-tp2", "sgd-pp2-m2-1f1b-dp2-tp2",
          "adamw-pp2-m2-gpipe-dp2-tp2", "adamw-pp2-m2-1f1b-dp2-tp2", "adamw-pp1-m2-1f1b-tp2",
          "sgd-pp4-m4-1f1b-tp2", "resume-d2t2p2-to-d1t1p1", "resume-d1t1p1-to-d2t2p2", "resume-d2t2p2-to-d1t2p2",
          "resume-d1t2p2-to-d2t2p2", "zero1",
          # The rest of the matrix: (2, 1, 2) both schedules and
          # optimizers, and ZeRO-1 at (2, 1, 2) and (2, 2, 2) with the
          # schedule/optimizer pairs "zero1" does not cover.
          "sgd-pp2-m2-gpipe-dp2", "sgd-pp2-m2-1f1b-dp2", "adamw-pp2-m2-gpipe-dp2",
          "sgd-pp2-m2-1f1b-dp2-zero", "adamw-pp2-m2-gpipe-dp2-zero",
          "sgd-pp2-m2-gpipe-dp2-tp2-zero", "adamw-pp2-m2-1f1b-dp2-tp2-zero",
          # Vocabulary parallelism (the default at --tp 2 when V divides) in
          # pipelines, and its off switch.
          "vocab-sgd-pp2-m2-gpipe-tp2", "vocab-sgd-pp2-m2-1f1b-tp2",
          "vocab-adamw-pp2-m2-gpipe-tp2", "vocab-adamw-pp2-m2-1f1b-tp2",
          "vocab-adamw-pp2-m2-1f1b-dp2-tp2", "vocab-adamw-pp2-m2-1f1b-dp2-tp2-zero",
          "planner-adamw-devices2",
          "vocab-off-adamw-pp2-m2-1f1b-tp2",
          # Recomputation modes (merak-recompute) at (1,1,2), (2,2,2), (1,1,4)
          # and serial (--recompute alone: one stage).
          "adamw-pp2-m4-1f1b-rcnone", "sgd-pp4-m4-gpipe-rcnone",
          "adamw-pp2-m2-gpipe-dp2-tp2-rcnone", "sgd-pp2-m4-gpipe-rcselective",
          "adamw-pp4-m4-1f1b-rcselective", "adamw-pp2-m2-1f1b-dp2-tp2-rcselective",
          "adamw-pp2-m4-1f1b-rcfull", "adamw-pp1-m1-1f1b-rcselective",
          "adamw-pp4-m4-1f1b-rcstage-aware", "sgd-pp2-m4-gpipe-rcstage-aware",
          "adamw-pp2-m2-1f1b-dp2-tp2-rcstage-aware",
          # Zero bubble (the backward split into B and W).
          "adamw-pp2-m4-zbh1", "sgd-pp4-m4-zbh1", "sgd-pp4-m4-zbh2", "adamw-pp2-m4-zbh2-rcnone",
          "sgd-pp2-m4-zbh1-rcselective", "adamw-pp2-m2-zbh1-dp2-tp2", "adamw-pp4-m4-scp-rcstage-aware",
          "adamw-pp2-m2-zbh2-dp2-tp2-rcfull",
          "adamw-pp2-m2-zbh1-dp2-zero", "adamw-pp2-m2-zbh2-dp2-zero", "sgd-pp2-m2-int2-dp2-zero",
          "adamw-pp2-m2-scp-dp2-zero",
          # Interleaved 1F1B, two chunks per rank.
          "adamw-pp2-m4-int2", "sgd-pp4-m4-int2", "sgd-pp2-m2-int2-dp2-tp2",
          "adamw-pp2-m4-int2-rcnone", "sgd-pp2-m4-int2-rcselective", "adamw-pp2-m2-int2-dp2",
          # bf16 GEMMs (--precision bf16): each stage casts its weights once
          # a step (merak-cache-param-casts' prepare fragments).
          "adamw-pp2-m4-1f1b-bf16", "sgd-pp2-m4-int2-bf16", "adamw-pp2-m2-zbh1-dp2-tp2-bf16",
          # Sequence parallelism (--sequence-parallel on) with tp, pp, dp, ZeRO.
          "adamw-pp1-m2-1f1b-tp2-sp", "sgd-pp2-m2-1f1b-dp2-tp2-sp",
          "adamw-pp2-m2-zbh1-dp2-tp2-zero-sp"]
# ZeRO-1 with tp and pp: (dp, tp, pp) = (2, 2, 1), (2, 1, 2), (2, 2, 2), SGD
# and AdamW, GPipe and 1F1B, and resumes between (2, 2, 2) + ZeRO and serial.
ZERO_CHECKS = ["sgd-pp1-m1-1f1b-dp2-tp2-zero", "adamw-pp1-m1-1f1b-dp2-tp2-zero",
               "sgd-pp2-m2-gpipe-dp2-zero", "adamw-pp2-m2-1f1b-dp2-zero",
               "sgd-pp2-m2-1f1b-dp2-tp2-zero", "adamw-pp2-m2-gpipe-dp2-tp2-zero",
               "resume-d2t2p2z-to-d1t1p1", "resume-d1t1p1-to-d2t2p2z"]


def run(cmd, env=None, timeout=300):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                       timeout=timeout)
    if p.returncode:
        raise RuntimeError("%s failed (%d):\n%s" % (os.path.basename(cmd[0]), p.returncode,
                                                  p.stdout.decode()[-3000:]))
    return p.stdout.decode()


class Env:
    def __init__(self, bin_dir, work, vocab=VOCAB):
        self.bin_dir, self.work, self.vocab = bin_dir, work, vocab
        os.makedirs(work, exist_ok=True)
        corpus = os.path.join(HERE, "..", "..", "examples", "gpt", "corpus.txt")
        text = np.frombuffer(open(corpus, "rb").read(), dtype=np.uint8)
        self.data = os.path.join(work, "tokens.bin")
        (text.astype(np.int64) % vocab).astype(np.uint16).tofile(self.data)
        self.env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        self.models, self.results, self.programs = {}, {}, {}
        self.sub = {}

    def model(self, layers):
        if layers not in self.models:
            torch.manual_seed(0)
            model = em.GPT2(vocab_size=self.vocab, n_embd=64, n_head=4, n_layer=layers,
                            block_size=SEQ)
            path = os.path.join(self.work, "model-l%d.onnx" % layers)
            torch.onnx.export(model, (torch.zeros(BATCH, SEQ, dtype=torch.int64),), path,
                              opset_version=17, input_names=["input_ids"],
                              output_names=["logits"],
                              training=torch.onnx.TrainingMode.TRAINING,
                              do_constant_folding=False,
                              dynamic_axes={"input_ids": {0: "batch"}})
            self.models[layers] = path
        return self.models[layers]

    def vocab_env(self):
        """The same checks' environment with the vocabulary V_SPLIT."""
        if "vocab" not in self.sub:
            self.sub["vocab"] = Env(self.bin_dir, os.path.join(self.work, "vocab%d" % V_SPLIT),
                                    V_SPLIT)
        return self.sub["vocab"]

    def compile_cmd(self, opt, layers, pp=1, m=1, schedule="1f1b", dp=1, tp=1, zero=False,
                    vocab_off=False, rc=None, bf16=False):
        cmd = [os.path.join(self.bin_dir, "merak-compile"), self.model(layers),
               "--input-shape", "input_ids=%dx%d" % (BATCH, SEQ),
               "--frozen", "*.attn.bias"] + OPTS[opt][0]
        if bf16:
            cmd += ["--precision", "bf16"]
        if pp > 1 or m > 1:
            cmd += ["--pp", str(pp), "--microbatches", str(m), "--schedule"] + SCHEDULES[schedule]
        if dp > 1:
            cmd += ["--dp", str(dp)]
        if tp > 1:
            cmd += ["--tp", str(tp)]
        if zero:
            cmd += ["--zero", "1"]
        if vocab_off:
            cmd += ["--vocab-parallel=false"]
        if rc:  # recomputation (or other) flags
            cmd += rc
        return cmd

    def program(self, opt, layers, pp=1, m=1, schedule="1f1b", dp=1, tp=1, zero=False,
                vocab_off=False, rc=None, bf16=False):
        """The executable of one configuration (compiled once per process)."""
        name = "%s-l%d-pp%d-m%d-%s-dp%d-tp%d%s%s%s%s" % (opt, layers, pp, m, schedule, dp, tp,
                                                         "-zero" if zero else "",
                                                         "-novocab" if vocab_off else "",
                                                         "-rc" + "-".join(rc) if rc else "",
                                                         "-bf16" if bf16 else "")
        exe = os.path.join(self.work, "train-" + name)
        if name not in self.programs:
            run(self.compile_cmd(opt, layers, pp, m, schedule, dp, tp, zero, vocab_off, rc,
                                 bf16) + ["--compile-to=binary", "-o", exe])
            self.programs[name] = exe
        return name, exe

    def train(self, opt, layers, pp=1, m=1, schedule="1f1b", dp=1, tp=1, steps=STEPS,
              ckpt=None, resume=False, zero=False, vocab_off=False, rc=None, bf16=False):
        """Per-step losses and the final checkpoint of one configuration
        (cached for full runs from scratch)."""
        name, exe = self.program(opt, layers, pp, m, schedule, dp, tp, zero, vocab_off, rc,
                                 bf16)
        cached = ckpt is None and steps == STEPS and not resume
        if cached and name in self.results:
            return self.results[name]
        metrics = os.path.join(self.work, name + ".jsonl")
        if os.path.exists(metrics):
            os.remove(metrics)
        ckpt = ckpt or os.path.join(self.work, name + "-ckpt")
        cmd = [exe, "--data", self.data, "--steps", str(steps), "--sampler", "sequential",
               "--metrics", metrics, "--checkpoint-dir", ckpt] + (["--resume"] if resume else [])
        if pp * dp * tp > 1:
            cmd = MPIRUN + ["-np", str(pp * dp * tp)] + cmd
        run(cmd, env=self.env)
        with open(metrics) as f:
            losses = [json.loads(line)["loss"] for line in f]
        result = (losses, read_checkpoint(ckpt, steps))
        if cached:
            self.results[name] = result
        return result


def check_resume(env):
    full, _ = env.train("adamw", 4, 2, 4, "1f1b")
    _, exe = env.program("adamw", 4, 2, 4, "1f1b")
    metrics = os.path.join(env.work, "resume.jsonl")
    ckpt = os.path.join(env.work, "resume-ckpt")
    for steps, extra in ((10, []), (STEPS, ["--resume"])):
        run(MPIRUN + ["-np", "2", exe, "--data", env.data, "--steps", str(steps), "--sampler",
                      "sequential", "--metrics", metrics, "--checkpoint-dir", ckpt] + extra,
            env=env.env)
    with open(metrics) as f:
        got = [json.loads(line)["loss"] for line in f]
    return got == full, "%d steps, bitwise equal: %s" % (len(got), got == full)


def compare(got, params, serial, serial_params, tol):
    """(ok, message): per-step losses and final parameters against serial."""
    return compare_with_serial(got, params, serial, serial_params, tol, STEPS)


def check_resharded_resume(env, src, dst):
    """AdamW: 10 steps on mesh `src` with a checkpoint, --resume on `dst`
    to 20; against the uninterrupted serial run."""
    def mesh(spelling):
        r = re.fullmatch(r"d(\d+)t(\d+)p(\d+)(z?)", spelling)
        dp, tp, pp = (int(x) for x in r.groups()[:3])
        m = 2 if pp > 1 else 1
        return dict(pp=pp, m=m, schedule="1f1b", dp=dp, tp=tp, zero=bool(r.group(4)))
    serial, serial_params = env.train("adamw", 4)
    ckpt = os.path.join(env.work, "resume-%s-to-%s-ckpt" % (src, dst))
    first, _ = env.train("adamw", 4, steps=STEPS // 2, ckpt=ckpt, **mesh(src))
    second, params = env.train("adamw", 4, ckpt=ckpt, resume=True, **mesh(dst))
    ok, msg = compare(first + second, params, serial, serial_params, OPTS["adamw"][1])
    # The user's tool: `merak_checkpoint.py merge` gives one plain
    # safetensors file with the same tensors (read by program_check's own
    # 10-line reader).
    merged = os.path.join(env.work, "merged-%s.safetensors" % dst)
    run([sys.executable, os.path.join(HERE, "..", "..", "scripts", "merak_checkpoint.py"),
         "merge", ckpt, "-o", merged])
    plain = read_safetensors(merged)
    same = sorted(plain) == sorted(params) and all(
        plain[k].shape == params[k].shape and (plain[k] == params[k]).all() for k in params)
    return ok and same, msg + "; merged file %s" % ("identical" if same else "DIFFERS")


def check_vocab(env, cfg, off):
    """A vocab-* check: equivalence on the V_SPLIT model, and the stages'
    IR split (or, with `off`, not split) on the vocabulary."""
    venv = env.vocab_env()
    serial, serial_params = venv.train(cfg["opt"], 4)
    got, params = venv.train(cfg["opt"], 4, cfg["pp"], cfg["m"], cfg["schedule"], cfg["dp"],
                             cfg["tp"], zero=cfg["zero"], vocab_off=off)
    ok, msg = compare(got, params, serial, serial_params, OPTS[cfg["opt"]][1])
    out = run(venv.compile_cmd(cfg["opt"], 4, cfg["pp"], cfg["m"], cfg["schedule"], cfg["dp"],
                               cfg["tp"], cfg["zero"], off) + ["--compile-to=pipeline"])
    # The plan's "// stage s: ... params: ..." lines; the params' declarations
    # name the full initial value, every other type is what a rank holds.
    holders = [i for i, l in enumerate(re.findall(r"^// stage \d+: .*$", out, re.M))
               if " transformer.wte.weight" in l]
    text = "\n".join(l for l in out.splitlines() if "merak.param" not in l)
    full = "x%dxf32>" % V_SPLIT
    local = "tensor<%dx%dx%dxf32>" % (BATCH // (cfg["dp"] * cfg["m"]), SEQ, V_SPLIT // cfg["tp"])
    split = (full not in text and local in text and
             re.search(r'merak\.cross_entropy .*\{.*group = "tp"', text) is not None)
    ok = ok and holders == [0, cfg["pp"] - 1] and split != off
    return ok, msg + "; wte held by stages %s, vocabulary %s" % (
        holders, "split (logits %s)" % local if split else "replicated")


def check_planner(env, opt, devices):
    """--devices N: the planner's plan trains like the serial program."""
    exe = os.path.join(env.work, "train-planner-%s-%d" % (opt, devices))
    report = exe + ".json"
    cmd = env.compile_cmd(opt, 4) + ["--devices", str(devices), "--compile-to=binary", "-o", exe,
                                      "--report=json", "--report-file", report]
    log = run(cmd)
    with open(report) as f:
        chosen = json.load(f)["planner"]["chosen"]
    world = chosen["dp"] * chosen["tp"] * chosen["pp"]
    if world != devices or chosen["schedule"] not in (
            "gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "shifted-critical-path"):
        return False, "bad plan %s" % chosen
    metrics = os.path.join(env.work, "planner-%s-%d.jsonl" % (opt, devices))
    if os.path.exists(metrics):
        os.remove(metrics)
    ckpt = os.path.join(env.work, "planner-%s-%d-ckpt" % (opt, devices))
    run(MPIRUN + ["-np", str(devices), exe, "--data", env.data, "--steps", str(STEPS),
                  "--sampler", "sequential", "--metrics", metrics, "--checkpoint-dir", ckpt],
        env=env.env)
    with open(metrics) as f:
        got = [json.loads(line)["loss"] for line in f]
    serial, serial_params = env.train(opt, 4)
    ok, msg = compare(got, read_checkpoint(ckpt, STEPS), serial, serial_params, OPTS[opt][1])
    plan = [l for l in log.splitlines() if "planner: chosen" in l]
    return ok, "%s; %s" % (plan[0].split("planner: ")[-1] if plan else chosen, msg)


def recompute_plan(env, cmd):
    """[(mode, stash bytes, estimate)] per stage from --compile-to=recompute."""
    out = run(cmd + ["--compile-to=recompute"])
    line = re.search(r"^// recompute \(merak-recompute\):(.*)$", out, re.M)
    if not line:
        raise RuntimeError("no recompute line in:\n" + out[:2000])
    return [(mode, int(stash), int(est)) for mode, stash, est in re.findall(
        r"stage \d+ (\S+) \(stash (\d+) bytes/micro-batch, estimate (\d+) bytes\)",
        line.group(1))]


def check_recompute(env, name, mode):
    m = re.fullmatch(r"(sgd|adamw)-pp(\d+)-m(\d+)-" + SCHED + r"(?:-dp(\d+))?(?:-tp(\d+))?", name)
    if not m:
        raise ValueError("unknown check " + name)
    opt, pp, mb, schedule = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
    dp, tp = int(m.group(5) or 1), int(m.group(6) or 1)
    base = env.compile_cmd(opt, 4, pp, mb, schedule, dp, tp)
    rc = ["--recompute", mode]
    expect = None
    if mode == "stage-aware":
        none = recompute_plan(env, base + ["--recompute", "none"])
        budget = (none[0][2] + none[-1][2]) // 2
        rc += ["--memory-per-device", str(budget)]
    plan = recompute_plan(env, base + rc)
    modes = [p[0] for p in plan]
    if mode == "stage-aware":
        ok_plan = all(p[2] <= budget for p in plan)
        if schedule == "1f1b" and pp > 1:
            ok_plan = ok_plan and modes[0] != "none" and modes[-1] == "none"
        if schedule == "scp":
            # The budget makes stage 0 keep fewer final micro-batches than
            # the paper's min(m, pp - 1) (their activations would not fit).
            out = run(base + rc + ["--compile-to=recompute"])
            kept = re.search(r"fwd-keep micro-batches per stage:((?: \d+)+)", out)
            kept = [int(k) for k in kept.group(1).split()] if kept else []
            ok_plan = (ok_plan and modes[-1] == "none" and len(kept) == pp and
                       kept[0] < min(mb, pp - 1))
            expect = "kept %s" % kept
    elif schedule == "scp":
        # The shifted critical path's last stage never recomputes.
        ok_plan = modes == [mode] * (pp - 1) + ["none"]
    else:
        # Interleaved: merak-recompute chooses per model stage (chunk).
        ok_plan = modes == [mode] * pp * (2 if schedule == "int2" else 1)
    serial, serial_params = env.train(opt, 4)
    got, params = env.train(opt, 4, pp, mb, schedule, dp, tp, rc=rc)
    ok, msg = compare(got, params, serial, serial_params, OPTS[opt][1])
    return ok and ok_plan, msg + "; recompute per stage %s (stash bytes %s)%s%s" % (
        modes, [p[1] for p in plan], "; " + expect if expect else "",
        "" if ok_plan else " UNEXPECTED")


def check_sequence_parallel(env, name):
    """<check>-sp: --sequence-parallel on, against the serial program; the
    stages must hold tp reduce-scatters of the token rows."""
    m = re.fullmatch(r"(sgd|adamw)-pp(\d+)-m(\d+)-" + SCHED + r"(?:-dp(\d+))?-tp(\d+)(-zero)?",
                     name)
    if not m:
        raise ValueError("unknown check " + name + "-sp")
    opt, pp, mb, schedule = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
    dp, tp, zero = int(m.group(5) or 1), int(m.group(6)), bool(m.group(7))
    sp = ["--sequence-parallel", "on"]
    out = run(env.compile_cmd(opt, 4, pp, mb, schedule, dp, tp, zero, rc=sp) +
              ["--compile-to=pipeline"])
    scatters = len(re.findall(r'merak\.reduce_scatter .*group = "tp"', out))
    serial, serial_params = env.train(opt, 4)
    got, params = env.train(opt, 4, pp, mb, schedule, dp, tp, zero=zero, rc=sp)
    ok, msg = compare(got, params, serial, serial_params, OPTS[opt][1])
    return ok and scatters > 0, msg + "; %d tp reduce-scatters in the stages" % scatters


def check(env, name):
    if name.endswith("-sp"):
        return check_sequence_parallel(env, name[:-3])
    r = re.fullmatch(r"planner-(sgd|adamw)-devices(\d+)", name)
    if r:
        return check_planner(env, r.group(1), int(r.group(2)))
    rc = re.fullmatch(r"(.+)-rc(none|full|selective|stage-aware)", name)
    if rc:
        return check_recompute(env, rc.group(1), rc.group(2))
    r = re.fullmatch(r"vocab(-off)?-(.+)", name)
    if r:
        m = re.fullmatch(r"(sgd|adamw)-pp(\d+)-m(\d+)-" + SCHED + r"(?:-dp(\d+))?-tp(\d+)(-zero)?",
                         r.group(2))
        if not m:
            raise ValueError("unknown check " + name)
        cfg = dict(opt=m.group(1), pp=int(m.group(2)), m=int(m.group(3)), schedule=m.group(4),
                   dp=int(m.group(5) or 1), tp=int(m.group(6)), zero=bool(m.group(7)))
        return check_vocab(env, cfg, bool(r.group(1)))
    if name == "resume-pp2":
        return check_resume(env)
    if name == "zero1":
        results = [(c,) + tuple(check(env, c)) for c in ZERO_CHECKS]
        for c, ok, msg in results:
            print("  %s %s: %s" % ("ok" if ok else "FAILED", c, msg))
        return (all(ok for _, ok, _ in results),
                "%d of %d ZeRO checks passed" % (sum(ok for _, ok, _ in results), len(results)))
    r = re.fullmatch(r"resume-(d\d+t\d+p\d+z?)-to-(d\d+t\d+p\d+z?)", name)
    if r:
        return check_resharded_resume(env, r.group(1), r.group(2))
    m = re.fullmatch(r"(sgd|adamw)-pp(\d+)-m(\d+)-" + SCHED + r"(?:-dp(\d+))?(?:-tp(\d+))?"
                     r"(?:-l(\d+))?(-zero)?(-bf16)?", name)
    if not m:
        raise ValueError("unknown check " + name)
    opt, pp, mb, schedule = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
    dp, tp, layers = int(m.group(5) or 1), int(m.group(6) or 1), int(m.group(7) or 4)
    zero = bool(m.group(8))
    if m.group(9):
        # bf16: the weights' bf16 copy cast once a step must give bitwise
        # the values of casting them in every fragment.
        ref, ref_params = env.train(opt, layers, pp, mb, schedule, dp, tp, zero=zero,
                                    rc=["--weight-cast-cache", "off"], bf16=True)
        got, params = env.train(opt, layers, pp, mb, schedule, dp, tp, zero=zero, bf16=True)
        exe = env.program(opt, layers, pp, mb, schedule, dp, tp, zero, bf16=True)[1]
        if b"pipeline.cast.bf16." not in open(exe, "rb").read():
            return False, "the program has no cached bf16 weights"
        return compare(got, params, ref, ref_params, 0.0)
    serial, serial_params = env.train(opt, layers)
    got, params = env.train(opt, layers, pp, mb, schedule, dp, tp, zero=zero)
    return compare(got, params, serial, serial_params, OPTS[opt][1])


def main():
    return run_checks(Env, check, CHECKS)


if __name__ == "__main__":
    sys.exit(main())
