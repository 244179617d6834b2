"""Exports merak's bundled demo model, examples/gpt/model.onnx: a small
GPT-2-style decoder (byte vocabulary of 128, width 128, 4 heads, 4 layers,
context 64, tied embeddings, causal mask) for a batch of 8 sequences, in
training-export mode so that parameter names are kept.

    /usr/bin/python3 examples/gpt/export_demo.py [OUT.onnx]

The committed model.onnx was written by this script (torch.manual_seed(0)).
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "test", "torch"))
import export_models  # noqa: E402  (the test suite's model definitions)

VOCAB, WIDTH, HEADS, LAYERS, CONTEXT, BATCH = 128, 128, 4, 4, 64, 8


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "model.onnx")
    torch.manual_seed(0)
    model = export_models.GPT2(vocab_size=VOCAB, n_embd=WIDTH, n_head=HEADS,
                               n_layer=LAYERS, block_size=CONTEXT)
    model.train(True)
    ids = torch.zeros(BATCH, CONTEXT, dtype=torch.int64)
    torch.onnx.export(model, (ids,), out, opset_version=17,
                      input_names=["input_ids"], output_names=["logits"],
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    n = sum(p.numel() for p in model.parameters())
    print("demo: exported %s (%d parameters, input_ids [%d, %d])" % (out, n, BATCH, CONTEXT))


if __name__ == "__main__":
    main()
