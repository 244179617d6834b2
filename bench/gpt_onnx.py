"""The benchmarks' GPT: test/torch/export_models.GPT2 exported to ONNX.

Training mode, no constant folding, a dynamic batch (merak-compile binds it
with --input-shape or the per-rank batch), weights from torch.manual_seed(0).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def export_gpt(path, vocab, d, heads, layers, seq):
    """Writes the GPT to `path` unless it exists."""
    if os.path.exists(path):
        return
    import torch
    sys.path.insert(0, os.path.join(HERE, "..", "test", "torch"))
    import export_models as em
    torch.manual_seed(0)
    model = em.GPT2(vocab_size=vocab, n_embd=d, n_head=heads, n_layer=layers, block_size=seq)
    ids = torch.zeros(1, seq, dtype=torch.int64)
    torch.onnx.export(model, (ids,), path, opset_version=17, input_names=["input_ids"],
                      output_names=["logits"], training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, dynamic_axes={"input_ids": {0: "batch"}})
