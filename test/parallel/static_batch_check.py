"""Static-batch exports trained in parallel against the serial program.

    /usr/bin/python3 test/parallel/static_batch_check.py --bin BUILD/bin --workdir DIR [CHECK...]

`torch.onnx.export(model, (ids,), path)` without dynamic_axes, as most
people run it, bakes the batch (8) into the graph: Reshape targets, the
expanded masks. merak-split-batch finds the batch by propagation and makes
each rank's micro-batch program; nothing is re-imported. The models:
`encoder`, PyTorch's own nn.TransformerEncoder as a causal LM (sequence-major
heads folded into the batch inside nn.MultiheadAttention's export), and
`gpt2`, the test suite's GPT-2 (batch-first heads, a causal mask buffer).
A check `<model>-dp<D>[-tp<T>]-pp<P>-m<M>` compiles the export serially and
with that mesh (AdamW, lr 3e-3), trains 20 steps on the bundled corpus
(--sampler sequential) and passes when the per-step losses and the final
checkpoint's tensors are within 1e-5 relative of the serial program's.
Ends with "N passed, M failed".
"""
import json
import os
import re
import sys

import onnx
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import export_models as em  # noqa: E402
from check_runner import run_checks  # noqa: E402
from decoder_check import EncoderLM  # noqa: E402
from merak_checkpoint import read_checkpoint  # noqa: E402
from program_check import compare_with_serial, corpus_tokens, tool_output as run  # noqa: E402

STEPS, BATCH, SEQ, VOCAB, TOLERANCE = 20, 8, 16, 97, 1e-5
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]
MODELS = {
    "encoder": (lambda: EncoderLM(vocab=VOCAB, seq=SEQ), []),
    "gpt2": (lambda: em.GPT2(vocab_size=VOCAB, n_embd=64, n_head=4, n_layer=2, block_size=SEQ),
             ["--frozen", "*.attn.bias"]),
}
CHECKS = ["encoder-dp2-pp2-m4", "encoder-dp2-tp2-pp2-m4", "gpt2-dp2-pp2-m4",
          "gpt2-dp2-tp2-pp2-m4", "gpt2-dp4-pp1-m1", "encoder-dp1-pp1-m4"]


class Env:
    def __init__(self, bin_dir, work):
        self.bin_dir, self.work = bin_dir, work
        _, self.data = corpus_tokens(work, VOCAB)
        self.env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        self.exports, self.serial = {}, {}

    def export(self, model):
        """The static-batch export of `model` (checked to be static)."""
        if model not in self.exports:
            torch.manual_seed(0)
            path = os.path.join(self.work, model + ".onnx")
            torch.onnx.export(MODELS[model][0](), (torch.zeros(BATCH, SEQ, dtype=torch.int64),),
                              path, opset_version=17, input_names=["input_ids"],
                              output_names=["logits"],
                              training=torch.onnx.TrainingMode.TRAINING,
                              do_constant_folding=False)
            dims = onnx.load(path).graph.input[0].type.tensor_type.shape.dim
            assert [d.dim_value for d in dims] == [BATCH, SEQ], "the export is not static"
            self.exports[model] = path
        return self.exports[model]

    def train(self, model, dp=1, tp=1, pp=1, m=1):
        """(losses, final checkpoint) of `model` compiled for the mesh."""
        name = "%s-dp%d-tp%d-pp%d-m%d" % (model, dp, tp, pp, m)
        exe = os.path.join(self.work, "train-" + name)
        cmd = [os.path.join(self.bin_dir, "merak-compile"), self.export(model),
               "--optimizer", "adamw", "--opt", "lr=3e-3", "-o", exe] + MODELS[model][1]
        for flag, value in (("--dp", dp), ("--tp", tp), ("--pp", pp), ("--microbatches", m)):
            if value > 1:
                cmd += [flag, str(value)]
        run(cmd)
        metrics = os.path.join(self.work, name + ".jsonl")
        ckpt = os.path.join(self.work, name + "-ckpt")
        cmd = [exe, "--data", self.data, "--steps", str(STEPS), "--sampler", "sequential",
               "--metrics", metrics, "--checkpoint-dir", ckpt]
        if dp * tp * pp > 1:
            cmd = MPIRUN + ["-np", str(dp * tp * pp)] + cmd
        run(cmd, env=self.env)
        with open(metrics) as f:
            losses = [json.loads(line)["loss"] for line in f]
        return losses, read_checkpoint(ckpt, STEPS)

    def serial_run(self, model):
        if model not in self.serial:
            self.serial[model] = self.train(model)
        return self.serial[model]


def check(env, name):
    m = re.fullmatch(r"(\w+)-dp(\d+)(?:-tp(\d+))?-pp(\d+)-m(\d+)", name)
    if not m or m.group(1) not in MODELS:
        return False, "unknown check"
    model = m.group(1)
    dp, tp, pp, mb = int(m.group(2)), int(m.group(3) or 1), int(m.group(4)), int(m.group(5))
    serial, serial_params = env.serial_run(model)
    got, params = env.train(model, dp, tp, pp, mb)
    return compare_with_serial(got, params, serial, serial_params, TOLERANCE, STEPS)


def main():
    return run_checks(Env, check, CHECKS)


if __name__ == "__main__":
    sys.exit(main())
