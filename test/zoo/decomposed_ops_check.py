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


class WithLoss(nn.Module):
    """grad_check's layout: the model as `m`, the loss as the output."""

    def __init__(self, model):
        super().__init__()
        self.m, self.proj = model, []

    def forward(self, x, labels):
        return F.cross_entropy(self.m(x), labels)


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
}


def check(env, name):
    cls, kw, channels, opset, dynamo = CASES[name]
    torch.manual_seed(0)
    model = WithLoss(cls(**kw))
    x = torch.randn(2, channels, 6, 7)
    ok = grad_check.check_built(name, model, (x, torch.tensor([1, 3])), ["x", "labels"], opset,
                                *env, dynamo=dynamo)
    return ok, "parameter gradients against PyTorch float64 (the line above)"


def main():
    return run_checks(lambda bin_dir, work: (bin_dir, work), check, list(CASES))


if __name__ == "__main__":
    sys.exit(main())
