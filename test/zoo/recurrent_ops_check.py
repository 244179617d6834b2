#!/usr/bin/env python3
"""RNN, GRU and LSTM (lib/Import/OnnxOpsRecurrent.cpp) on what ONNX's node
tests do not cover, against onnxruntime (venv).

    $(scripts/venv-path.sh)/bin/python test/zoo/recurrent_ops_check.py --bin build/bin --workdir DIR

Each case is a one-node ONNX model run by merak-run and by onnxruntime on
the same random inputs; every output (Y, Y_h, Y_c) must agree to 1e-5
relative:
  lstm-bi-lens   bidirectional LSTM with sequence_lens (the reverse
                 direction starts each row at its own last step), initial
                 states, peepholes and biases
  gru-reverse-lens  reverse GRU with sequence_lens, linear_before_reset 0
  gru-bi-lbr1    bidirectional GRU, linear_before_reset 1 (torch's), an
                 initial state
  gru-bi-layout1 the same batch-first (layout 1, which onnxruntime's GRU
                 lacks: against its layout-0 run on the transposed inputs)
  rnn-activations   bidirectional RNN with LeakyRelu and ScaledTanh (their
                 alpha/beta taken in order) and clip
  lstm-activations  LSTM with HardSigmoid, Tanh and Softsign gates
Ends with "N passed, M failed".
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "torch"))
from check_runner import run_checks  # noqa: E402
from window_ops_check import merak_outputs  # noqa: E402

RNG = np.random.default_rng(11)
T, B, I, H = 5, 3, 4, 3


def f(*shape):
    return (RNG.standard_normal(shape) * 0.5).astype(np.float32)


def model(op, inputs, attrs, outputs):
    """`inputs`: (name, array or None for an absent optional input)."""
    vi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
          for n, v in inputs if v is not None]
    outs = [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outputs]
    node = helper.make_node(op, [n if v is not None else "" for n, v in inputs], outputs,
                            **attrs)
    m = helper.make_model(helper.make_graph([node], "g", vi, outs),
                          opset_imports=[helper.make_opsetid("", 22)])
    m.ir_version = 10
    return onnx.shape_inference.infer_shapes(m)


def batch_first(case):
    """A layout-0 case as layout 1: X [B, T, I], states [B, D, H]; the
    outputs' permutations back to layout 0's."""
    op, inputs, attrs, outputs = case
    moved = [(n, None if v is None else v.transpose(1, 0, 2) if n in ("x", "h0", "c0") else v)
             for n, v in inputs]
    return (op, moved, dict(attrs, layout=1), outputs), [(1, 2, 0, 3), (1, 0, 2), (1, 0, 2)]


def case(env, name):
    op, inputs, attrs, outputs = CASES[name]
    perms = [None] * 3
    ref_inputs = inputs
    if name.endswith("-layout1"):
        (op, inputs, attrs, outputs), perms = batch_first(CASES[name])
    bin_dir, work = env
    m = model(op, inputs, attrs, outputs)
    present = [(n, v) for n, v in inputs if v is not None]
    gots = merak_outputs(bin_dir, work, name, m, present, len(outputs))
    ref = model(*CASES[name]) if perms[0] else m
    sess = ort.InferenceSession(ref.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {n: v for n, v in ref_inputs if v is not None})
    worst = 0.0
    for i, (w, got) in enumerate(zip(want, gots)):
        if perms[i]:
            got = got.transpose(perms[i])
        if got.shape != w.shape:
            return False, "output %d: shape %s, onnxruntime %s" % (i, got.shape, w.shape)
        worst = max(worst, float(np.abs(got - w).max()) / max(float(np.abs(w).max()), 1e-30))
    return worst <= 1e-5, "%d outputs, max rel err %.1e" % (len(want), worst)


def cases():
    """{name: (op, inputs, attributes, outputs)}."""
    lens = np.array([5, 3, 1], dtype=np.int32)
    yield "lstm-bi-lens", ("LSTM", [
        ("x", f(T, B, I)), ("w", f(2, 4 * H, I)), ("r", f(2, 4 * H, H)), ("b", f(2, 8 * H)),
        ("lens", lens), ("h0", f(2, B, H)), ("c0", f(2, B, H)), ("p", f(2, 3 * H))],
        dict(hidden_size=H, direction="bidirectional"), ["y", "yh", "yc"])
    yield "gru-reverse-lens", ("GRU", [
        ("x", f(T, B, I)), ("w", f(1, 3 * H, I)), ("r", f(1, 3 * H, H)), ("b", f(1, 6 * H)),
        ("lens", np.array([2, 5, 4], dtype=np.int32))],
        dict(hidden_size=H, direction="reverse", linear_before_reset=0), ["y", "yh"])
    gru = ("GRU", [
        ("x", f(T, B, I)), ("w", f(2, 3 * H, I)), ("r", f(2, 3 * H, H)), ("b", f(2, 6 * H)),
        ("lens", None), ("h0", f(2, B, H))],
        dict(hidden_size=H, direction="bidirectional", linear_before_reset=1), ["y", "yh"])
    yield "gru-bi-lbr1", gru
    yield "gru-bi-layout1", gru
    yield "rnn-activations", ("RNN", [
        ("x", f(T, B, I)), ("w", f(2, H, I)), ("r", f(2, H, H)), ("b", f(2, 2 * H))],
        dict(hidden_size=H, direction="bidirectional", activations=["LeakyRelu", "ScaledTanh"],
             activation_alpha=[0.1, 0.7], activation_beta=[1.3], clip=1.5), ["y", "yh"])
    yield "lstm-activations", ("LSTM", [
        ("x", f(T, B, I)), ("w", f(1, 4 * H, I)), ("r", f(1, 4 * H, H)), ("b", f(1, 8 * H))],
        dict(hidden_size=H, activations=["HardSigmoid", "Tanh", "Softsign"],
             activation_alpha=[0.3], activation_beta=[0.4]), ["y", "yh", "yc"])


CASES = dict(cases())


def main():
    return run_checks(lambda bin_dir, work: (bin_dir, work), case, list(CASES))


if __name__ == "__main__":
    sys.exit(main())
