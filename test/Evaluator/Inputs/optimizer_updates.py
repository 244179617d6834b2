"""Inputs and references of test/Evaluator/optimizer-updates.mlir.

    optimizer_updates.py OUTDIR

Two steps (step 0 and step 1) of each fused update op. References:
torch.optim.AdamW and torch.optim.SGD (Nesterov momentum, weight decay)
themselves, with the gradient scaled by the clip coefficient by hand, and
Adan from the paper's Algorithm 1 in float64 (torch has no Adan).
"""
import os
import sys

import numpy as np
import torch

out = sys.argv[1]
rng = np.random.default_rng(11)
f32 = lambda a: np.asarray(a, np.float32)
n = 6
p0 = f32(rng.uniform(-1, 1, n))
g0 = f32(rng.uniform(-1, 1, n))
g1 = f32(rng.uniform(-1, 1, n))
lr, clip = np.float32(0.05), np.float32(0.8)
ins = [p0, g0, g1, lr, clip, np.array(0, np.int64), np.array(1, np.int64)]
for i, a in enumerate(ins):
    np.save(os.path.join(out, "in%d.npy" % i), a)


def torch_steps(make):
    p = torch.nn.Parameter(torch.tensor(p0, dtype=torch.float64))
    opt = make([p])
    for g in (g0, g1):
        p.grad = torch.tensor(g, dtype=torch.float64) * float(clip)
        opt.step()
    return p.detach().numpy()


adamw = torch_steps(lambda ps: torch.optim.AdamW(ps, lr=float(lr), betas=(0.9, 0.999),
                                                 eps=1e-8, weight_decay=0.1))
sgd = torch_steps(lambda ps: torch.optim.SGD(ps, lr=float(lr), momentum=0.9, nesterov=True,
                                             weight_decay=0.1))

# Adan (merak's convention: betas weigh the new term).
b1, b2, b3, eps, wd = 0.02, 0.08, 0.01, 1e-8, 0.1
p = p0.astype(np.float64)
for step, g in enumerate((g0, g1)):
    g = g.astype(np.float64) * float(clip)
    if step == 0:
        m, d, nsq = g, np.zeros(n), g * g
    else:
        diff = g - prev
        m = (1 - b1) * m + b1 * g
        d = (1 - b2) * d + b2 * diff
        u = g + (1 - b2) * diff
        nsq = (1 - b3) * nsq + b3 * u * u
    eta = float(lr) / (np.sqrt(nsq) + eps)
    p = (p - eta * (m + (1 - b2) * d)) / (1 + wd * float(lr))
    prev = g

for i, a in enumerate([adamw, sgd, p]):
    np.save(os.path.join(out, "out%d.npy" % i), f32(a))
