#!/usr/bin/env python3
"""Hugging Face models with their configs' dropout, as torch exports them.

    $(scripts/venv-path.sh)/bin/python test/zoo/hf_dropout_check.py --bin build/bin --workdir DIR

transformers' GPT-2, BERT and T5 (the zoo's sizes, test/zoo/zoo.py) keep
their default dropout (0.1 on embeddings, attention probabilities, residual
branches). Their attention runs through scaled_dot_product_attention, whose
export (TorchScript and dynamo alike) writes the probabilities' dropout as
Dropout(p, ratio) without training_mode, which ONNX reads as inference. The
module trains with it, so merak does too (OnnxOpsDropout.cpp). Per model and
exporter (ts17, dynamo20):
  - merak-compile warns once that those nodes (one per attention) train;
  - the training step has every attention fused with the attention dropout
    inside (the ratio of the config), and the other
    dropouts as merak.dropout ops;
  - the program trains 5 steps with finite, falling losses, and its first
    loss differs from the same export's with every dropout off in the
    config (the masks are drawn).
The masks themselves are checked against PyTorch in test/parallel/
dropout_check.py (fused and decomposed, four meshes). Ends with "N passed,
M failed".
"""
import json
import math
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
import zoo  # noqa: E402
import zoo_builds  # noqa: E402  (its no_dropout, patched)
from check_runner import run_checks  # noqa: E402

# Attentions per model (T5: the encoder's and the decoder's self-attention
# and its cross-attention, with the relative-position bias fused too).
MODELS = {"gpt2": dict(attentions=zoo.LAYERS), "bert": dict(attentions=zoo.LAYERS),
          "t5": dict(attentions=3 * zoo.LAYERS)}
# T5 under dynamo: torch's exporter fails (docs/models.md, gap 2).
CHECKS = ["gpt2-ts17", "gpt2-dynamo20", "bert-ts17", "bert-dynamo20", "t5-ts17"]
STEPS = 5


class Env:
    def __init__(self, bin_dir, work):
        self.bin_dir, self.work = bin_dir, work
        self.data = zoo.Zoo(bin_dir, work).tokens_file  # the bundled corpus


def build(name, dropout):
    """The zoo's model with its config's own dropout (or none)."""
    saved = zoo_builds.no_dropout
    if dropout:
        zoo_builds.no_dropout = lambda **kw: kw
    try:
        return zoo.build(name)
    finally:
        zoo_builds.no_dropout = saved


def compile_and_train(env, name, exporter, dropout):
    tag = "%s-%s-%s" % (name, exporter, "p" if dropout else "0")
    model, example = build(name, dropout)
    onnx = os.path.join(env.work, tag, "model.onnx")
    zoo.export(model, example, onnx, exporter)
    exe = os.path.join(env.work, tag, "train")
    cmd = [os.path.join(env.bin_dir, "merak-compile"), onnx, "-o", exe,
           "--batch-size", str(zoo.B), "--optimizer", "adamw", "--opt", "lr=1e-3"]
    for f in zoo.non_parameter_initializers(onnx, model):
        cmd += ["--frozen", f]
    compiled = subprocess.run(cmd, capture_output=True, text=True)
    if compiled.returncode:
        raise RuntimeError("merak-compile failed: " + compiled.stderr[-800:])
    step = subprocess.run(cmd[:2] + ["--compile-to=training"] + cmd[4:] + ["-o", exe + ".mlir"],
                          capture_output=True, text=True)
    if step.returncode:
        raise RuntimeError("merak-compile --compile-to=training failed: " + step.stderr[-800:])
    metrics = exe + ".jsonl"
    if os.path.exists(metrics):
        os.remove(metrics)
    subprocess.run([exe, "--data", env.data, "--steps", str(STEPS), "--sampler", "sequential",
                    "--metrics", metrics], check=True, capture_output=True,
                   env=dict(os.environ, OMP_NUM_THREADS="1"))
    with open(metrics) as f:
        losses = [json.loads(line)["loss"] for line in f]
    with open(exe + ".mlir") as f:
        ir = f.read()
    return compiled.stderr, ir.split("func.func @loss(")[0], losses


def check(env, name):
    model, exporter = name.rsplit("-", 1)
    spec = MODELS[model]
    stderr, forward, losses = compile_and_train(env, model, exporter, True)
    _, _, quiet = compile_and_train(env, model, exporter, False)
    cfg_p = 0.1  # the configs' default attention dropout
    warned = re.search(r"warning: (\d+) Dropout node\(s\) with a ratio", stderr)
    fused = re.findall(r"merak\.attention [^:]*dropout = ([0-9.e+-]+)", forward)
    others = len(re.findall(r"merak\.dropout ", forward))
    problems = []
    if not warned or int(warned.group(1)) != spec["attentions"]:
        problems.append("no warning for %d untagged dropouts" % spec["attentions"])
    if len(fused) != spec["attentions"] or any(abs(float(p) - cfg_p) > 1e-6 for p in fused):
        problems.append("fused attentions with dropout: %s" % fused)
    if others == 0:
        problems.append("no other merak.dropout")
    if not all(math.isfinite(x) for x in losses) or losses[-1] >= losses[0]:
        problems.append("losses %s" % losses)
    if abs(losses[0] - quiet[0]) <= 1e-4 * abs(quiet[0]):
        problems.append("first loss %.6f equals the dropout-free %.6f" % (losses[0], quiet[0]))
    msg = "%d fused attentions with dropout %s, %d other dropouts, losses %.4f -> %.4f " \
          "(without dropout %.4f)" % (len(fused), fused[:1], others, losses[0], losses[-1],
                                      quiet[0])
    return not problems, "; ".join(problems) or msg


def main():
    return run_checks(Env, check, CHECKS)


if __name__ == "__main__":
    sys.exit(main())
