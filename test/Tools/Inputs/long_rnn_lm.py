"""An Elman-RNN language model over a long sequence, and its losses in
PyTorch, for compile-long-step.test.

    long_rnn_lm.py model DIR   DIR/model.onnx (ids [B, T], T dynamic) and DIR/tokens.bin
    long_rnn_lm.py check DIR METRICS B
                               METRICS (./train --metrics, --sampler sequential,
                               SGD lr 0.5, batch B) against PyTorch's steps

The model (vocabulary 6, width 4): logits = RNN(emb[ids]) @ out^T + bias.
Unrolled over T = 3000 tokens its training step is some 70k kernel calls.
"""
import json
import os
import sys

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

V, H, T, LR = 6, 4, 3000, 0.5


def weights():
    rng = np.random.default_rng(3)
    return {"emb": rng.standard_normal((V, H)).astype(np.float32) * 0.5,
            "w": rng.standard_normal((1, H, H)).astype(np.float32) * 0.4,
            "r": rng.standard_normal((1, H, H)).astype(np.float32) * 0.4,
            "out": rng.standard_normal((V, H)).astype(np.float32) * 0.5,
            "bias": rng.standard_normal(V).astype(np.float32) * 0.1}


def tokens():
    return (np.arange(3 * T) * 7 % 11 % V).astype(np.uint16)


def write_model(d):
    nodes = [helper.make_node("Gather", ["emb", "ids"], ["x"]),
             helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2]),
             helper.make_node("RNN", ["xt", "w", "r"], ["y", "yh"], hidden_size=H),
             helper.make_node("Squeeze", ["y", "one"], ["y3"]),
             helper.make_node("Transpose", ["y3"], ["yb"], perm=[1, 0, 2]),
             helper.make_node("Transpose", ["out"], ["ot"], perm=[1, 0]),
             helper.make_node("MatMul", ["yb", "ot"], ["m"]),
             helper.make_node("Add", ["m", "bias"], ["logits"])]
    inits = [numpy_helper.from_array(v, k) for k, v in weights().items()]
    inits.append(numpy_helper.from_array(np.array([1], dtype=np.int64), "one"))
    graph = helper.make_graph(
        nodes, "long_rnn_lm",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["B", "T"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["B", "T", V])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, os.path.join(d, "model.onnx"))
    tokens().tofile(os.path.join(d, "tokens.bin"))


def reference_losses(steps, batch):
    """PyTorch's losses of `steps` SGD steps on ./train's sequential batches
    (row r of step s reads tokens [start, start + T], start = (s*B + r)*T
    mod (N - T - 1))."""
    p = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True)
         for k, v in weights().items()}
    toks = torch.tensor(tokens().astype(np.int64))
    losses = []
    for s in range(steps):
        starts = [((s * batch + r) * T) % (len(toks) - T - 1) for r in range(batch)]
        ids = torch.stack([toks[a:a + T] for a in starts])
        labels = torch.stack([toks[a + 1:a + T + 1] for a in starts])
        h = torch.zeros(batch, H, dtype=torch.float64)
        ys = []
        for t in range(T):
            h = torch.tanh(p["emb"][ids[:, t]] @ p["w"][0].T + h @ p["r"][0].T)
            ys.append(h)
        logits = torch.stack(ys, 1) @ p["out"].T + p["bias"]
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), labels.reshape(-1))
        losses.append(loss.item())
        grads = torch.autograd.grad(loss, list(p.values()))
        with torch.no_grad():
            for v, g in zip(p.values(), grads):
                v -= LR * g
    return losses


def check(d, metrics, batch):
    got = [json.loads(line)["loss"] for line in open(os.path.join(d, metrics))]
    want = reference_losses(len(got), int(batch))
    err = max(abs(g - w) / abs(w) for g, w in zip(got, want))
    assert len(got) == 2 and err <= 1e-5, (got, want)
    print("%d losses equal PyTorch (float64), rel. err %.1e" % (len(got), err))


if __name__ == "__main__":
    {"model": write_model, "check": check}[sys.argv[1]](*sys.argv[2:])
