#!/usr/bin/env python3
"""The importer's window and sampling decompositions on cases ONNX's node
tests do not cover, against onnxruntime (venv).

    $(scripts/venv-path.sh)/bin/python test/zoo/window_ops_check.py --bin build/bin --workdir DIR

Each case is a one-node ONNX model run by merak-run and by onnxruntime on
the same random inputs; outputs must agree to 1e-5 relative (exactly for
gathers):
  ConvTranspose 3-d and 2-d with output_shape smaller than the full extent
  (cropped by pads the spec computes, the larger half at the end) and larger
  (zeros at the end), and SAME_UPPER with an odd total;
  GridSample nearest in float16 on a 48x48 input (its linear index beyond
  float16's exact integers) against onnxruntime in float32;
  3-d AveragePool with ceil_mode, dilations and count_include_pad, and LpPool
  p = 3 with pads and ceil_mode.
Ends with "N passed, M failed".
"""
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "torch"))
from check_runner import run_checks  # noqa: E402

RNG = np.random.default_rng(7)


def model(op, inputs, attrs, opset=22):
    vi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
          for n, v in inputs]
    out = helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)
    node = helper.make_node(op, [n for n, _ in inputs], ["y"], **attrs)
    m = helper.make_model(helper.make_graph([node], "g", vi, [out]),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return onnx.shape_inference.infer_shapes(m)  # the output's type, which onnxruntime needs


def merak_outputs(bin_dir, work, name, m, inputs, count=1):
    """merak-run's first `count` outputs of model `m` on `inputs` (name, array)."""
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "m.onnx")
    onnx.save(m, path)
    cmd = [os.path.join(bin_dir, "merak-run"), path, "--output-dir", os.path.join(d, "out"),
           "--output-format", "npy"]
    for n, v in inputs:
        np.save(os.path.join(d, n + ".npy"), v)
        cmd += ["--input", os.path.join(d, n + ".npy")]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError("merak-run failed: " + (p.stdout + p.stderr)[-400:])
    return [np.load(os.path.join(d, "out", "output_%d.npy" % i)) for i in range(count)]


def merak(bin_dir, work, name, m, inputs):
    return merak_outputs(bin_dir, work, name, m, inputs)[0]


def reference(m, inputs):
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {n: v for n, v in inputs})[0]


def case(env, name):
    op, inputs, attrs, exact, ref_inputs = CASES[name]
    bin_dir, work = env
    m = model(op, inputs, attrs)
    got = merak(bin_dir, work, name, m, inputs)
    want = reference(model(op, ref_inputs or inputs, attrs), ref_inputs or inputs)
    if got.shape != want.shape:
        return False, "shape %s, onnxruntime %s" % (got.shape, want.shape)
    err = float(np.abs(got.astype(np.float64) - want).max()) / max(
        float(np.abs(want).max()), 1e-30)
    return err <= (0 if exact else 1e-5), "rel err %.1e" % err


def cases():
    """{name: (op, inputs, attributes, exact, onnxruntime's inputs or None)}."""
    f = lambda *s: RNG.standard_normal(s).astype(np.float32)  # noqa: E731
    x3, w3 = f(1, 4, 3, 4, 3), f(4, 3, 3, 2, 3)
    x2, w2 = f(1, 4, 3, 4), f(4, 3, 2, 3)
    # A grid on the pixel centres of a 48x48 input (align_corners=1).
    side = 48
    ij = np.stack(np.meshgrid(np.arange(side), np.arange(side), indexing="xy"), -1)
    grid = (ij * 2.0 / (side - 1) - 1)[None].astype(np.float32)
    img = f(1, 2, side, side)
    yield "convtranspose3d-output-shape-small", (
        "ConvTranspose", [("x", x3), ("w", w3)], dict(strides=[2, 2, 2], output_shape=[6, 8, 6]),
        False, None)
    yield "convtranspose3d-output-shape-large", (
        "ConvTranspose", [("x", x3), ("w", w3)], dict(strides=[2, 2, 2], output_shape=[8, 9, 7]),
        False, None)
    yield "convtranspose2d-output-shape", (
        "ConvTranspose", [("x", x2), ("w", w2)], dict(strides=[2, 2], output_shape=[6, 8]),
        False, None)
    yield "convtranspose3d-same-upper", (
        "ConvTranspose", [("x", x3), ("w", w3)], dict(strides=[2, 2, 2], auto_pad="SAME_UPPER"),
        False, None)
    half = lambda a: a.astype(np.float16)  # noqa: E731
    yield "gridsample-f16-nearest-48", (
        "GridSample", [("x", half(img)), ("g", half(grid))],
        dict(mode="nearest", align_corners=1), True,
        [("x", half(img).astype(np.float32)), ("g", half(grid).astype(np.float32))])
    yield "averagepool3d-ceil-dilated-include-pad", (
        "AveragePool", [("x", f(1, 2, 5, 6, 7))],
        dict(kernel_shape=[2, 3, 2], strides=[2, 2, 3], dilations=[2, 1, 2],
             pads=[1, 1, 0, 1, 0, 1], ceil_mode=1, count_include_pad=1), False, None)
    yield "lppool3d-p3-pads-ceil", (
        "LpPool", [("x", f(1, 2, 5, 6, 7))],
        dict(kernel_shape=[2, 2, 3], strides=[2, 2, 2], pads=[1, 0, 1, 0, 1, 1], p=3,
             ceil_mode=1), False, None)

CASES = dict(cases())


def main():
    return run_checks(lambda bin_dir, work: (bin_dir, work), case, list(CASES))


if __name__ == "__main__":
    sys.exit(main())
