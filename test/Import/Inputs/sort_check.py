"""Inputs and expected outputs of sort.onnxtxt, by numpy's stable argsort:
x [2, 300] floats with ties and infinities, e [600] expert ids."""
import os
import sys

import numpy as np

out = sys.argv[1]
rng = np.random.default_rng(0)
x = np.round(rng.standard_normal((2, 300)) * 4).astype(np.float32) / 4
x[0, 7], x[1, 100] = np.inf, -np.inf
e = rng.integers(0, 8, 600).astype(np.int64)
# Ascending: stable. Descending: stable among ties (the smaller position first).
up = np.argsort(x, axis=1, kind="stable")
down = np.argsort(-x, axis=1, kind="stable")[:, :5]
order = np.argsort(e, kind="stable")
outputs = [("sv", np.take_along_axis(x, up, 1)), ("si", up),
           ("tv", np.take_along_axis(x, down, 1)), ("ti", down),
           ("ev", e[order]), ("ei", order)]
for name, a in [("x", x), ("e", e)] + outputs:
    np.save(os.path.join(out, name + ".npy"), a)
