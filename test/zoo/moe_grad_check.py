#!/usr/bin/env python3
"""Gradients of a Mixture-of-Experts model after one step, merak vs PyTorch
float64 (the venv's torch and transformers, TorchScript exporter, opset 17).

    $(scripts/venv-path.sh)/bin/python test/zoo/moe_grad_check.py --bin build/bin --workdir DIR

The models are test/zoo/zoo.py's scaled-down Hugging Face MoE models (4
experts, top-2, random weights) with a next-token cross-entropy as the
output. test/torch/grad_check.py compares every parameter's gradient (the
routers' and the experts' among them: max rel err <= 1e-4) and the loss;
no gradient flows through the top-k indices, in either:
  mixtral         batched_mm experts (merak.expert_matmul from the export)
  mixtral-sparse  transformers' eager experts (the traced per-expert loop,
                  batched by the importer: lib/Import/ExpertLoops.cpp)
  mixtral-modules transformers 4.x's block (a module per expert, a loop over
                  range(E): the experts' weights stacked by the importer)
  gpt-oss-sparse  GPT-OSS's eager experts ([E, in, out] weights, per-expert
                  biases, clamped SwiGLU)
Ends with "N passed, M failed".
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
import grad_check  # noqa: E402
import zoo  # noqa: E402
from check_runner import run_checks  # noqa: E402


class NextTokenLoss(nn.Module):
    """grad_check's layout: the model as `m`, the loss as the output."""

    def __init__(self, model):
        super().__init__()
        self.m, self.proj = model, []

    def forward(self, ids):
        logits = self.m(ids)
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)),
                               ids[:, 1:].reshape(-1))


def check(env, name):
    module, _ = zoo.build(name)
    torch.manual_seed(1)
    ids = torch.randint(0, zoo.VOCAB, (zoo.B, zoo.T))
    ok = grad_check.check_built(name, NextTokenLoss(module), (ids,), ["input_ids"], 17, *env)
    return ok, "parameter gradients against PyTorch float64 (the line above)"


def main():
    return run_checks(lambda bin_dir, work: (bin_dir, work), check,
                      ["mixtral", "mixtral-sparse", "mixtral-modules", "gpt-oss-sparse"])


if __name__ == "__main__":
    sys.exit(main())
