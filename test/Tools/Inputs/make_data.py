#!/usr/bin/env python3
"""Tensor files for the merak-run tests; expected values come from numpy
formulas, never from merak itself.

    make_data.py mlp DIR          inputs and expectations of Inputs/mlp.onnxtxt
    make_data.py testdata DIR     DIR/test_data_set_{0,1}/ in ONNX's layout
    make_data.py check DIR EXT    loads DIR/output_N.EXT back, compares them
                                  with the expected values, prints a report
    make_data.py reshape DIR      files for Inputs/reshape-by-input.onnxtxt
"""
import os
import sys

import numpy as np
from onnx import TensorProto, numpy_helper

W = ((np.arange(12, dtype=np.float32).reshape(3, 4) - 5) / 4).astype(np.float32)


def mlp_inputs(seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    return x, b


def mlp_outputs(x, b):
    y = np.maximum(x.astype(np.float64) @ W.astype(np.float64) + b, 0.0)
    e = np.exp(y - y.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    return y.astype(np.float32), p.astype(np.float32), np.argmax(p, axis=1).astype(np.int64)


def save_pb(path, array, name):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(array, name).SerializeToString())


def save_both(d, stem, array, name):
    np.save(os.path.join(d, stem + ".npy"), array)
    save_pb(os.path.join(d, stem + ".pb"), array, name)


def cmd_mlp(d):
    os.makedirs(d, exist_ok=True)
    x, b = mlp_inputs(0)
    y, p, cls = mlp_outputs(x, b)
    for stem, arr, name in (("x", x, "x"), ("b", b, "b"), ("y", y, "y"), ("p", p, "p"),
                            ("cls", cls, "cls")):
        save_both(d, stem, arr, name)
    # Wrong files for the error tests.
    np.save(os.path.join(d, "x_f64.npy"), x.astype(np.float64))
    np.save(os.path.join(d, "x_3x2.npy"), x.reshape(3, 2))
    np.save(os.path.join(d, "x_c8.npy"), np.zeros((2, 3), np.complex64))
    np.save(os.path.join(d, "x_fortran.npy"), np.asfortranarray(x))
    y_off = y.copy()
    y_off[1, 2] += 0.5
    np.save(os.path.join(d, "y_off.npy"), y_off)
    np.save(os.path.join(d, "y_1x8.npy"), y.reshape(1, 8))
    cls_off = cls.copy()
    cls_off[0] += 1
    np.save(os.path.join(d, "cls_off.npy"), cls_off)
    with open(os.path.join(d, "not_a_tensor.npy"), "wb") as f:
        f.write(b"just text\n")
    with open(os.path.join(d, "not_a_tensor.pb"), "wb") as f:
        f.write(b"\xff\xff\xff\xff garbage")
    # A little-tolerance case: y scaled by (1 + 1e-4).
    np.save(os.path.join(d, "y_close.npy"), (y * np.float32(1 + 1e-4)).astype(np.float32))


def cmd_testdata(d):
    for k in range(2):
        sd = os.path.join(d, "test_data_set_%d" % k)
        os.makedirs(sd, exist_ok=True)
        x, b = mlp_inputs(10 + k)
        for i, (arr, name) in enumerate(((x, "x"), (b, "b"))):
            save_pb(os.path.join(sd, "input_%d.pb" % i), arr, name)
        for i, (arr, name) in enumerate(zip(mlp_outputs(x, b), ("y", "p", "cls"))):
            save_pb(os.path.join(sd, "output_%d.pb" % i), arr, name)


def load(path):
    if path.endswith(".npy"):
        return np.load(path), None
    t = TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t), t.name


def cmd_check(d, ext):
    x, b = mlp_inputs(0)
    for i, (exp, name) in enumerate(zip(mlp_outputs(x, b), ("y", "p", "cls"))):
        got, pb_name = load(os.path.join(d, "output_%d.%s" % (i, ext)))
        same = got.dtype == exp.dtype and got.shape == exp.shape and \
            np.allclose(got, exp, rtol=1e-5, atol=1e-6)
        print("output_%d.%s: dtype %s shape %s name %s %s" %
              (i, ext, got.dtype, list(got.shape), pb_name,
               "matches" if same else "DIFFERS"))


def cmd_reshape(d):
    os.makedirs(d, exist_ok=True)
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    shape = np.array([3, 4], np.int64)
    save_both(d, "x", x, "x")
    save_both(d, "shape", shape, "shape")
    save_both(d, "y", x.reshape(3, 4), "y")
    np.save(os.path.join(d, "shape_i32.npy"), shape.astype(np.int32))
    np.save(os.path.join(d, "shape3.npy"), np.array([3, 4, 1], np.int64))
    sd = os.path.join(d, "case", "test_data_set_0")
    os.makedirs(sd, exist_ok=True)
    save_pb(os.path.join(sd, "input_0.pb"), x, "x")
    save_pb(os.path.join(sd, "input_1.pb"), shape, "shape")
    save_pb(os.path.join(sd, "output_0.pb"), x.reshape(3, 4), "y")


def main():
    cmd = sys.argv[1]
    if cmd == "mlp":
        cmd_mlp(sys.argv[2])
    elif cmd == "testdata":
        cmd_testdata(sys.argv[2])
    elif cmd == "check":
        cmd_check(sys.argv[2], sys.argv[3])
    elif cmd == "reshape":
        cmd_reshape(sys.argv[2])
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
