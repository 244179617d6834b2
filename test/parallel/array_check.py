"""Non-transformer models (array inputs) trained with --dp/--pp against the serial program.

    /usr/bin/python3 test/parallel/array_check.py --bin BUILD/bin --workdir DIR [CHECK...]

Models without token ids, exported with a dynamic batch axis and fed
from a directory of .npy arrays (`DIR/<input>.npy`, `DIR/labels.npy`):
`mlp` (4 linear layers, 16 -> 32 -> 32 -> 32 -> 32 classes, GELU/ReLU) and
`cnn` (a BatchNorm-free residual CNN: a strided 3x3 stem, two residual
blocks conv-relu-conv + skip, a linear head). BatchNorm is left out on
purpose: in training mode its batch statistics are per micro-batch and per
data-parallel rank, so a BN model is not expected to match the serial
program. Every layer keeps the per-sample activation size (32 and 4x4x4
floats); the partitioner has a cut point between every pair of layers
(where one activation crosses).

A check `<model>-<opt>-<config>` with config `pp2-m2-1f1b`, `pp2-m2-gpipe`,
`dp2`, `dp2-pp2-m2-1f1b`, `tp2` or `dp2-tp2-pp2-m2-1f1b` compiles the model serially (global batch 8) and
with that configuration, trains 15 steps with --sampler sequential on 37
samples (row r of step s is sample (s*8 + r) mod 37 in both), and passes
when the per-step losses are within 1e-5 (SGD with momentum) / 1e-4 (AdamW)
relative of the serial program's and the final parameters within the same
tolerance (param_rel_err of program_check.py). With tp the cnn's residual
blocks split by channels (conv1 column-parallel, its bias split; conv2
row-parallel, its bias added once after the sum) and the checkpoint's
weights are the assembled shards. `rnn` (an LSTM over 6 steps, its last
output -> 37 classes) has no Linear pair: with tp only its head splits on
the classes (vocabulary parallelism, 37 padded to 2 x 19, the bias with
it). `qkv` (GQA attention with one fused QKV Linear with a bias) splits
that Linear and its bias in ragged blocks [16, 8, 8]. `textcls` (token ids
-> embedding, an MLP pair, 5 classes) splits its token table alone on its
rows under tp (61 padded to 2 x 31), as Megatron's VocabParallelEmbedding;
its tp checks also assert that split in the IR. `cvhead` (a head stored
[C, V], logits x @ W) splits the head on its columns under tp; its checks
assert that and the vocab-parallel loss in the IR. `mlp-too-few-cuts`: a model
with fewer cut points than --pp stages fails to compile with a message
naming the count. `funnel-*`: an MLP whose head narrows (48 -> 6
classes), cut at --pp 2 and 4 (`funnel-balance`: estimated stage FLOPs
within 1.5x of their mean). Ends with "N passed, M failed".
"""
import json
import os
import re
import subprocess
import sys

import numpy as np
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
from program_check import compare_with_serial  # noqa: E402
from merak_checkpoint import read_checkpoint  # noqa: E402
from check_runner import run_checks  # noqa: E402

STEPS, BATCH, SAMPLES = 15, 8, 37
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]
OPTS = {
    "sgd": (["--optimizer", "sgd", "--opt", "lr=0.05", "--opt", "momentum=0.9"], 1e-5),
    "adamw": (["--optimizer", "adamw", "--opt", "lr=3e-3"], 1e-4),
}
CONFIGS = {
    "pp2-m2-1f1b": dict(pp=2, m=2, schedule="1f1b"),
    "pp2-m2-gpipe": dict(pp=2, m=2, schedule="gpipe"),
    "dp2": dict(dp=2),
    "dp2-pp2-m2-1f1b": dict(dp=2, pp=2, m=2, schedule="1f1b"),
    "pp4-m4-1f1b": dict(pp=4, m=4, schedule="1f1b"),
    "tp2": dict(tp=2),
    "dp2-tp2-pp2-m2-1f1b": dict(dp=2, tp=2, pp=2, m=2, schedule="1f1b"),
}
CHECKS = ["%s-%s-%s" % (model, opt, cfg) for model in ("mlp", "cnn")
          for opt, cfg in (("sgd", "pp2-m2-1f1b"), ("sgd", "pp2-m2-gpipe"), ("sgd", "dp2"),
                           ("sgd", "dp2-pp2-m2-1f1b"), ("adamw", "pp2-m2-1f1b"),
                           ("adamw", "dp2-pp2-m2-1f1b"))] + [
    "cnn-sgd-tp2", "cnn-adamw-dp2-tp2-pp2-m2-1f1b", "rnn-sgd-tp2",
    "rnn-adamw-dp2-tp2-pp2-m2-1f1b", "qkv-sgd-tp2", "qkv-sgd-dp2-tp2-pp2-m2-1f1b",
    "textcls-sgd-tp2", "textcls-adamw-dp2-tp2-pp2-m2-1f1b",
    "cvhead-sgd-tp2", "cvhead-adamw-dp2-tp2-pp2-m2-1f1b",
    "funnel-sgd-pp2-m2-1f1b", "funnel-adamw-pp4-m4-1f1b", "funnel-balance", "mlp-too-few-cuts"]


class DeepMLP(nn.Module):
    def __init__(self, width=32):
        super().__init__()
        self.fc1 = nn.Linear(16, width)
        self.fc2 = nn.Linear(width, width)
        self.fc3 = nn.Linear(width, width)
        self.fc4 = nn.Linear(width, width)

    def forward(self, x):
        x = torch.nn.functional.gelu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        x = torch.relu(self.fc3(x))
        return self.fc4(x)


class ResBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        return torch.relu(x + self.conv2(torch.relu(self.conv1(x))))


class ResCNN(nn.Module):
    """BatchNorm-free: [B, 3, 8, 8] -> stem [B, 4, 4, 4] -> 2 blocks -> 64 classes."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, stride=2, padding=1)
        self.block1 = ResBlock(4)
        self.block2 = ResBlock(4)
        self.head = nn.Linear(64, 64)

    def forward(self, x):
        x = self.block2(self.block1(torch.relu(self.stem(x))))
        return self.head(torch.flatten(x, 1))


class FunnelMLP(nn.Module):
    """Four wide layers and a narrow head (48 -> 6 classes): the fewest
    bytes cross only at the logits, so balancing must cut at wider
    activations."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 48)
        self.fc2 = nn.Linear(48, 48)
        self.fc3 = nn.Linear(48, 48)
        self.fc4 = nn.Linear(48, 48)
        self.head = nn.Linear(48, 6)

    def forward(self, x):
        x = torch.nn.functional.gelu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        x = torch.relu(self.fc3(x))
        x = torch.relu(self.fc4(x))
        return self.head(x)


class NarrowMLP(nn.Module):
    """Two layers: few cut points."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class RecurrentClassifier(nn.Module):
    """An LSTM over 6 steps of 16 features; its last output -> 37 classes.
    No Linear pair: under tp only the head splits (vocabulary-parallel,
    37 classes padded to 2 x 19, its bias too)."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(16, 24, batch_first=True)
        self.head = nn.Linear(24, 37)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.head(y[:, -1])


class FusedQKV(nn.Module):
    """GQA attention over 4 steps of 16 features with one fused QKV Linear
    with a bias (q: 4 heads of 4, k and v: 2 heads each; [16 + 8 + 8]
    rows), an output projection, the mean over steps -> 8 classes. Under
    tp the QKV weight and its bias split in ragged blocks [16, 8, 8]. Its
    checks use SGD: the keys' bias has an exactly zero gradient (softmax
    ignores a shift of all scores), which AdamW turns from float noise into
    full steps that differ between any two configurations (dp2 alone too)."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(16, 32)
        self.out = nn.Linear(16, 16)
        self.head = nn.Linear(16, 8)

    def forward(self, x):
        b, t, _ = x.shape
        qkv = self.qkv(x)
        q = qkv[..., :16].reshape(b, t, 4, 4).transpose(1, 2)
        k = qkv[..., 16:24].reshape(b, t, 2, 4).transpose(1, 2)
        v = qkv[..., 24:].reshape(b, t, 2, 4).transpose(1, 2)
        k = k[:, :, None].expand(b, 2, 2, t, 4).reshape(b, 4, t, 4)
        v = v[:, :, None].expand(b, 2, 2, t, 4).reshape(b, 4, t, 4)
        a = torch.softmax(q @ k.transpose(-1, -2) * 0.5, dim=-1) @ v
        y = x + self.out(a.transpose(1, 2).reshape(b, t, 16))
        return self.head(y.mean(dim=1))


class TextClassifier(nn.Module):
    """Token ids (6 per sample, vocabulary 61) -> an embedding of 16 plus a
    learned position table, a residual MLP pair, the mean over tokens -> 5
    classes. Under tp the MLP splits and the token table splits alone on its
    rows (61 padded to 2 x 31; the 5-class head and the position table stay
    whole): Megatron-LM's VocabParallelEmbedding without an LM head."""

    vocab = 61

    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(self.vocab, 16)
        self.pos = nn.Embedding(6, 16)
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 16)
        self.head = nn.Linear(16, 5)

    def forward(self, ids):
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1]))
        x = x + self.fc2(torch.relu(self.fc1(x)))
        return self.head(x.mean(dim=1))


class ColumnHead(nn.Module):
    """4 steps of 16 features -> a residual MLP pair -> the mean over steps
    -> logits x @ W with W a bare [16, 40] parameter (a head stored [C, V],
    as JAX/TF exports store Dense kernels). Under tp the head splits on its
    columns (vocabulary parallelism, 20 of 40 classes per rank)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 16)
        self.head = nn.Parameter(torch.randn(16, 40) * 0.25)

    def forward(self, x):
        x = x + self.fc2(torch.relu(self.fc1(x)))
        return x.mean(dim=1) @ self.head


MODELS = {  # name: (module, input name, per-sample shape, classes)
    "mlp": (DeepMLP, "features", (16,), 32),
    "cnn": (ResCNN, "image", (3, 8, 8), 64),
    "funnel": (FunnelMLP, "features", (16,), 6),
    "narrow": (NarrowMLP, "features", (16,), 10),
    "rnn": (RecurrentClassifier, "features", (6, 16), 37),
    "qkv": (FusedQKV, "features", (4, 16), 8),
    "textcls": (TextClassifier, "ids", (6,), 5),
    "cvhead": (ColumnHead, "features", (4, 16), 40),
}


def run(cmd, env=None, timeout=300, check=True):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                       timeout=timeout)
    if check and p.returncode:
        raise RuntimeError("%s failed (%d):\n%s" % (os.path.basename(cmd[0]), p.returncode,
                                                  p.stdout.decode()[-3000:]))
    return p.returncode, p.stdout.decode()


class Env:
    def __init__(self, bin_dir, work):
        self.bin_dir, self.work = bin_dir, work
        self.env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        self.models, self.results = {}, {}

    def model(self, name):
        """(onnx path, data dir) of a model, exported with a dynamic batch axis."""
        if name not in self.models:
            cls, input_name, shape, classes = MODELS[name]
            torch.manual_seed(0)
            model = cls()
            path = os.path.join(self.work, name + ".onnx")
            vocab = getattr(cls, "vocab", 0)
            example = torch.zeros((BATCH,) + shape, dtype=torch.int64 if vocab else torch.float32)
            torch.onnx.export(model, (example,), path, opset_version=17,
                              input_names=[input_name], output_names=["logits"],
                              training=torch.onnx.TrainingMode.TRAINING,
                              do_constant_folding=False,
                              dynamic_axes={input_name: {0: "batch"}})
            data = os.path.join(self.work, name + "-data")
            os.makedirs(data, exist_ok=True)
            rng = np.random.default_rng(3)
            x = (rng.integers(0, vocab, (SAMPLES,) + shape) if vocab else
                 rng.standard_normal((SAMPLES,) + shape).astype(np.float32))
            flat = x.reshape(SAMPLES, -1)
            labels = (flat[:, :classes].argmax(axis=1) % classes).astype(np.int64)
            np.save(os.path.join(data, input_name + ".npy"), x)
            np.save(os.path.join(data, "labels.npy"), labels)
            self.models[name] = (path, data)
        return self.models[name]

    def compile(self, name, opt, pp=1, m=1, schedule="1f1b", dp=1, check=True, phase="binary",
                tp=1):
        path, _ = self.model(name)
        _, input_name, shape, _ = MODELS[name]
        tag = "%s-%s-pp%d-m%d-%s-dp%d" % (name, opt, pp, m, schedule, dp) + (
            "-tp%d" % tp if tp > 1 else "")
        exe = os.path.join(self.work, "train-" + tag + ("" if phase == "binary" else "." + phase))
        cmd = [os.path.join(self.bin_dir, "merak-compile"), path, "--input-shape",
               "%s=%s" % (input_name, "x".join(str(d) for d in (BATCH,) + shape)),
               "--compile-to=" + phase, "-o", exe] + OPTS[opt][0]
        if pp > 1 or m > 1:
            cmd += ["--pp", str(pp), "--microbatches", str(m), "--schedule", schedule]
        if dp > 1:
            cmd += ["--dp", str(dp)]
        if tp > 1:
            cmd += ["--tp", str(tp)]
        rc, out = run(cmd, check=check)
        return tag, exe, rc, out

    def train(self, name, opt, pp=1, m=1, schedule="1f1b", dp=1, tp=1):
        tag, exe, _, _ = self.compile(name, opt, pp, m, schedule, dp, tp=tp)
        if tag in self.results:
            return self.results[tag]
        _, data = self.model(name)
        metrics = os.path.join(self.work, tag + ".jsonl")
        if os.path.exists(metrics):
            os.remove(metrics)
        ckpt = os.path.join(self.work, tag + "-ckpt")
        cmd = [exe, "--data", data, "--steps", str(STEPS), "--sampler", "sequential",
               "--metrics", metrics, "--checkpoint-dir", ckpt]
        if pp * dp * tp > 1:
            cmd = MPIRUN + ["-np", str(pp * dp * tp)] + cmd
        run(cmd, env=self.env)
        with open(metrics) as f:
            losses = [json.loads(line)["loss"] for line in f]
        result = (losses, read_checkpoint(ckpt, STEPS))
        self.results[tag] = result
        return result


def compare(got, params, serial, serial_params, tol):
    """(ok, message): per-step losses and final parameters against serial."""
    return compare_with_serial(got, params, serial, serial_params, tol, STEPS)


def check_balance(env):
    """The funnel MLP at --pp 4: every stage's estimated FLOPs within 1.5x
    of the mean (the first partitioner, cutting only where the fewest bytes
    cross, could cut only at the logits: 'too few for 4 stages')."""
    _, exe, _, _ = env.compile("funnel", "sgd", pp=4, m=4, phase="pipeline")
    with open(exe) as f:
        flops = [int(x) for x in re.findall(r"^// stage \d+: \d+ ops, (\d+) FLOPs", f.read(), re.M)]
    if len(flops) != 4:
        return False, "expected 4 stages, got %s" % flops
    mean = sum(flops) / 4.0
    return max(flops) <= 1.5 * mean, "stage FLOPs %s, max/mean %.2f" % (flops, max(flops) / mean)


def check(env, name):
    if name == "mlp-too-few-cuts":
        _, _, rc, out = env.compile("narrow", "sgd", pp=16, m=1, check=False)
        ok = rc != 0 and re.search(r"cut points .*too few for 16 stages", out) is not None
        return ok, (out.strip().splitlines() or ["no output"])[-1]
    if name == "funnel-balance":
        return check_balance(env)
    r = re.fullmatch(r"(mlp|cnn|funnel|rnn|qkv|textcls|cvhead)-(sgd|adamw)-(.+)", name)
    if not r or r.group(3) not in CONFIGS:
        raise ValueError("unknown check " + name)
    model, opt, cfg = r.group(1), r.group(2), CONFIGS[r.group(3)]
    serial, serial_params = env.train(model, opt)
    got, params = env.train(model, opt, **cfg)
    ok, msg = compare(got, params, serial, serial_params, OPTS[opt][1])
    if model == "textcls" and cfg.get("tp", 1) > 1:
        # The token table is split (31 of 61 rows per rank), the rest not.
        _, ir, _, _ = env.compile(model, opt, phase="training", **cfg)
        with open(ir) as f:
            text = f.read()
        split = re.search(r"merak.param @tok.weight : tensor<31x16xf32> .*size = 61>", text)
        whole = re.search(r"merak.param @pos.weight : tensor<6x16xf32> = [^{]*$", text, re.M)
        if not split or not whole:
            return False, msg + "; token table not split alone (%s, %s)" % (bool(split),
                                                                              bool(whole))
        msg += "; tok.weight split 31 of 61 rows per rank"
    if model == "cvhead" and cfg.get("tp", 1) > 1:
        _, ir, _, _ = env.compile(model, opt, phase="training", **cfg)
        with open(ir) as f:
            text = f.read()
        if not re.search(r"merak.param @head : tensor<16x20xf32> .*axis = 1", text) or \
                not re.search(r'group = "tp"[^}]*\} : tensor<\d+x20xf32>', text):
            return False, msg + "; the [C, V] head or the logits are not split on V"
        msg += "; head split 20 of 40 columns per rank, vocab-parallel loss"
    return ok, msg


def main():
    return run_checks(Env, check, CHECKS)


if __name__ == "__main__":
    sys.exit(main())
