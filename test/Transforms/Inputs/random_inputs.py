"""Random float32 inputs for a lit test.

    random_inputs.py OUTDIR SEED SHAPE... [--mask SHAPE]

Writes OUTDIR/in0.npy, in1.npy, ... uniform in [-1, 1), one per SHAPE
(dims joined by x: 2x4x16); a SHAPE given after --mask is a 0/1 mask
instead (about a quarter ones, none in the first key column, so that no
row is hidden entirely).
"""
import os
import sys

import numpy as np

out, seed = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(seed)
mask = False
index = 0
for arg in sys.argv[3:]:
    if arg == "--mask":
        mask = True
        continue
    shape = [int(d) for d in arg.split("x")]
    if mask:
        a = (rng.uniform(0, 1, shape) < 0.25).astype(np.float32)
        a[..., 0] = 0
    else:
        a = rng.uniform(-1, 1, shape).astype(np.float32)
    np.save(os.path.join(out, "in%d.npy" % index), a)
    index += 1
    mask = False
