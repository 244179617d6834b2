#!/usr/bin/env python3
"""Gradients through GridSample and AffineGrid (spatial transformers), merak
vs PyTorch float64, with the venv's torch (TorchScript exporter, opset 20,
which emits AffineGrid; torch 1.13 cannot).

    $(scripts/venv-path.sh)/bin/python test/zoo/spatial_grad_check.py --bin build/bin --workdir DIR

Each model predicts an affine transform theta = identity + a linear map of
its input, builds the grid with F.affine_grid, resamples the input with
F.grid_sample, and ends in a convolution and a cross-entropy loss, so that
the gradient reaches the sampler's input, the grid and theta's weights:
  bilinear-zeros      2-d, bilinear, zeros padding, align_corners=False
  bicubic-border      2-d, bicubic, border padding, align_corners=True
  bilinear-reflection 2-d, bilinear, reflection padding
  trilinear-zeros     3-d (a volume), trilinear, zeros padding
test/torch/grad_check.py compares every parameter's gradient (max rel err
<= 1e-4) and the loss. Ends with "N passed, M failed".
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
import grad_check  # noqa: E402
from check_runner import run_checks  # noqa: E402


class SpatialTransformer(nn.Module):
    def __init__(self, mode, padding, align, dims):
        super().__init__()
        self.mode, self.padding, self.align, self.dims = mode, padding, align, dims
        r = len(dims)
        n_in = 2
        for d in dims:
            n_in *= d
        self.loc = nn.Linear(n_in, r * (r + 1))
        nn.init.normal_(self.loc.weight, std=0.02)
        self.register_buffer("identity", torch.eye(r, r + 1).flatten())
        conv = nn.Conv2d if r == 2 else nn.Conv3d
        self.conv = conv(2, 3, 3, padding=1)
        self.head = nn.Linear(3, 4)

    def forward(self, x):
        r = len(self.dims)
        theta = (self.identity + self.loc(x.flatten(1))).view(-1, r, r + 1)
        grid = F.affine_grid(theta, list(x.shape), align_corners=self.align)
        y = F.grid_sample(x, grid, mode=self.mode, padding_mode=self.padding,
                          align_corners=self.align)
        feat = torch.relu(self.conv(y)).flatten(2).mean(-1)
        return self.head(feat)


CASES = {
    "bilinear-zeros": ("bilinear", "zeros", False, (6, 7)),
    "bicubic-border": ("bicubic", "border", True, (6, 7)),
    "bilinear-reflection": ("bilinear", "reflection", False, (6, 7)),
    "trilinear-zeros": ("bilinear", "zeros", False, (3, 4, 5)),
}


def check(env, name):
    mode, padding, align, dims = CASES[name]
    torch.manual_seed(0)
    model = grad_check.WithLoss(SpatialTransformer(mode, padding, align, dims), "ce")
    x = torch.randn(2, 2, *dims)
    ok = grad_check.check_built(name, model, (x, torch.tensor([1, 3])), ["x", "labels"], 20,
                                *env)
    return ok, "parameter gradients against PyTorch float64 (the line above)"


def main():
    return run_checks(lambda bin_dir, work: (bin_dir, work), check, list(CASES))


if __name__ == "__main__":
    sys.exit(main())
