"""Exports merak's default demo model: the tiny GPT-2-style decoder of the
test suite (tied embeddings, causal mask), in training-export mode so that
parameter names are kept, with a batch of character tokens from corpus.txt.

    /usr/bin/python3 examples/gpt/export_demo.py OUTDIR

writes OUTDIR/model.onnx and OUTDIR/test_data_set_0/{input_0,output_0}.pb,
the logits computed by PyTorch (in float64, rounded to float32), and the
batch with its next-token labels as OUTDIR/{input_ids,labels}.npy.
"""
import os
import sys

import numpy as np
import torch
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "test", "torch"))
import export_models  # noqa: E402  (the test suite's model definitions)

BATCH, SEQ = 4, 32


def tokens(path, vocab):
    """A batch of inputs and their next-token labels from the corpus."""
    data = open(path, "rb").read()
    ids = np.frombuffer(data, dtype=np.uint8).astype(np.int64) % vocab
    ids = np.resize(ids, BATCH * SEQ + 1)  # repeats the corpus if it is short
    return ids[:-1].reshape(BATCH, SEQ), ids[1:].reshape(BATCH, SEQ)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "demo"
    os.makedirs(os.path.join(out, "test_data_set_0"), exist_ok=True)
    torch.manual_seed(0)
    model = export_models.GPT2()
    ids_np, labels_np = tokens(os.path.join(HERE, "corpus.txt"), 97)
    ids = torch.from_numpy(ids_np)
    np.save(os.path.join(out, "labels.npy"), labels_np)
    np.save(os.path.join(out, "input_ids.npy"), ids_np)
    with torch.no_grad():
        ref = model.double()(ids).float().numpy()
    model = model.float()
    model.train(True)
    torch.onnx.export(model, (ids,), os.path.join(out, "model.onnx"),
                      opset_version=17, input_names=["input_ids"],
                      output_names=["logits"],
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    for name, arr, fname in (("input_ids", ids.numpy(), "input_0.pb"),
                             ("logits", ref, "output_0.pb")):
        t = numpy_helper.from_array(arr, name)
        with open(os.path.join(out, "test_data_set_0", fname), "wb") as f:
            f.write(t.SerializeToString())
    print("demo: exported %s (input_ids %s -> logits %s)"
          % (os.path.join(out, "model.onnx"), list(ids.shape), list(ref.shape)))


if __name__ == "__main__":
    main()
