"""Inputs and PyTorch references of test/Evaluator/selective-scan.mlir.

    selective_scan.py OUTDIR

Per case (float64 with B, D, T, N = 2, 5, 4, 3; float32 with 1, 3, 6, 2):
in: u, delta [B, D, T], a [D, N], b, c [B, T, N], w [B, D, T];
out: y of the selective scan as transformers' Mamba computes it without
mamba-ssm (the [B, D, T, N] discretisation and a loop over the tokens),
then the gradients of sum(w * y) with respect to u, delta, a, b and c
(torch.autograd).
"""
import os
import sys

import numpy as np
import torch

out = sys.argv[1]
rng = np.random.default_rng(5)
ins, outs = [], []
for (batch, channels, tokens, states), dtype in (((2, 5, 4, 3), np.float64),
                                                 ((1, 3, 6, 2), np.float32)):
    u = rng.uniform(-1.5, 1.5, (batch, channels, tokens))
    delta = rng.uniform(0.05, 1.2, (batch, channels, tokens))
    a = -rng.uniform(0.2, 2.0, (channels, states))
    b, c = (rng.uniform(-1.2, 1.2, (batch, tokens, states)) for _ in range(2))
    w = rng.uniform(-1.0, 1.0, (batch, channels, tokens))
    arrays = [x.astype(dtype) for x in (u, delta, a, b, c, w)]
    ins += arrays
    tu, td, ta, tb, tc = (torch.tensor(x, dtype=torch.float64, requires_grad=True)
                          for x in arrays[:5])
    decay = torch.exp(ta[None, :, None, :] * td[:, :, :, None])
    inputs = td[:, :, :, None] * tb[:, None, :, :] * tu[:, :, :, None]
    state = torch.zeros(batch, channels, states, dtype=torch.float64)
    ys = []
    for t in range(tokens):
        state = decay[:, :, t, :] * state + inputs[:, :, t, :]
        ys.append(torch.matmul(state, tc[:, t, :].unsqueeze(-1))[:, :, 0])
    y = torch.stack(ys, dim=-1)
    (y * torch.tensor(arrays[5], dtype=torch.float64)).sum().backward()
    outs += [x.detach().numpy().astype(dtype)
             for x in (y, tu.grad, td.grad, ta.grad, tb.grad, tc.grad)]
for prefix, arrays in (("in", ins), ("out", outs)):
    for i, x in enumerate(arrays):
        np.save(os.path.join(out, "%s%d.npy" % (prefix, i)), x)
