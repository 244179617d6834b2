"""Einsum equations against numpy.einsum: for each, an ONNX model (opset 12
Einsum of graph inputs) is run by merak-run with random inputs and
--expect numpy's result (float64 inputs, so the tolerance is tight).

    python3 einsum_check.py MERAK_RUN WORKDIR

Prints one line per equation and ends with "N passed, M failed".
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

CASES = [
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),  # attention scores
    ("i,j->ij", [(4,), (3,)]),                          # outer product (rotary)
    ("ij,jk", [(3, 4), (4, 2)]),                        # implicit output
    ("bij->bji", [(2, 3, 4)]),                          # transpose
    ("ij->", [(3, 4)]),                                 # sum
    ("ii->i", [(4, 4)]),                                # diagonal
    ("ii", [(4, 4)]),                                   # trace
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),  # broadcast batch
    ("abc,cd,de->abe", [(2, 3, 4), (4, 5), (5, 2)]),    # three operands
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),     # bilinear
    ("bij,bij->b", [(2, 3, 4), (2, 3, 4)]),             # batched inner product
    ("b...j,jk->...kb", [(2, 3, 4), (4, 5)]),           # ellipsis in the middle
]


def main():
    merak_run, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(0)
    passed = failed = 0
    for k, (eq, shapes) in enumerate(CASES):
        xs = [rng.standard_normal(s) for s in shapes]
        want = np.einsum(eq, *xs)
        names = ["x%d" % i for i in range(len(xs))]
        node = helper.make_node("Einsum", names, ["y"], equation=eq)
        graph = helper.make_graph(
            [node], "einsum",
            [helper.make_tensor_value_info(nm, TensorProto.DOUBLE, list(x.shape))
             for nm, x in zip(names, xs)],
            [helper.make_tensor_value_info("y", TensorProto.DOUBLE, list(want.shape))])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])
        path = os.path.join(work, "einsum%d.onnx" % k)
        onnx.save(model, path)
        cmd = [merak_run, path]
        for i, x in enumerate(xs):
            f = os.path.join(work, "einsum%d_x%d.npy" % (k, i))
            np.save(f, x)
            cmd += ["--input", f]
        exp = os.path.join(work, "einsum%d_y.npy" % k)
        np.save(exp, np.asarray(want))
        cmd += ["--expect", exp, "--rtol", "1e-12", "--atol", "1e-12"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        ok = r.returncode == 0
        passed += ok
        failed += not ok
        print("%s %s %s" % ("PASS" if ok else "FAIL", eq,
                            "" if ok else (r.stdout + r.stderr).strip()[-400:]))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
