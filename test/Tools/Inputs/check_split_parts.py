"""Writes token ids for a whole batch and its two halves, or compares a
model's whole-batch output with its parts' outputs.

    check_split_parts.py ids DIR           ids.npy [4, 3], ids0.npy / ids1.npy [2, 3]
    check_split_parts.py compare WHOLE PART0 PART1

The parts (merak-split-batch=parts=2, evaluated by merak-run) must equal
the rows of the whole batch they hold, to 1e-6."""
import os
import sys

import numpy as np

if sys.argv[1] == "ids":
    ids = np.array([[3, 7, 1], [15, 0, 9], [4, 4, 12], [8, 2, 6]], dtype=np.int64)
    np.save(os.path.join(sys.argv[2], "ids.npy"), ids)
    np.save(os.path.join(sys.argv[2], "ids0.npy"), ids[:2])
    np.save(os.path.join(sys.argv[2], "ids1.npy"), ids[2:])
else:
    whole, p0, p1 = (np.load(p) for p in sys.argv[2:5])
    parts = np.concatenate([p0, p1])
    assert parts.shape == whole.shape, (parts.shape, whole.shape)
    err = float(np.max(np.abs(parts - whole)))
    assert err <= 1e-6, err
    print("parts equal the whole batch (max |diff| %.1e)" % err)
