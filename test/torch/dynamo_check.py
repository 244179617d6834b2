"""torch 2.x's default exporter (dynamo, opset 20, weights in a separate
.onnx.data file) into merak, run with the project venv's Python:

    $(scripts/venv-path.sh)/bin/python test/torch/dynamo_check.py --bin BUILD/bin --workdir DIR [CHECK...]

Models exported with torch.onnx.export(..., dynamo=True): opset 20, weights
in model.onnx.data. The exporter's graph optimizer (optimize=True, the
default) merges weights with equal initial values and folds transposed
weights into copies, losing which parameters PyTorch trains apart, so merak
refuses such exports and trains those made with optimize=False. Checks:
  train-external  decoder_check.py's Llama-style decoder (untied, interleaved
                  rotary, GQA): the weights are in model.onnx.data; merak
                  compiles it (no flags: ./train) and 20 AdamW steps on the
                  bundled corpus (--sampler sequential) equal PyTorch's
                  float64 training of the same module (rel. err <= 1e-4);
  tied-refused    optimize=True: the test suite's GPT-2 (embedding tied to
                  the LM head), whose head's transposed weight became a copy,
                  is refused naming both initializers; the Llama, whose
                  RMSNorm weights became one, is refused as optimised; both
                  say how to export (training them would silently differ);
  bad-external    the data file missing, or cut short, is a compile error
                  naming the file (exit 1), not a crash or wrong weights;
  dropout-refused optimize=True removes scaled_dot_product_attention's
                  dropout (the module applies it): refused, naming the
                  attention and p; the optimize=False export imports, its
                  attention dropout training with the module's others.
Ends with "N passed, M failed".
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export_models as em  # noqa: E402
from check_runner import run_checks  # noqa: E402
from decoder_check import Llama  # noqa: E402

B, T, VOCAB, STEPS, TOLERANCE = 2, 16, 97, 20, 1e-4


def export(model, path, optimize):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.onnx.export(model, (torch.zeros(B, T, dtype=torch.int64),), path, dynamo=True,
                      optimize=optimize, input_names=["input_ids"], output_names=["logits"])


class Env:
    def __init__(self, bin_dir, work):
        self.bin_dir, self.work = bin_dir, work
        torch.manual_seed(0)
        self.model = Llama(vocab=VOCAB, seq=T)
        self.state = {k: v.clone() for k, v in self.model.state_dict().items()}
        self.onnx = os.path.join(work, "llama", "model.onnx")
        export(self.model, self.onnx, optimize=False)
        corpus = os.path.join(HERE, "..", "..", "examples", "gpt", "corpus.txt")
        text = np.frombuffer(open(corpus, "rb").read(), dtype=np.uint8)
        self.tokens = (text.astype(np.int64) % VOCAB).astype(np.uint16)
        self.data = os.path.join(work, "tokens.bin")
        self.tokens.tofile(self.data)

    def compile(self, onnx_path, *flags):
        return subprocess.run([os.path.join(self.bin_dir, "merak-compile"), onnx_path]
                              + list(flags), capture_output=True, text=True, timeout=600)


def reference_losses(model, tokens):
    """PyTorch (float64) AdamW on the sequential batches of ./train."""
    model = model.double().train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.01)
    n, losses = len(tokens), []
    for s in range(STEPS):
        starts = [((s * B + r) * T) % (n - T - 1) for r in range(B)]
        ids = torch.from_numpy(np.stack([tokens[i:i + T] for i in starts]).astype(np.int64))
        labels = torch.from_numpy(np.stack([tokens[i + 1:i + T + 1] for i in starts])
                                  .astype(np.int64))
        opt.zero_grad()
        logits = model(ids)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def check_train_external(env):
    data = env.onnx + ".data"
    if not os.path.exists(data):
        return False, "the dynamo export wrote no %s" % os.path.basename(data)
    exe = os.path.join(env.work, "train")
    # The rotary tables are buffers, initializers like the weights in ONNX.
    p = env.compile(env.onnx, "--frozen", "cos", "--frozen", "sin", "--optimizer", "adamw",
                    "--opt", "lr=3e-3", "-o", exe)
    if p.returncode:
        return False, "merak-compile failed:\n" + p.stderr[-3000:]
    metrics = os.path.join(env.work, "metrics.jsonl")
    subprocess.run([exe, "--data", env.data, "--steps", str(STEPS), "--sampler", "sequential",
                    "--metrics", metrics], check=True, capture_output=True, timeout=600)
    with open(metrics) as f:
        got = [json.loads(line)["loss"] for line in f]
    env.model.load_state_dict(env.state)
    want = reference_losses(env.model, env.tokens)
    errs = [abs(g - w) / abs(w) for g, w in zip(got, want)]
    ok = len(got) == STEPS and max(errs) <= TOLERANCE and want[-1] < want[0]
    return ok, "%s + %d-byte data file; losses %.4f -> %.4f (torch %.4f -> %.4f), max rel " \
               "err %.2e" % (os.path.basename(env.onnx), os.path.getsize(data), got[0], got[-1],
                             want[0], want[-1], max(errs))


def check_tied_refused(env):
    torch.manual_seed(0)
    path = os.path.join(env.work, "gpt2", "model.onnx")
    export(em.GPT2(vocab_size=VOCAB, n_embd=64, n_head=4, n_layer=2, block_size=T), path, True)
    p = env.compile(path, "--compile-to=import", "-o", os.devnull)
    want = "holds the values of 'lm_head.weight' transposed"
    if p.returncode != 1 or want not in p.stderr or "optimize=False" not in p.stderr:
        return False, "tied GPT-2: exit %d: %s" % (p.returncode, p.stderr.strip()[-400:])
    # The Llama optimised: its five all-ones RMSNorm weights become one.
    torch.manual_seed(0)
    path = os.path.join(env.work, "llama-optimized", "model.onnx")
    export(Llama(vocab=VOCAB, seq=T), path, True)
    q = env.compile(path, "--compile-to=import", "-o", os.devnull)
    ok = q.returncode == 1 and "folded by torch.onnx's graph optimizer" in q.stderr
    return ok, "exit %d: %s | optimised Llama: exit %d: %s" % (
        p.returncode, p.stderr.strip()[-300:], q.returncode, q.stderr.strip()[-300:])


def check_bad_external(env):
    messages = []
    for case in ("missing", "short"):
        d = os.path.join(env.work, case)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        shutil.copy(env.onnx, d)
        data = os.path.join(d, "model.onnx.data")
        if case == "short":
            with open(env.onnx + ".data", "rb") as src, open(data, "wb") as dst:
                dst.write(src.read()[:1000])
        p = env.compile(os.path.join(d, "model.onnx"), "--compile-to=import", "-o", os.devnull)
        line = next((l for l in p.stderr.splitlines() if "error" in l), "")
        if p.returncode != 1 or "model.onnx.data" not in line:
            return False, "%s data file: exit %d: %s" % (case, p.returncode, p.stderr[-1500:])
        messages.append("%s: %s" % (case, line.strip()))
    return True, "; ".join(messages)


class DropoutAttention(torch.nn.Module):
    """One attention layer with dropout (0.1) on its input and inside
    scaled_dot_product_attention, as transformers' attention trains."""

    def __init__(self, width=16, heads=2):
        super().__init__()
        self.heads = heads
        self.embed = torch.nn.Embedding(VOCAB, width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.drop = torch.nn.Dropout(0.1)
        self.head = torch.nn.Linear(width, VOCAB)

    def forward(self, ids):
        b, t = ids.shape
        q, k, v = self.qkv(self.drop(self.embed(ids))).view(b, t, 3, self.heads, -1).unbind(2)
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                           v.transpose(1, 2), dropout_p=0.1, is_causal=True)
        return self.head(o.transpose(1, 2).reshape(b, t, -1))


def check_dropout_refused(env):
    messages = []
    for optimize in (True, False):
        torch.manual_seed(0)
        model = DropoutAttention().train()
        path = os.path.join(env.work, "dropout-%s" % optimize, "model.onnx")
        export(model, path, optimize)
        p = env.compile(path, "--compile-to=import", "-o", os.devnull)
        if optimize:
            ok = (p.returncode == 1 and "the dropout of 'scaled_dot_product_attention' (p = 0.1)"
                  " removed" in p.stderr and "optimize=False" in p.stderr)
        else:
            ok = p.returncode == 0 and "train like the graph's other 1 Dropout" in p.stderr
        messages.append("optimize=%s: exit %d: %s" % (optimize, p.returncode,
                                                      p.stderr.strip()[-300:]))
        if not ok:
            return False, messages[-1]
    return True, " | ".join(messages)


CHECKS = {"train-external": check_train_external, "tied-refused": check_tied_refused,
          "bad-external": check_bad_external, "dropout-refused": check_dropout_refused}


def main():
    return run_checks(Env, lambda env, name: CHECKS[name](env), CHECKS)


if __name__ == "__main__":
    sys.exit(main())
