"""Inputs and numpy references of test/Evaluator/fused-backward.mlir.

    fused_backward.py OUTDIR

Writes in0.npy.. (the function's arguments in order) and out0.npy.. (its
results), each computed in float64 from the formulas of the merak ops and
saved in the result's element type.
"""
import math
import os
import sys

import numpy as np

out = sys.argv[1]
rng = np.random.default_rng(7)


def save(prefix, arrays):
    for i, a in enumerate(arrays):
        np.save(os.path.join(out, "%s%d.npy" % (prefix, i)), a)


f32 = lambda a: np.asarray(a, np.float32)
x = f32(rng.uniform(-4, 4, (3, 4)))
g = f32(rng.uniform(-1, 1, (3, 4)))
z = rng.uniform(-3, 3, (3, 4))
e0 = np.exp(z - z.max(0, keepdims=True))
y0 = f32(e0 / e0.sum(0, keepdims=True))
y1 = f32(z - z.max(1, keepdims=True) - np.log(np.exp(z - z.max(1, keepdims=True)).sum(1, keepdims=True)))
n = rng.uniform(-2, 2, (2, 3, 4))
ng = rng.uniform(-1, 1, (2, 3, 4))
w = rng.uniform(0.5, 1.5, (4,))
logits = f32(rng.uniform(-3, 3, (4, 5)))
labels = np.array([1, -100, 4, 0], np.int64)
s = np.array(1.5, np.float32)
u = rng.uniform(-2, 2, (2, 3, 2))
k = np.array([[0, 2], [1, 1]], np.int32)
ug = rng.uniform(-1, 1, (2, 2))
save("in", [x, g, y0, y1, n, ng, w, logits, labels, s, u, k, ug])

X, G = x.astype(np.float64), g.astype(np.float64)
erf = np.vectorize(math.erf)
exact = 0.5 * (1 + erf(X / math.sqrt(2))) + X * np.exp(-0.5 * X * X) / math.sqrt(2 * math.pi)
c, a = math.sqrt(2 / math.pi), 0.044715
t = np.tanh(c * (X + a * X ** 3))
approx = 0.5 * (1 + t) + 0.5 * X * (1 - t * t) * c * (1 + 3 * a * X * X)
Y0, Y1 = y0.astype(np.float64), y1.astype(np.float64)
sm = Y0 * (G - (G * Y0).sum(0, keepdims=True))
lsm = G - np.exp(Y1) * G.sum(1, keepdims=True)


def norm(xv, gv, scale, axes, eps, rms):
    mean = 0 if rms else xv.mean(axes, keepdims=True)
    rstd = 1 / np.sqrt(((xv - mean) ** 2).mean(axes, keepdims=True) + eps)
    xhat = (xv - mean) * rstd
    gs = gv * scale
    inner = gs - xhat * (gs * xhat).mean(axes, keepdims=True)
    if not rms:
        inner -= gs.mean(axes, keepdims=True)
    return rstd * inner, xhat


ln_dx, ln_xhat = norm(n, ng, w, (2,), 1e-5, False)
rms_dx, rms_xhat = norm(n, ng, 1.0, (1, 2), 0.1, True)


def ce_grad(lg, lab, wts, axis):
    lg = np.moveaxis(lg.astype(np.float64), axis, -1)
    p = np.exp(lg - lg.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    hot = (np.arange(lg.shape[-1]) == lab[..., None]).astype(np.float64)
    d = (p - hot) * wts[..., None]
    return np.moveaxis(d, -1, axis)


valid = labels != -100
mean = ce_grad(logits, labels, np.where(valid, float(s) / valid.sum(), 0.0), 1)
none = ce_grad(u, k, ug, 1)
save("out", [f32(G * exact), f32(G * approx), f32(sm), f32(lsm), ln_dx, ln_xhat, rms_dx,
             rms_xhat, f32(mean), none])
