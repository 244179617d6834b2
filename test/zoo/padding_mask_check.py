#!/usr/bin/env python3
"""Fine-tuning on padded batches: Hugging Face models called with an
attention_mask, as a tokenizer pads a batch of sentences of different
lengths.

    $(scripts/venv-path.sh)/bin/python test/zoo/padding_mask_check.py --bin build/bin \\
        --workdir DIR [CHECK...]

The zoo's models (test/zoo/zoo.py: 2 layers, width 64, sequence 16) are
exported by dynamo (opset 20, a dynamic batch) as
`model(input_ids=ids, attention_mask=mask).logits`, so the mask is a second
graph input and every attention reads it (an additive bias built from the
tokens, per row). The data: 8 rows of the bundled corpus, padded to
lengths 16, 11, 14, 9, 16, 12, 7 and 15 (mask 0 and token 0 after the
length), the labels the next tokens, -100 at the padded positions (PyTorch's
ignore_index, which merak's cross-entropy skips too). Per model:
  - the attention layers merak fuses (merak.attention with the mask in its
    bias) are the ones EXPECT_FUSED names: today XLNet's; SDPA's exports
    with a padding mask stay decomposed (see EXPECT_FUSED);
  - 20 AdamW steps of ./train --data DIR (input_ids.npy, attention_mask.npy,
    labels.npy; sequential sampler, batch 2) equal PyTorch float64 training
    the same module on the same rows (loss rel <= 1e-4);
  - tp2 and pp2 with 2 micro-batches (SGD) equal the serial program
    (rel <= 1e-5);
  - dp2 (AdamW) equals PyTorch's serial training too (rel <= 1e-4): the
    loss is the mean over the whole step's counted labels, not the ranks'
    means averaged (DistributedDataParallel's, which differs when the
    ranks count different numbers of labels: the first step's two rows
    count 16 and 11).
And "pieces": GPT-2 at a batch of 4 under dp 2 x 2 micro-batches (and pp 2)
equals PyTorch's serial training; "all-padding": a step whose labels are
all -100 stops the dp2 program (BERT) with an error naming it, not a NaN
loss or a silent 0.
Ends with "N passed, M failed".
"""
import copy
import json
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
import zoo  # noqa: E402
from check_runner import run_checks  # noqa: E402

# Encoders fine-tuned with padding (their attention not causal: the mask
# alone hides the padding) and decoders padded on the right (the mask
# under the causal one).
CHECKS = ["bert", "roberta", "distilbert", "electra", "xlnet", "deberta-v2", "gpt2", "llama"]
LENGTHS = [16, 11, 14, 9, 16, 12, 7, 15]
# The mask's dtype as a tokenizer gives it (int64), but float for XLNet,
# whose `1.0 - attention_mask` dynamo does not export with an integer mask.
FLOAT_MASK = {"xlnet"}
STEPS, TOL, PAR_TOL, LR = 20, 1e-4, 1e-5, 3e-3
# Attentions fused per model, when not all of them (LAYERS). With a
# padding mask, SDPA's export (BERT, RoBERTa, DistilBERT, ELECTRA, GPT-2,
# Llama) adds where(mask, 0, -inf) to the scores and zeroes the NaN rows of
# queries the mask hides entirely after the softmax (torch's guard); the
# fused kernels give NaN there, so merak-fuse-attention leaves a bias from
# the tokens under that guard decomposed. DeBERTa-v2 masks with where() on
# a condition from the tokens, which the pass takes only when constant.
# XLNet subtracts its mask from the scores: fused.
EXPECT_FUSED = {"bert": 0, "roberta": 0, "distilbert": 0, "electra": 0, "deberta-v2": 0,
                "gpt2": 0, "llama": 0}


class Padded(torch.nn.Module):
    """input_ids, attention_mask -> logits of the zoo's wrapped model."""

    def __init__(self, wrapped):
        super().__init__()
        self.model = wrapped.model

    def forward(self, input_ids, attention_mask):
        kw = {"use_cache": False} if "use_cache" in self.model.forward.__code__.co_varnames else {}
        return self.model(input_ids=input_ids, attention_mask=attention_mask, return_dict=True,
                          **kw).logits


class Env:
    def __init__(self, bin_dir, work):
        self.bin_dir, self.work = bin_dir, work
        tokens = zoo.Zoo(bin_dir, work).tokens.astype(np.int64)
        n = len(tokens) - zoo.T - 1
        starts = [(i * 97) % n for i in range(len(LENGTHS))]
        ids = np.stack([tokens[s:s + zoo.T] for s in starts])
        labels = np.stack([tokens[s + 1:s + zoo.T + 1] for s in starts])
        mask = np.zeros_like(ids)
        for r, length in enumerate(LENGTHS):
            mask[r, :length] = 1
        ids[mask == 0] = 0
        labels[mask == 0] = -100
        self.ids, self.mask, self.labels = ids, mask, labels
        self.data = {}
        for kind, m in (("int", mask), ("float", mask.astype(np.float32))):
            d = self.data[kind] = os.path.join(work, "padded-" + kind)
            os.makedirs(d, exist_ok=True)
            for name, a in (("input_ids", ids), ("attention_mask", m), ("labels", labels)):
                np.save(os.path.join(d, name + ".npy"), a)
        self.env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")

    def batches(self, mask_dtype, batch):
        """./train's sequential sampler: row r of step s is (s*B + r) mod N."""
        for s in range(STEPS):
            rows = [(s * batch + r) % len(LENGTHS) for r in range(batch)]
            yield (torch.from_numpy(self.ids[rows]),
                   torch.from_numpy(self.mask[rows]).to(mask_dtype),
                   torch.from_numpy(self.labels[rows]))


def export(model, path, mask_dtype):
    batch = torch.export.Dim("batch", min=1, max=1024)
    example = (torch.zeros(zoo.B, zoo.T, dtype=torch.int64),
               torch.ones(zoo.B, zoo.T, dtype=mask_dtype))
    model.train()
    torch.onnx.export(model, example, path, dynamo=True, optimize=False, opset_version=20,
                      input_names=["input_ids", "attention_mask"], output_names=["logits"],
                      dynamic_shapes=({0: batch}, {0: batch}), verbose=False)


def reference(model, env, mask_dtype, dp=1, batch=zoo.B):
    """Per-step losses of PyTorch AdamW training `model` in float64; with
    `dp`, DistributedDataParallel's loss: each of dp shards of the batch
    averages its own labels, and the shards' losses (so their gradients)
    are averaged (the check shows how far that is from merak's dp)."""
    model = model.double().train()
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.01)
    losses = []
    for ids, mask, labels in env.batches(torch.float64 if mask_dtype.is_floating_point
                                         else mask_dtype, batch):
        opt.zero_grad()
        logits = model(ids, mask)
        shards = [F.cross_entropy(lg.reshape(-1, lg.size(-1)), lb.reshape(-1))
                  for lg, lb in zip(logits.chunk(dp), labels.chunk(dp))]
        loss = sum(shards) / dp
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def compile_cmd(env, onnx, frozen, flags, batch=zoo.B):
    shape = "%dx%d" % (batch, zoo.T)
    cmd = [os.path.join(env.bin_dir, "merak-compile"), onnx, "--input-shape",
           "input_ids=" + shape, "--input-shape", "attention_mask=" + shape]
    for f in frozen:
        cmd += ["--frozen", f]
    return cmd + flags


def train(env, onnx, frozen, exe, flags, data, ranks=1, batch=zoo.B):
    zoo.tool(compile_cmd(env, onnx, frozen, flags + ["-o", exe], batch))
    metrics = exe + ".jsonl"
    if os.path.exists(metrics):
        os.remove(metrics)
    run = [exe, "--data", data, "--steps", str(STEPS), "--sampler", "sequential",
           "--metrics", metrics]
    zoo.tool((zoo.MPIRUN + ["-np", str(ranks)] if ranks > 1 else []) + run, env=env.env)
    with open(metrics) as f:
        losses = [json.loads(line)["loss"] for line in f]
    if len(losses) != STEPS:
        raise zoo.Failure("%d metrics lines for %d steps" % (len(losses), STEPS))
    return losses


def max_rel(got, want):
    return max(abs(g - w) / abs(w) for g, w in zip(got, want))


def prepare(env, name, check_name, mask_dtype=torch.int64):
    """Zoo model `name` wrapped and exported into DIR/<check_name>: the
    module (at its initial weights), its initial state, the work directory,
    the ONNX file and the --frozen globs."""
    model = Padded(zoo.build(name)[0])
    state = copy.deepcopy(model.state_dict())
    work = os.path.join(env.work, check_name)
    os.makedirs(work, exist_ok=True)
    onnx = os.path.join(work, "model.onnx")
    export(model, onnx, mask_dtype)
    model.load_state_dict(state)
    return model, state, work, onnx, zoo.non_parameter_initializers(onnx, model)


def check(env, name):
    mask_dtype = torch.float32 if name in FLOAT_MASK else torch.int64
    data = env.data["float" if name in FLOAT_MASK else "int"]
    model, state, work, onnx, frozen = prepare(env, name, name, mask_dtype)
    adamw = ["--optimizer", "adamw", "--opt", "lr=%g" % LR]
    got = train(env, onnx, frozen, os.path.join(work, "train-adamw"), adamw, data)
    emitted = zoo.tool(compile_cmd(env, onnx, frozen, adamw + ["--compile-to=emit"]))
    fused = emitted.count("attention(")
    want = reference(copy.deepcopy(model), env, mask_dtype)
    err = max_rel(got, want)
    sgd = ["--optimizer", "sgd", "--opt", "lr=0.02", "--opt", "momentum=0.9"]
    serial = train(env, onnx, frozen, os.path.join(work, "train-sgd"), sgd, data)
    tp = train(env, onnx, frozen, os.path.join(work, "train-sgd-t2"), sgd + ["--tp", "2"],
                  data, ranks=2)
    tp_err = max_rel(tp, serial)
    pp = train(env, onnx, frozen, os.path.join(work, "train-sgd-p2m2"),
               sgd + ["--pp", "2", "--microbatches", "2"], data, ranks=2)
    pp_err = max_rel(pp, serial)
    dp = train(env, onnx, frozen, os.path.join(work, "train-adamw-d2"), adamw + ["--dp", "2"],
               data, ranks=2)
    dp_err = max_rel(dp, want)
    model.load_state_dict(state)
    ddp_gap = max_rel(reference(copy.deepcopy(model), env, mask_dtype, dp=2), want)
    expected = EXPECT_FUSED.get(name, zoo.LAYERS)
    msg = ("%d attentions fused (%d expected); losses %.4f -> %.4f (torch %.4f -> %.4f), max rel "
           "err %.1e; vs serial: tp2 %.1e, pp2 m2 %.1e; dp2 %.1e vs torch (DDP's loss: %.1e)" % (
               fused, expected, got[0], got[-1], want[0], want[-1], err, tp_err, pp_err, dp_err,
               ddp_gap))
    ok = (fused == expected and err <= TOL and want[-1] < want[0] and tp_err <= PAR_TOL and
          pp_err <= PAR_TOL and dp_err <= TOL)
    return ok, msg


def check_pieces(env):
    """GPT-2 at a global batch of 4 cut into dp 2 x 2 micro-batches of one
    row each (every piece counts its own number of labels), without and
    with pp 2: AdamW equal to PyTorch's serial training."""
    model, _, work, onnx, frozen = prepare(env, "gpt2", "pieces")
    want = reference(copy.deepcopy(model), env, torch.int64, batch=4)
    adamw = ["--optimizer", "adamw", "--opt", "lr=%g" % LR]
    errs = []
    for flags, ranks in ((["--dp", "2", "--microbatches", "2"], 2),
                         (["--dp", "2", "--pp", "2", "--microbatches", "2"], 4)):
        got = train(env, onnx, frozen, os.path.join(work, "train" + "".join(flags)),
                    adamw + flags, env.data["int"], ranks=ranks, batch=4)
        errs.append(max_rel(got, want))
    return max(errs) <= TOL, "dp2 m2 %.1e, dp2 pp2 m2 %.1e vs torch (serial, batch 4)" % tuple(errs)


def check_all_padding(env):
    _, _, work, onnx, frozen = prepare(env, "bert", "all-padding")
    data = os.path.join(work, "data")
    os.makedirs(data, exist_ok=True)
    labels = env.labels.copy()
    labels[2:4] = -100  # step 1's two rows (sequential sampler, batch 2)
    for name, a in (("input_ids", env.ids), ("attention_mask", env.mask), ("labels", labels)):
        np.save(os.path.join(data, name + ".npy"), a)
    exe = os.path.join(work, "train")
    zoo.tool(compile_cmd(env, onnx, frozen, ["--dp", "2", "-o", exe]))
    run = zoo.MPIRUN + ["-np", "2", exe, "--data", data, "--steps", "3", "--sampler",
                        "sequential"]
    p = subprocess.run(run, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env.env,
                       timeout=300)
    out = p.stdout.decode(errors="replace")
    want = "step 1: every label of the batch is the ignore_index -100"
    return p.returncode != 0 and want in out, "exit %d, %s" % (
        p.returncode, zoo.first_error_line(out) or "no error")


def main():
    special = {"pieces": check_pieces, "all-padding": check_all_padding}
    return run_checks(Env, lambda env, name: special[name](env) if name in special
                      else check(env, name), CHECKS + list(special))


if __name__ == "__main__":
    sys.exit(main())
