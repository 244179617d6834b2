"""Inputs and expected outputs of expert-segments.onnxtxt: rows 6 x 2, the
segment sizes from argv[2], each row through its segment's expert."""
import os
import sys

import numpy as np

out, sizes = sys.argv[1], np.array([int(s) for s in sys.argv[2].split(",")], dtype=np.int64)
x = (np.arange(12, dtype=np.float32).reshape(6, 2) - 5) / 4
w = np.array([1, 2, 3, 4, 5, 6, -1, -2, -3, -4, -5, -6, 0.5, 1, 1.5, 2, 2.5, 3],
             dtype=np.float32).reshape(3, 3, 2)
b = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9], dtype=np.float32).reshape(3, 3)
v = np.array([1, 0, -1, 2, 0, -2, 3, 1, -3, 1, 0, 2, -1, 1, 1, 0.5, 0.25, -0.5],
             dtype=np.float32).reshape(3, 2, 3)
expert = np.repeat(np.arange(3), sizes)
y = np.stack([x[r] @ w[e].T + b[e] for r, e in enumerate(expert)])
z = np.stack([x[r] @ v[e] for r, e in enumerate(expert)])
for name, a in [("x", x), ("sizes", sizes), ("y", y), ("z", z)]:
    np.save(os.path.join(out, name + ".npy"), a)
