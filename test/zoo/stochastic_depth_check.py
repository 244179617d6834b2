#!/usr/bin/env python3
"""Random masks besides nn.Dropout's: stochastic depth and in-place dropout.

    $(scripts/venv-path.sh)/bin/python test/zoo/stochastic_depth_check.py --bin build/bin --workdir DIR

A small token model trains with the random masks vision and language
training code draws outside nn.Dropout(p): torch exports each as a uniform
draw (RandomUniformLike) compared with a probability, which merak imports as
merak.dropout masks (lib/Import/OnnxOpsRandom.cpp):
  - nn.Dropout(0.3, inplace=True) after the embedding (dynamo writes its
    bernoulli_ as `RandomUniformLike < 0.7`; TorchScript a Dropout node);
  - three residual blocks whose branch is dropped per row: torchvision's
    StochasticDepth(0.2, "row") (`bernoulli_`), transformers' DropPath
    (ConvNext's, p 0.25: `floor(rand + keep)`), and timm's form written out
    (`new_empty(...).bernoulli_(keep)`, p 0.1).
The reference is the same module in float64 where every draw is
u = 1 - v, v merak.dropout's uniform numbers for the seed merak-compile gave
that draw (test/parallel/dropout_check.py re-implements the rule in numpy),
and the module's own formula is applied to u. Checks, per exporter (ts17 with
training=TRAINING, dynamo 20 with the module in train mode):
  torch-<exporter>  20 AdamW steps of ./train equal PyTorch's (rel <= 1e-4),
                    which they cannot if a mask repeats or keeps the wrong
                    share of rows;
  dp2-m2-<exporter>, dp2-tp2-pp2-m4-<exporter>  SGD-momentum, losses and the
                    final checkpoint within 1e-5 of the serial program's (the
                    masks of the batch's rows drawn where they are computed).
And `bad-draw`: a draw added to a value (noise, not a mask) fails to compile
naming the node. Ends with "N passed, M failed".
"""
import os
import re
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
sys.path.insert(0, os.path.join(HERE, "..", "parallel"))
from check_runner import run_checks  # noqa: E402
from dropout_check import OPTIMIZERS, Env as DropoutEnv, compare, uniform  # noqa: E402
from program_check import compare_with_serial, corpus_tokens, tool_output as run  # noqa: E402

STEPS, BATCH, SEQ, VOCAB, WIDTH = 20, 8, 16, 97, 32
TORCH_TOL, SERIAL_TOL, LR = 1e-4, 1e-5, 3e-3
EMBED_P = 0.3
BLOCKS = [("torchvision", 0.2), ("transformers", 0.25), ("timm", 0.1)]
EXPORTERS = ["ts17", "dynamo20"]
MESHES = {"dp2-m2": dict(dp=2, m=2), "dp2-tp2-pp2-m4": dict(dp=2, tp=2, pp=2, m=4)}
CHECKS = (["torch-" + e for e in EXPORTERS] +
          ["%s-%s" % (m, e) for e in EXPORTERS for m in MESHES] + ["bad-draw"])


class Draws:
    """The reference's draws: u = 1 - v for the k-th merak.dropout of the
    import, at the model's step."""

    def __init__(self, seeds):
        self.seeds, self.step, self.k = seeds, 0, 0

    def __call__(self, shape):
        seed = self.seeds[self.k]
        self.k += 1
        n = int(np.prod(shape))
        return torch.from_numpy(1.0 - uniform(seed, self.step, n)).reshape(shape)


class Block(nn.Module):
    def __init__(self, kind, p):
        super().__init__()
        import torchvision
        from transformers.models.convnext.modeling_convnext import ConvNextDropPath
        self.kind, self.p = kind, p
        self.ln = nn.LayerNorm(WIDTH)
        self.fc1, self.fc2 = nn.Linear(WIDTH, 2 * WIDTH), nn.Linear(2 * WIDTH, WIDTH)
        self.drop = (torchvision.ops.StochasticDepth(p, "row") if kind == "torchvision" else
                     ConvNextDropPath(p) if kind == "transformers" else None)

    def forward(self, x, draws=None):
        y = self.fc2(F.gelu(self.fc1(self.ln(x))))
        keep = 1.0 - self.p
        row = (y.shape[0],) + (1,) * (y.ndim - 1)
        if draws is not None:  # the reference: the module's formula on merak's u
            u = draws(row).to(y.dtype)
            if self.kind == "transformers":
                y = y.div(keep) * torch.floor(u + keep)
            else:
                y = y * ((u < keep).to(y.dtype) / keep)
        elif self.drop is not None:
            y = self.drop(y)
        else:  # timm's DropPath
            r = y.new_empty(row).bernoulli_(keep)
            y = y * r.div_(keep)
        return x + y


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.drop = nn.Dropout(EMBED_P, inplace=True)
        self.blocks = nn.ModuleList(Block(k, p) for k, p in BLOCKS)
        self.norm = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, ids, draws=None):
        x = self.embed(ids)
        if draws is None:
            x = self.drop(x)
        else:
            u = draws(tuple(x.shape)).to(x.dtype)
            x = x * ((u < 1.0 - EMBED_P).to(x.dtype) / (1.0 - EMBED_P))
        for b in self.blocks:
            x = b(x, draws)
        return self.head(self.norm(x))


class Noise(nn.Module):
    """A draw that is not a mask: Gaussian-like noise added to the input."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, ids):
        x = self.embed(ids)
        return self.head(x + 0.1 * (torch.rand_like(x) - 0.5))


def export(model, path, exporter):
    ids = torch.zeros(BATCH, SEQ, dtype=torch.int64)
    model.train()
    if exporter == "ts17":
        torch.onnx.export(model, (ids,), path, dynamo=False, opset_version=17,
                          input_names=["input_ids"], output_names=["logits"],
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    else:
        torch.onnx.export(model, (ids,), path, dynamo=True, opset_version=20, optimize=False,
                          input_names=["input_ids"], output_names=["logits"])


class Env(DropoutEnv):
    """dropout_check's Env (its corpus, train() and meshes) on this model,
    one ONNX file per exporter."""

    def __init__(self, bin_dir, work):
        self.bin_dir, self.root = bin_dir, work
        self.tokens, self.data = corpus_tokens(work, VOCAB)
        self.env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        torch.manual_seed(0)
        self.model = Model()
        self.state = {k: v.clone() for k, v in self.model.state_dict().items()}
        self.files, self.runs_by = {}, {}
        for e in EXPORTERS:
            self.files[e] = os.path.join(work, "stochastic-%s.onnx" % e)
            export(self.model, self.files[e], e)
            self.runs_by[e] = {}
        self.model.load_state_dict(self.state)
        self.work = work

    def use(self, exporter):
        """Later train() calls compile this exporter's file, in its own directory."""
        self.onnx, self.runs = self.files[exporter], self.runs_by[exporter]
        self.work = os.path.join(self.root, exporter)
        os.makedirs(self.work, exist_ok=True)

    def compile_flags(self, optimizer="adamw"):
        return list(OPTIMIZERS[optimizer])

    def seeds(self):
        ir = run([os.path.join(self.bin_dir, "merak-compile"), self.onnx, "--compile-to=import"])
        found = [int(s) for s in re.findall(r"merak\.dropout %\S+ ratio = \S+ seed = (\d+)", ir)]
        assert len(found) == 1 + len(BLOCKS), found
        return found

    def reference(self, batches):
        """Per-step float64 PyTorch losses with merak's draws."""
        self.model.load_state_dict(self.state)
        model = self.model.double()
        draws = Draws(self.seeds())
        opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.999), eps=1e-8,
                                weight_decay=0.01)
        losses = []
        for step, (ids, labels) in enumerate(batches):
            draws.step, draws.k = step, 0
            opt.zero_grad()
            loss = F.cross_entropy(model(ids, draws).reshape(-1, VOCAB), labels.reshape(-1))
            loss.backward()
            losses.append(loss.item())
            opt.step()
        self.model.float()
        return losses


def check_bad_draw(env):
    path = os.path.join(env.root, "noise.onnx")
    export(Noise(), path, "dynamo20")
    p = subprocess.run([os.path.join(env.bin_dir, "merak-compile"), path, "-o",
                        os.path.join(env.root, "train-noise")], capture_output=True, text=True)
    want = "unsupported use of the random draw of RandomUniformLike node 'node_rand_like'"
    ok = p.returncode != 0 and want in p.stderr and "Traceback" not in p.stderr
    return ok, p.stderr.strip().splitlines()[-1][:300] if p.stderr.strip() else "no error"


def check(env, name):
    if name == "bad-draw":
        return check_bad_draw(env)
    mesh, exporter = name.rsplit("-", 1)
    env.use(exporter)
    if mesh == "torch":
        got, _ = env.train()
        return compare(got, env.reference(env.sequential_batches(STEPS)), TORCH_TOL)
    serial, serial_params = env.train(optimizer="sgd")
    got, params = env.train(optimizer="sgd", **MESHES[mesh])
    return compare_with_serial(got, params, serial, serial_params, SERIAL_TOL, STEPS)


def main():
    return run_checks(Env, check, CHECKS)


if __name__ == "__main__":
    sys.exit(main())
