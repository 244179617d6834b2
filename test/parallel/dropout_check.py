"""Dropout in training: a fresh mask every step, the same in every mesh.

    /usr/bin/python3 test/parallel/dropout_check.py --bin BUILD/bin --workdir DIR [CHECK...]

The test suite's GPT-2 (2 layers, width 64, 4 heads) with every dropout at
p = 0.1 (embeddings, attention probabilities, both residual branches) is
exported in training mode with a static batch of 8. merak.dropout keeps
element i of the whole tensor at step s when u(k(seed, s), i) >= p
(docs/dialect.md); the reference re-implements that rule here in numpy (not
merak's code) and trains the PyTorch module in float64 with those masks.
Checks:
  torch        the serial ./train, 20 AdamW steps on the bundled corpus
               (--sampler sequential): per-step losses equal PyTorch's
               (rel. err <= 1e-4), which they cannot if a mask repeats;
               the attention probabilities' dropout is inside the fused
               merak.attention, which draws its mask again in the backward;
  unfused      the same with --fused-attention=off (a merak.dropout op on
               the probabilities);
  evaluator    merak-run's @train_step over 3 steps of one batch, the same
               (and the step has one fused attention with dropout a layer);
  <mesh>       dp2-m2 (the batch in 4 parts), tp2 (the attention
               probabilities split by heads), pp2-m2-recompute (masks drawn
               again by the recomputation) and dp2-tp2-pp2-m4, trained with
               SGD-momentum: losses and the final checkpoint within 1e-5 of
               the serial program's (AdamW would turn rounding noise into
               lr-sized steps; pipeline_check.py allows it 1e-4);
               tp2-sp and dp2-tp2-pp2-m4-sp add --sequence-parallel on
               (the residual branches' dropouts on each rank's token rows,
               which must draw the serial masks: the stages must hold
               dropouts split by rows, tp_split [0, 1, 2]).
Ends with "N passed, M failed".
"""
import json
import os
import re
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import export_models as em  # noqa: E402
from check_runner import run_checks  # noqa: E402
from merak_checkpoint import read_checkpoint  # noqa: E402
from program_check import compare_with_serial, corpus_tokens, tool_output as run  # noqa: E402

STEPS, BATCH, SEQ, VOCAB, P = 20, 8, 16, 97, 0.1
TORCH_TOL, SERIAL_TOL, LR = 1e-4, 1e-5, 3e-3
OPTIMIZERS = {"adamw": ["--optimizer", "adamw", "--opt", "lr=%g" % LR],
              "sgd": ["--optimizer", "sgd", "--opt", "lr=0.05", "--opt", "momentum=0.9"]}
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]
MESHES = {"dp2-m2": dict(dp=2, m=2), "tp2": dict(tp=2),
          "pp2-m2-recompute": dict(pp=2, m=2, extra=["--recompute", "full"]),
          "dp2-tp2-pp2-m4": dict(dp=2, tp=2, pp=2, m=4),
          "tp2-sp": dict(tp=2, extra=["--sequence-parallel", "on"]),
          "dp2-tp2-pp2-m4-sp": dict(dp=2, tp=2, pp=2, m=4, extra=["--sequence-parallel", "on"])}
CHECKS = ["torch", "unfused", "evaluator"] + list(MESHES)

U64 = np.uint64


def mix(z):
    """splitmix64's finaliser on uint64 arrays (wrapping)."""
    z = (z ^ (z >> U64(30))) * U64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> U64(27))) * U64(0x94D049BB133111EB)
    return z ^ (z >> U64(31))


def uniform(seed, step, n):
    """merak.dropout's uniform numbers in [0, 1) of a whole tensor of n
    elements at a step."""
    with np.errstate(over="ignore"):
        key = mix(np.array([seed], U64) ^ mix(np.array([step], U64) + U64(0xD1B54A32D192ED03)))
        z = mix(key * U64(0x9E3779B97F4A7C15) + np.arange(n, dtype=U64) + U64(0x632BE59BD9B4E019))
    return (z >> U64(11)).astype(np.float64) * 2.0 ** -53


def keep_mask(seed, step, n, ratio):
    """merak.dropout's keep mask of a whole tensor of n elements."""
    return uniform(seed, step, n) >= ratio


class SpecDropout(nn.Module):
    """nn.Dropout with merak's masks: its seed and ratio, the model's step."""

    def __init__(self, owner, seed, ratio):
        super().__init__()
        self.owner, self.seed, self.ratio = [owner], seed, ratio

    def forward(self, x):
        keep = keep_mask(self.seed, self.owner[0].step, x.numel(), self.ratio)
        keep = torch.from_numpy(keep).reshape(x.shape).to(x.dtype)
        return x * keep / (1.0 - self.ratio)


def build_model():
    torch.manual_seed(0)
    model = em.GPT2(vocab_size=VOCAB, n_embd=64, n_head=4, n_layer=2, block_size=SEQ)
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = P
    return model


def dropout_modules(model):
    """The nn.Dropout modules in the order the forward runs them."""
    t = model.transformer
    order = [(t, "drop")]
    for block in t.h:
        order += [(block.attn, "attn_dropout"), (block.attn, "resid_dropout"),
                  (block.mlp, "dropout")]
    return order


class Env:
    def __init__(self, bin_dir, work):
        self.bin_dir, self.work = bin_dir, work
        self.tokens, self.data = corpus_tokens(work, VOCAB)
        self.env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        self.onnx = os.path.join(work, "gpt2-dropout.onnx")
        self.model = build_model()
        self.state = {k: v.clone() for k, v in self.model.state_dict().items()}
        torch.onnx.export(self.model, (torch.zeros(BATCH, SEQ, dtype=torch.int64),), self.onnx,
                          opset_version=17, input_names=["input_ids"], output_names=["logits"],
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
        self.runs = {}

    def seeds(self):
        """(seed, ratio) of every merak.dropout of the import, in order."""
        ir = run([os.path.join(self.bin_dir, "merak-compile"), self.onnx, "--compile-to=import"])
        found = [(int(s), float(r)) for r, s in
                 re.findall(r"merak\.dropout %\S+ ratio = (\S+) seed = (\d+)", ir)]
        assert len(found) == len(dropout_modules(self.model)), found
        return found

    def reference(self, batches):
        """Per-step float64 PyTorch losses with merak's masks."""
        self.model.load_state_dict(self.state)
        model = self.model.double()
        model.step = 0
        for (owner, name), (seed, ratio) in zip(dropout_modules(model), self.seeds()):
            setattr(owner, name, SpecDropout(model, seed, ratio))
        params = list(model.parameters())
        opt = torch.optim.AdamW(params, lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
        losses = []
        for step, (ids, labels) in enumerate(batches):
            model.step = step
            opt.zero_grad()
            logits = model(ids)
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1))
            loss.backward()
            losses.append(loss.item())
            opt.step()
        return losses

    def sequential_batches(self, steps):
        n = len(self.tokens)
        for s in range(steps):
            starts = [((s * BATCH + r) * SEQ) % (n - SEQ - 1) for r in range(BATCH)]
            rows = np.stack([self.tokens[a:a + SEQ + 1] for a in starts]).astype(np.int64)
            yield torch.from_numpy(rows[:, :-1]), torch.from_numpy(rows[:, 1:])

    def compile_flags(self, optimizer="adamw"):
        return OPTIMIZERS[optimizer] + ["--frozen", "*.attn.bias"]

    def train(self, dp=1, tp=1, pp=1, m=1, extra=(), optimizer="adamw"):
        """(losses, final checkpoint) of the program for this mesh."""
        name = "%s-dp%d-tp%d-pp%d-m%d%s" % (optimizer, dp, tp, pp, m, "".join(extra))
        if name in self.runs:
            return self.runs[name]
        exe = os.path.join(self.work, "train-" + re.sub(r"\W", "", name))
        cmd = [os.path.join(self.bin_dir, "merak-compile"), self.onnx, "-o", exe]
        cmd += self.compile_flags(optimizer) + list(extra)
        for flag, value in (("--dp", dp), ("--tp", tp), ("--pp", pp), ("--microbatches", m)):
            if value > 1:
                cmd += [flag, str(value)]
        run(cmd)
        metrics = os.path.join(self.work, os.path.basename(exe) + ".jsonl")
        ckpt = os.path.join(self.work, os.path.basename(exe) + "-ckpt")
        cmd = [exe, "--data", self.data, "--steps", str(STEPS), "--sampler", "sequential",
               "--metrics", metrics, "--checkpoint-dir", ckpt]
        if dp * tp * pp > 1:
            cmd = MPIRUN + ["-np", str(dp * tp * pp)] + cmd
        if os.path.exists(metrics):
            os.remove(metrics)
        run(cmd, env=self.env)
        with open(metrics) as f:
            losses = [json.loads(line)["loss"] for line in f]
        self.runs[name] = losses, read_checkpoint(ckpt, STEPS)
        return self.runs[name]


def compare(got, want, tol):
    err = max(abs(a - b) / abs(b) for a, b in zip(got, want))
    ok = len(got) == len(want) and err <= tol
    return ok, "losses %.4f -> %.4f (torch %.4f -> %.4f), max rel err %.2e" % (
        got[0], got[-1], want[0], want[-1], err)


def check_torch(env, extra=()):
    got, _ = env.train(extra=list(extra))
    return compare(got, env.reference(env.sequential_batches(STEPS)), TORCH_TOL)


def check_evaluator(env):
    step_mlir = os.path.join(env.work, "train-step.mlir")
    run([os.path.join(env.bin_dir, "merak-compile"), env.onnx, "--compile-to=training",
         "-o", step_mlir] + env.compile_flags())
    ids, labels = next(env.sequential_batches(1))
    np.save(os.path.join(env.work, "ids.npy"), ids.numpy())
    np.save(os.path.join(env.work, "labels.npy"), labels.numpy())
    out = run([os.path.join(env.bin_dir, "merak-run"), step_mlir, "--entry", "train_step",
               "--input", os.path.join(env.work, "ids.npy"),
               "--input", os.path.join(env.work, "labels.npy"), "--steps", "3"])
    got = [json.loads(line)["loss"] for line in out.splitlines() if line.startswith("{")]
    with open(step_mlir) as f:
        step = f.read().split("func.func")
    train_step = next(part for part in step if part.lstrip().startswith("@train_step"))
    fused = re.findall(r"merak\.attention %.* dropout = ", train_step)
    if len(fused) != len(env.model.transformer.h):
        return False, "%d fused attentions with dropout in @train_step" % len(fused)
    return compare(got, env.reference([(ids, labels)] * 3), TORCH_TOL)


def check(env, name):
    if name == "torch":
        return check_torch(env)
    if name == "unfused":
        return check_torch(env, ["--fused-attention=off"])
    if name == "evaluator":
        return check_evaluator(env)
    if name not in MESHES:
        return False, "unknown check"
    serial, serial_params = env.train(optimizer="sgd")
    got, params = env.train(optimizer="sgd", **MESHES[name])
    ok, msg = compare_with_serial(got, params, serial, serial_params, SERIAL_TOL, STEPS)
    if name.endswith("-sp"):
        mesh = MESHES[name]
        cmd = [os.path.join(env.bin_dir, "merak-compile"), env.onnx, "--compile-to=training"]
        cmd += env.compile_flags("sgd") + mesh["extra"]
        for flag, key in (("--dp", "dp"), ("--tp", "tp"), ("--pp", "pp"), ("--microbatches", "m")):
            if mesh.get(key, 1) > 1:
                cmd += [flag, str(mesh[key])]
        rows = len(re.findall(r"merak\.dropout .*tp_split = array<i64: 0, 1, 2>.*x1x",
                              run(cmd)))
        ok, msg = ok and rows > 0, msg + "; %d dropouts split by rows" % rows
    return ok, msg


def main():
    return run_checks(Env, check, CHECKS)


if __name__ == "__main__":
    sys.exit(main())
