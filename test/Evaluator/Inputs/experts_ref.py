"""Inputs and numpy references of test/Evaluator/experts.mlir."""
import os
import sys

import numpy as np

out = sys.argv[1]
rng = np.random.default_rng(0)
x = rng.standard_normal((8, 5)).astype(np.float32)
w = rng.standard_normal((4, 6, 5)).astype(np.float32)
g = rng.standard_normal((8, 6)).astype(np.float32)
e = np.array([2, 0, 1, 2, 2, 0, 1, 0], np.int64)  # expert 3: no rows
x64, w64, g64 = x.astype(np.float64), w.astype(np.float64), g.astype(np.float64)
y = np.stack([w64[e[s]] @ x64[s] for s in range(8)])
dw = np.zeros((4, 6, 5))
for s in range(8):
    dw[e[s]] += np.outer(g64[s], x64[s])
yt = np.stack([w64[e[s]].T @ g64[s] for s in range(8)])
wdw = w64 + dw  # into an accumulator (w): expert 3 keeps its values
bad = e.copy()
bad[2] = 4
for name, t in [("x", x), ("w", w), ("g", g), ("e", e), ("bad", bad), ("y", y.astype(np.float32)),
                ("dw", dw.astype(np.float32)), ("yt", yt.astype(np.float32)),
                ("wdw", wdw.astype(np.float32))]:
    np.save(os.path.join(out, name + ".npy"), t)
