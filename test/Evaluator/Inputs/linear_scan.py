"""Inputs and PyTorch references of test/Evaluator/linear-scan.mlir.

    linear_scan.py OUTDIR

in0..in5: a, b, w of shape 2x5x3 (float64, scanned along axis 1) and of
shape 4x3 (float32, along axis 0). out0..out5: per case the states h of
h[t] = a[t] h[t-1] + b[t] (a loop of torch ops, from zero) and the
gradients of sum(w * h) with respect to a and b (torch.autograd).
"""
import os
import sys

import numpy as np
import torch

out = sys.argv[1]
rng = np.random.default_rng(11)
ins, outs = [], []
for shape, axis, dtype in (((2, 5, 3), 1, np.float64), ((4, 3), 0, np.float32)):
    a, b, w = (rng.uniform(-1.2, 1.2, shape).astype(dtype) for _ in range(3))
    ins += [a, b, w]
    ta = torch.tensor(a, dtype=torch.float64, requires_grad=True)
    tb = torch.tensor(b, dtype=torch.float64, requires_grad=True)
    state = torch.zeros_like(ta.select(axis, 0))
    states = []
    for t in range(shape[axis]):
        state = ta.select(axis, t) * state + tb.select(axis, t)
        states.append(state)
    h = torch.stack(states, axis)
    (h * torch.tensor(w, dtype=torch.float64)).sum().backward()
    outs += [h.detach().numpy().astype(dtype), ta.grad.numpy().astype(dtype),
             tb.grad.numpy().astype(dtype)]
for prefix, arrays in (("in", ins), ("out", outs)):
    for i, x in enumerate(arrays):
        np.save(os.path.join(out, "%s%d.npy" % (prefix, i)), x)
