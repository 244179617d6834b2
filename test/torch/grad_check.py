"""Gradients of every parameter, merak vs PyTorch.

    /usr/bin/python3 test/torch/grad_check.py --bin BUILD/bin --workdir DIR

For each model (GPT-2-style decoder with a next-token cross-entropy, BERT-style
encoder and nn.TransformerEncoder with a fixed weighted-sum loss, an MLP with
cross-entropy), exported from PyTorch in training mode at opsets 13 and 17 with
the loss as the model's output: merak-compile imports it, merak-opt
--merak-autodiff adds @forward_grad, merak-run evaluates it, and every
parameter's gradient is compared with torch.autograd computed in float64.
Relative error = max|merak - torch| / max|torch| per tensor; it must be
<= 1e-4 (the serial-training issue's bound). Ends with "N passed, M failed".
"""
import argparse
import inspect
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export_models as em  # noqa: E402

TOLERANCE = 1e-4
# resnet18 input size: train-mode BatchNorm at the last stage normalises over
# N * (HW/32)^2 values; 64x64 keeps 8 per channel and the run short.
RESNET_HW = 64


class WithLoss(nn.Module):
    """Wraps a model so that its output is a scalar loss."""

    def __init__(self, model, kind, out_shapes=()):
        super().__init__()
        self.m, self.kind = model, kind
        g = torch.Generator().manual_seed(1)
        # Fixed projection weights for the regression-style losses; they
        # export as initializers (merak gives them gradients too, torch does
        # not: they are not parameters, and are skipped in the comparison).
        self.proj = [torch.randn(s, generator=g) for s in out_shapes]

    def forward(self, *args):
        if self.kind == "ce_tokens":  # GPT: logits [B,T,V], labels [B,T]
            logits = self.m(args[0])
            return F.cross_entropy(logits.reshape(-1, logits.size(-1)),
                                   args[1].reshape(-1))
        if self.kind == "ce":  # MLP: logits [N,C], labels [N]
            return F.cross_entropy(self.m(args[0]), args[1])
        outs = self.m(*args)
        outs = outs if isinstance(outs, (tuple, list)) else (outs,)
        return sum((o * p).sum() for o, p in zip(outs, self.proj))


class Scalars(nn.Module):
    """Trained one-element parameters: nn.PReLU's single slope [1] and a
    rank-0 temperature, beside a one-element buffer (an epsilon)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(20, 16)
        self.act = nn.PReLU(init=0.3)
        self.temperature = nn.Parameter(torch.tensor(0.7))
        self.register_buffer("eps", torch.tensor(1e-2))
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        return self.head(self.act(self.fc(x))) / (self.temperature + self.eps)


def build(name):
    torch.manual_seed(0)
    if name == "scalars":
        x = torch.randn(8, 20)
        labels = torch.randint(0, 10, (8,), dtype=torch.int64)
        return WithLoss(Scalars(), "ce"), (x, labels), ["input", "labels"]
    if name == "gpt2":
        model, inputs, in_names, _ = em.build_gpt2("train")
        labels = torch.randint(0, 97, inputs[0].shape, dtype=torch.int64)
        return WithLoss(model, "ce_tokens"), inputs + (labels,), in_names + ["labels"]
    if name == "mlp":
        model, inputs, in_names, _ = em.build_mlp("train")
        labels = torch.randint(0, 10, (inputs[0].shape[0],), dtype=torch.int64)
        return WithLoss(model, "ce"), inputs + (labels,), in_names + ["labels"]
    if name == "bert":
        model, inputs, in_names, _ = em.build_bert("train")
        return WithLoss(model, "proj", [(2, 12, 32), (2, 32)]), inputs, in_names
    if name == "resnet18":
        import torchvision
        model = torchvision.models.resnet18(weights=None, num_classes=10)
        x = torch.randn(2, 3, RESNET_HW, RESNET_HW)
        labels = torch.randint(0, 10, (2,), dtype=torch.int64)
        return WithLoss(model, "ce"), (x, labels), ["input", "labels"]
    if name == "transformer_encoder":
        model, inputs, in_names, _ = em.build_transformer_encoder("train")
        return WithLoss(model, "proj", [(2, 10, 32)]), inputs, in_names
    raise ValueError(name)


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode:
        raise RuntimeError("%s failed:\n%s" % (os.path.basename(cmd[0]),
                                               p.stderr.decode()[-2000:]))
    return p.stdout.decode()


def check(name, opset, bin_dir, work):
    wrapped, inputs, in_names = build(name)
    em.randomize_norm_layers(wrapped)
    return check_built(name, wrapped, inputs, in_names, opset, bin_dir, work)


def check_built(name, wrapped, inputs, in_names, opset, bin_dir, work, dynamo=False):
    """check() of a module already built: `wrapped` returns the loss. With
    `dynamo` (torch 2.x) the dynamo exporter, else TorchScript's."""
    case = os.path.join(work, "%s_op%d" % (name, opset))
    os.makedirs(case, exist_ok=True)
    wrapped.train(True)
    onnx_path = os.path.join(case, "model.onnx")
    if dynamo:
        # The module's own mode (train) is what torch.export traces.
        # optimize=False: the graph optimizer would fold and merge weights.
        kw = dict(dynamo=True, external_data=False, optimize=False)
    else:
        kw = dict(training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
        if "dynamo" in inspect.signature(torch.onnx.export).parameters:
            kw["dynamo"] = False  # the TorchScript exporter on torch 2.x (the venv)
    with torch.enable_grad():
        torch.onnx.export(wrapped, inputs, onnx_path, opset_version=opset,
                          input_names=in_names, output_names=["loss"], **kw)
    # Reference: float64 autograd on the same weights.
    ref = wrapped.double()
    ref.proj = [p.double() for p in ref.proj]
    ref_inputs = [t.double() if t.is_floating_point() else t for t in inputs]
    loss = ref(*ref_inputs)
    loss.backward()
    expected = {"m." + n if not n.startswith("m.") else n: p.grad.numpy()
                for n, p in ref.named_parameters()}
    return compare_onnx("%s_op%d" % (name, opset), case, onnx_path, inputs, expected,
                        loss.item(), bin_dir)


def compare_onnx(label, case, onnx_path, inputs, expected, ref_loss, bin_dir):
    """merak's loss and parameter gradients of the ONNX model `onnx_path`
    (whose output is the loss) on `inputs` (torch tensors) against
    `expected` (initializer name -> float64 gradient) and `ref_loss`."""
    feeds = []
    for i, t in enumerate(inputs):
        path = os.path.join(case, "input_%d.npy" % i)
        np.save(path, t.numpy())
        feeds += ["--input", path]
    mlir = os.path.join(case, "model.mlir")
    grad = os.path.join(case, "grad.mlir")
    run([os.path.join(bin_dir, "merak-compile"), onnx_path, "--compile-to=import", "-o", mlir])
    run([os.path.join(bin_dir, "merak-opt"), mlir, "--merak-autodiff", "-o", grad])
    out = os.path.join(case, "out")
    run([os.path.join(bin_dir, "merak-run"), grad, "--entry", "forward_grad",
         "--output-dir", out, "--output-format", "npy"] + feeds)
    # Output order: loss, then one gradient per merak.param (module order).
    text = open(grad).read()
    params = [line.split("@", 1)[1].split(" :", 1)[0].strip('"')
              for line in text.splitlines() if line.strip().startswith("merak.param @")]
    got_loss = float(np.load(os.path.join(out, "output_0.npy")))
    # A gradient that is exactly zero in exact arithmetic (e.g. the key bias
    # of attention: softmax ignores a per-query constant) is float32 noise in
    # merak and float64 noise in torch; relative error means nothing there.
    # Such tensors (reference below 1e-6 of the largest gradient) must
    # instead be below 1e-5 of the largest gradient.
    scale = max(np.abs(e).max() for e in expected.values())
    worst, compared, zeros = 0.0, 0, 0
    loss_err = abs(got_loss - ref_loss) / max(abs(ref_loss), 1e-30)
    for i, p in enumerate(params):
        if p not in expected:
            continue  # an exported buffer or constant, not a torch parameter
        g = np.load(os.path.join(out, "output_%d.npy" % (i + 1)))
        e = expected[p]
        if np.abs(e).max() < 1e-6 * scale:
            err = np.abs(g).max() / scale * (TOLERANCE / 1e-5)
            zeros += 1
        else:
            err = np.abs(g - e).max() / np.abs(e).max()
        worst = max(worst, err)
        compared += 1
    missing = sorted(set(expected) - set(params))
    ok = worst <= TOLERANCE and loss_err <= TOLERANCE and not missing
    print("%s %s: %d parameter gradients (%d exactly zero), max rel err "
          "%.2e, loss rel err %.2e%s"
          % ("PASS" if ok else "FAIL", label, compared, zeros, worst, loss_err,
             (", missing: %s" % missing) if missing else ""))
    return ok


def check_training_phase(bin_dir, work):
    """GPT exported with logits only: merak-compile --compile-to=training
    attaches the next-token cross-entropy (labels as an extra input) and
    differentiates it; every trainable gradient must match torch."""
    case = os.path.join(work, "gpt2_training_phase")
    os.makedirs(case, exist_ok=True)
    torch.manual_seed(0)
    model, (ids,), in_names, out_names = em.build_gpt2("train")
    labels = torch.randint(0, 97, ids.shape, dtype=torch.int64)
    onnx_path = os.path.join(case, "model.onnx")
    torch.onnx.export(model, (ids,), onnx_path, opset_version=17,
                      input_names=in_names, output_names=out_names,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    ref = model.double()
    logits = ref(ids)
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1))
    loss.backward()
    expected = {n: p.grad.numpy() for n, p in ref.named_parameters()}
    mlir = os.path.join(case, "train.mlir")
    p = subprocess.run([os.path.join(bin_dir, "merak-compile"), onnx_path,
                        "--compile-to=training", "--frozen", "*.attn.bias",
                        "-o", mlir], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode:
        raise RuntimeError(p.stderr.decode()[-2000:])
    summary = p.stderr.decode().strip()
    np.save(os.path.join(case, "ids.npy"), ids.numpy())
    np.save(os.path.join(case, "labels.npy"), labels.numpy())
    out = os.path.join(case, "out")
    run([os.path.join(bin_dir, "merak-run"), mlir, "--entry", "loss_grad",
         "--input", os.path.join(case, "ids.npy"),
         "--input", os.path.join(case, "labels.npy"),
         "--output-dir", out, "--output-format", "npy"])
    text = open(mlir).read()
    sig = text[text.index("func.func @loss_grad"):].split("{\n", 1)[0]
    names = [n[len("grad:"):] for n in
             __import__("re").findall(r'merak.name = "(grad:[^"]*)"', sig)]
    worst = abs(float(np.load(os.path.join(out, "output_0.npy"))) - loss.item()) / loss.item()
    for i, n in enumerate(names):
        g = np.load(os.path.join(out, "output_%d.npy" % (i + 1)))
        e = expected[n]
        worst = max(worst, np.abs(g - e).max() / np.abs(e).max())
    ok = worst <= TOLERANCE and sorted(names) == sorted(expected)
    print("%s gpt2 --compile-to=training: %d gradients, max rel err %.2e (%s)"
          % ("PASS" if ok else "FAIL", len(names), worst, summary))
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="directory with merak tools")
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    passed = failed = 0
    for name in ("gpt2", "bert", "transformer_encoder", "mlp", "resnet18", "scalars"):
        for opset in (13, 17):
            try:
                ok = check(name, opset, os.path.abspath(args.bin), args.workdir)
            except Exception as e:  # reported, counted as a failure
                print("FAIL %s_op%d: %s" % (name, opset, e))
                ok = False
            passed += ok
            failed += not ok
            sys.stdout.flush()
    try:
        ok = check_training_phase(os.path.abspath(args.bin), args.workdir)
    except Exception as e:
        print("FAIL gpt2 --compile-to=training: %s" % e)
        ok = False
    passed += ok
    failed += not ok
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
