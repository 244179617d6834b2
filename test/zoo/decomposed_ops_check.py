#!/usr/bin/env python3
"""Gradients through ops the importer builds from other ops (no kernels of
their own), merak vs PyTorch float64, with the venv's torch and torchvision
(the TorchScript exporter; the dynamo exporter where only it exports the op):

    $(scripts/venv-path.sh)/bin/python test/zoo/decomposed_ops_check.py --bin build/bin --workdir DIR

  fold        nn.Unfold -> a per-column scale -> nn.Fold (Col2Im, opset 18):
              stride 2, padding 1, dilation 2
  unpool      nn.MaxPool2d(return_indices=True) -> nn.MaxUnpool2d (dynamo,
              opset 18: MaxPool's Indices output, the unpooling a ScatterND
              of them into zeros)
  deform      torchvision's DeformConv2d with offsets and a mask predicted by
              convolutions (DeformConv, dynamo, opset 19): the gradient reaches the
              offsets' and the mask's weights through the bilinear sampling
  deform-groups  two offset groups, two weight groups, stride 2, no mask
  loop        a scripted recurrence `for t in range(x.size(1))` (Loop with a
              trip count from the input's shape, unrolled; opset 17)
  det         torch.linalg.det of predicted 4 x 4 matrices (Det: elimination
              with partial pivoting; opset 17)
  fourier     FNet's token mixing, LayerNorm(h + fft2(h).real) (two DFTs;
              dynamo, opset 20)
  spectrogram the power of torch.stft with a Hann window (STFT; opset 17)
  roi-align   torchvision's roi_align of fixed boxes (two per image, some
              past the feature map), sampling_ratio 2, aligned (half_pixel)
              and not (RoiAlign, opset 16): the gradient reaches the features
  gated-deltanet  Qwen3.5's token mixer written as ONNX at opset 27 (no
              exporter emits it): CausalConvWithState + SiLU on the queries,
              then LinearAttention's gated delta rule with GQA, against the
              spec's recurrence written in PyTorch

Each ends in a small head and a cross-entropy loss; test/torch/grad_check.py
compares every parameter's gradient (max rel err <= 1e-4) and the loss. Ends
with "N passed, M failed".
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
import grad_check  # noqa: E402
from check_runner import run_checks  # noqa: E402


class Head(nn.Module):
    """A 2-d feature map -> 4 class logits."""

    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, 3, 3, padding=1)
        self.fc = nn.Linear(3, 4)

    def forward(self, y):
        return self.fc(torch.relu(self.conv(y)).flatten(2).mean(-1))


class Fold(nn.Module):
    def __init__(self):
        super().__init__()
        self.pre = nn.Conv2d(2, 3, 1)
        self.scale = nn.Parameter(1 + 0.1 * torch.randn(3 * 9, 1))
        self.head = Head(3)

    def forward(self, x):
        kw = dict(kernel_size=3, dilation=2, padding=1, stride=2)
        cols = F.unfold(self.pre(x), **kw) * self.scale
        return self.head(F.fold(cols, (6, 7), **kw))


class Unpool(nn.Module):
    def __init__(self):
        super().__init__()
        self.pre = nn.Conv2d(2, 3, 3, padding=1)
        self.pool = nn.MaxPool2d(2, return_indices=True)
        self.unpool = nn.MaxUnpool2d(2)
        self.head = Head(3)

    def forward(self, x):
        y, idx = self.pool(self.pre(x))
        return self.head(self.unpool(torch.tanh(y), idx, output_size=(6, 7)))


class Deform(nn.Module):
    def __init__(self, groups=1, offset_groups=1, stride=1, mask=True):
        super().__init__()
        k = 3 * 3
        self.mask = mask
        self.offset = nn.Conv2d(4, 2 * offset_groups * k, 3, padding=1, stride=stride)
        nn.init.normal_(self.offset.weight, std=0.3)
        if mask:
            self.modulate = nn.Conv2d(4, offset_groups * k, 3, padding=1, stride=stride)
        self.deform = torchvision.ops.DeformConv2d(4, 4, 3, padding=1, stride=stride,
                                                   groups=groups)
        self.head = Head(4)

    def forward(self, x):
        m = torch.sigmoid(self.modulate(x)) if self.mask else None
        return self.head(self.deform(x, self.offset(x), m))


@torch.jit.script
def recur(x: torch.Tensor, h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    for t in range(x.size(1)):
        h = torch.tanh(x[:, t] + h @ w)
    return h


class Loop(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(2 * 6, 8)
        self.w = nn.Parameter(0.3 * torch.randn(8, 8))
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        seq = self.inp(x.permute(0, 3, 1, 2).flatten(2))  # [N, 7, 8]
        return self.fc(recur(seq, seq.new_zeros(x.shape[0], 8), self.w))


class Det(nn.Module):
    def __init__(self):
        super().__init__()
        self.mats = nn.Linear(2 * 6 * 7, 2 * 4 * 4)
        self.fc = nn.Linear(2, 4)

    def forward(self, x):
        a = self.mats(x.flatten(1)).view(-1, 2, 4, 4)
        return self.fc(torch.linalg.det(a))


class Fourier(nn.Module):
    """FNet's token mixing: the real part of a 2-d DFT over (tokens, hidden)."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(2 * 6, 8)
        self.norm = nn.LayerNorm(8)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        h = self.inp(x.permute(0, 3, 1, 2).flatten(2))  # [N, 7, 8]
        h = self.norm(h + torch.fft.fft2(h).real)
        return self.fc(h.mean(1))


class Spectrogram(nn.Module):
    """A magnitude spectrogram (torch.stft with a Hann window) of a signal."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(2 * 6 * 7, 64)
        self.register_buffer("window", torch.hann_window(16))
        self.fc = nn.Linear(9, 4)

    def forward(self, x):
        sig = self.inp(x.flatten(1))  # [N, 64]
        spec = torch.stft(sig, 16, hop_length=8, window=self.window, center=False,
                          return_complex=False)  # [N, 9, frames, 2]
        power = (spec * spec).sum(-1)
        return self.fc(power.mean(-1))


class Roi(nn.Module):
    """Box features (torchvision's roi_align, sampling_ratio 2, aligned) of
    fixed boxes, two per image, some reaching past the feature map."""

    def __init__(self, aligned=True):
        super().__init__()
        self.aligned = aligned
        self.pre = nn.Conv2d(2, 3, 3, padding=1)
        self.register_buffer("boxes", torch.tensor([
            [0, 0.5, 0.5, 4.0, 3.5], [0, 2.0, 1.0, 6.5, 5.5],
            [1, -0.8, 1.2, 2.7, 6.6], [1, 3.1, 0.2, 7.4, 4.9]]))
        self.fc = nn.Linear(2 * 3 * 2 * 2, 4)

    def forward(self, x):
        f = torchvision.ops.roi_align(torch.tanh(self.pre(x)), self.boxes, (2, 2),
                                      spatial_scale=1.0, sampling_ratio=2,
                                      aligned=self.aligned)
        return self.fc(f.reshape(x.shape[0], -1))


# A Gated DeltaNet block (Qwen3.5's linear attention) at opset 27, written
# as ONNX by hand (no exporter emits LinearAttention or CausalConvWithState),
# against the spec's recurrence in PyTorch float64.
GDN = dict(d=8, hq=4, hkv=2, dk=4, dv=3, k=3, vocab=5, batch=2, time=6)


def gdn_params():
    g = torch.Generator().manual_seed(0)
    c = GDN
    r = lambda *shape, s=0.4: s * torch.randn(*shape, generator=g, dtype=torch.float64)
    return {"wq": r(c["d"], c["hq"] * c["dk"]), "wk": r(c["d"], c["hkv"] * c["dk"]),
            "wv": r(c["d"], c["hkv"] * c["dv"]), "conv_w": r(c["hq"] * c["dk"], 1, c["k"]),
            "conv_b": r(c["hq"] * c["dk"], s=0.1), "wg": r(c["d"], c["hkv"]),
            "bg": r(c["hkv"], s=0.1), "wb": r(c["d"], c["hkv"]), "bb": r(c["hkv"], s=0.1),
            "wo": r(c["hq"] * c["dv"], c["vocab"])}


def gdn_torch(p, x, labels):
    """The block in float64: causal conv + SiLU on q, then the gated delta rule."""
    c = GDN
    B, T = x.shape[:2]
    q = (x @ p["wq"]).transpose(1, 2)
    q = F.conv1d(F.pad(q, (c["k"] - 1, 0)), p["conv_w"], p["conv_b"], groups=q.shape[1])
    q = F.silu(q).transpose(1, 2).reshape(B, T, c["hq"], c["dk"])
    k = (x @ p["wk"]).reshape(B, T, c["hkv"], c["dk"])
    v = (x @ p["wv"]).reshape(B, T, c["hkv"], c["dv"])
    g = -F.softplus(x @ p["wg"] + p["bg"])
    beta = torch.sigmoid(x @ p["wb"] + p["bb"])
    S = torch.zeros(B, c["hkv"], c["dk"], c["dv"], dtype=x.dtype)
    group, outs = c["hq"] // c["hkv"], []
    for t in range(T):
        S = S * g[:, t].exp()[..., None, None]
        kt, vt = k[:, t], v[:, t]
        vt = beta[:, t, :, None] * (vt - torch.einsum("bhdm,bhd->bhm", S, kt))
        S = S + kt[..., :, None] * vt[..., None, :]
        St = S.repeat_interleave(group, dim=1)
        outs.append(torch.einsum("bhd,bhdm->bhm", q[:, t], St) / c["dk"] ** 0.5)
    y = torch.stack(outs, 1).reshape(B, T, -1)
    logits = y @ p["wo"]
    return F.cross_entropy(logits.reshape(-1, c["vocab"]), labels.reshape(-1))


def gdn_onnx(p, path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    c = GDN
    N = helper.make_node
    nodes = [
        N("MatMul", ["x", "wq"], ["q0"]), N("Transpose", ["q0"], ["qT"], perm=[0, 2, 1]),
        N("CausalConvWithState", ["qT", "conv_w", "conv_b"], ["qc", ""], activation="silu"),
        N("Transpose", ["qc"], ["q"], perm=[0, 2, 1]),
        N("MatMul", ["x", "wk"], ["k"]), N("MatMul", ["x", "wv"], ["v"]),
        N("MatMul", ["x", "wg"], ["g0"]), N("Add", ["g0", "bg"], ["g1"]),
        N("Softplus", ["g1"], ["g2"]), N("Neg", ["g2"], ["g"]),
        N("MatMul", ["x", "wb"], ["b0"]), N("Add", ["b0", "bb"], ["b1"]),
        N("Sigmoid", ["b1"], ["beta"]),
        N("LinearAttention", ["q", "k", "v", "", "g", "beta"], ["y", "state"],
          q_num_heads=c["hq"], kv_num_heads=c["hkv"]),
        N("MatMul", ["y", "wo"], ["logits"]),
        N("Transpose", ["logits"], ["logitsT"], perm=[0, 2, 1]),
        N("SoftmaxCrossEntropyLoss", ["logitsT", "labels"], ["loss"]),
    ]
    graph = helper.make_graph(
        nodes, "gated_deltanet",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [c["batch"], c["time"], c["d"]]),
         helper.make_tensor_value_info("labels", TensorProto.INT64, [c["batch"], c["time"]])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        [numpy_helper.from_array(t.detach().float().numpy(), n) for n, t in p.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 27)])
    model.ir_version = 10
    onnx.save(model, path)


def check_gated_deltanet(env, name):
    c = GDN
    case = os.path.join(env[1], name)
    os.makedirs(case, exist_ok=True)
    p = gdn_params()
    torch.manual_seed(1)
    x = torch.randn(c["batch"], c["time"], c["d"])
    labels = torch.randint(0, c["vocab"], (c["batch"], c["time"]))
    # The ONNX holds the float32 weights; the reference starts from them too.
    p = {n: t.float().double().requires_grad_() for n, t in p.items()}
    onnx_path = os.path.join(case, "model.onnx")
    gdn_onnx(p, onnx_path)
    loss = gdn_torch(p, x.double(), labels)
    loss.backward()
    expected = {n: t.grad.numpy() for n, t in p.items()}
    ok = grad_check.compare_onnx(name, case, onnx_path, (x, labels), expected, loss.item(),
                                 env[0])
    return ok, "parameter gradients against PyTorch float64 (the line above)"


# name: (module, its arguments, input channels, opset, dynamo exporter)
CASES = {
    "fold": (Fold, {}, 2, 18, False),
    "unpool": (Unpool, {}, 2, 18, True),
    "deform": (Deform, {}, 4, 19, True),
    "deform-groups": (Deform, dict(groups=2, offset_groups=2, stride=2, mask=False), 4, 19, True),
    "loop": (Loop, {}, 2, 17, False),
    "det": (Det, {}, 2, 17, False),
    "fourier": (Fourier, {}, 2, 20, True),
    "spectrogram": (Spectrogram, {}, 2, 17, False),
    "roi-align": (Roi, {}, 2, 16, False),
    "roi-align-legacy": (Roi, dict(aligned=False), 2, 16, False),
}


def check(env, name):
    if name == "gated-deltanet":
        return check_gated_deltanet(env, name)
    cls, kw, channels, opset, dynamo = CASES[name]
    torch.manual_seed(0)
    model = grad_check.WithLoss(cls(**kw), "ce")
    x = torch.randn(2, channels, 6, 7)
    ok = grad_check.check_built(name, model, (x, torch.tensor([1, 3])), ["x", "labels"], opset,
                                *env, dynamo=dynamo)
    return ok, "parameter gradients against PyTorch float64 (the line above)"


def main():
    return run_checks(lambda bin_dir, work: (bin_dir, work), check,
                      list(CASES) + ["gated-deltanet"])


if __name__ == "__main__":
    sys.exit(main())
