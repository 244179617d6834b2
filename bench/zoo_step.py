"""CPU training-step time of three model families: merak's executable vs
PyTorch 2.x eager and torch.compile (inductor), one thread, in one run.

    $(scripts/venv-path.sh)/bin/python bench/zoo_step.py --bin build/bin --workdir /tmp/zoo \
        [--steps 20] [--rounds 3] [--models gpt2,llama,encoder] [--dropout P]

Every model: d=256, 4 layers, 8 heads (Llama: 2 kv heads, SwiGLU 4d,
interleaved rotary), seq 128, batch 8, vocab 2048, AdamW (lr 3e-4), float32.
  gpt2     test/torch/export_models.py's GPT-2 (tied embeddings)
  llama    test/torch/decoder_check.py's Llama-style decoder
  encoder  a causal LM on nn.TransformerEncoder (pre-norm)
  lstm, gru  test/zoo/zoo_models.py's RecurrentLM (2 layers of width d:
           the ONNX LSTM/GRU ops, which merak unrolls over the sequence;
           not in the default list)
  mamba    transformers' Mamba (state 16, expand 2, conv 4), its PyTorch
           path (a loop over the tokens, which every exporter unrolls and
           merak-raise-linear-scan raises to merak.linear_scan; not in the
           default list; FLOP/s of the projections only)
  resnet50 torchvision's ResNet-50 (10 classes, train-mode BatchNorm,
           whose running statistics merak updates too) on batch 8 of
           64x64 images, the class cross-entropy (not in the default list;
           FLOP/s not printed)
merak: exported by the TorchScript exporter (opset 17, training mode),
merak-compile, ./train on random tokens with OMP/OpenBLAS at 1 thread; the
median of the per-step time_ms after 5 warm-up steps. PyTorch: forward,
cross-entropy, backward, AdamW.step() with torch.set_num_threads(1), median
over the same steps, eager and with the model under torch.compile (its
compilation excluded). The three are timed in --rounds interleaved rounds
(merak, eager, compile, then again), so that a slow period of a shared
machine falls on all of them; each time printed is the median over the
rounds, with the range of the per-round merak / compile ratios. Prints
the step times, merak / eager and
merak / compile (goal <= 0.8), and the achieved FLOP/s (6 * params * tokens
plus the attention's 12 * layers * B * T^2 * d, per step) against the
single-core SGEMM peak measured here (torch.mm 1024^3, 1 thread).
--dropout P sets every nn.Dropout of the models to P (training with
dropout: merak's fused attention draws the probabilities' mask inside the
kernel, PyTorch's eager GPT-2 runs nn.Dropout on them); without it the
models' own (0 in these models).
A benchmark, not a test.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "torch"))
import export_models as em  # noqa: E402
from decoder_check import EncoderLM, Llama  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "..", "test", "zoo"))
from zoo_models import CausalLM, RecurrentLM  # noqa: E402

B, T, D, LAYERS, HEADS, VOCAB = 8, 128, 256, 4, 8, 2048
IMAGE, CLASSES = 64, 10  # resnet50
WARMUP = 5


DROPOUT = None  # --dropout


def build(name):
    model, flags = build_model(name)
    if DROPOUT is not None:
        for m in model.modules():
            if isinstance(m, nn.Dropout):
                m.p = DROPOUT
    return model, flags


def build_model(name):
    torch.manual_seed(0)
    if name == "gpt2":
        return em.GPT2(vocab_size=VOCAB, n_embd=D, n_head=HEADS, n_layer=LAYERS, block_size=T), \
            ["--frozen", "*.attn.bias"]
    if name == "llama":
        return Llama(vocab=VOCAB, seq=T, dim=D, heads=HEADS, kv_heads=2, layers=LAYERS,
                     hidden=4 * D), []
    if name in ("lstm", "gru"):
        return RecurrentLM(name, VOCAB, D), []
    if name == "mamba":
        import transformers as tf
        return CausalLM(tf.MambaForCausalLM(tf.MambaConfig(
            vocab_size=VOCAB, hidden_size=D, state_size=16, num_hidden_layers=LAYERS, expand=2,
            conv_kernel=4, use_cache=False))), []
    if name == "mamba2":
        import transformers as tf
        return CausalLM(tf.Mamba2ForCausalLM(tf.Mamba2Config(
            vocab_size=VOCAB, hidden_size=D, state_size=64, num_hidden_layers=LAYERS, expand=2,
            conv_kernel=4, num_heads=2 * D // 64, head_dim=64, n_groups=1, chunk_size=64,
            use_cache=False))), []
    if name == "resnet50":
        import torchvision
        return torchvision.models.resnet50(weights=None, num_classes=CLASSES), \
            ["--input-shape", "pixel_values=%dx3x%dx%d" % (B, IMAGE, IMAGE)]
    return EncoderLM(vocab=VOCAB, seq=T, width=D, heads=HEADS, layers=LAYERS), []


class TorchRunner:
    """One PyTorch training setup (eager or under torch.compile) whose
    steps can be timed in several rounds; compilation happens in the first
    round's warm-up steps."""

    def __init__(self, model, compiled, images=False):
        self.model = model.train()
        self.fwd = torch.compile(self.model) if compiled else self.model
        self.opt = torch.optim.AdamW([p for p in self.model.parameters() if p.requires_grad],
                                     lr=3e-4)
        self.rng = torch.Generator().manual_seed(1)
        self.images = images

    def step_ms(self, steps):
        """The median step time of `steps` steps after WARMUP."""
        times = []
        for s in range(WARMUP + steps):
            if self.images:
                x = torch.randn(B, 3, IMAGE, IMAGE, generator=self.rng)
                y = torch.randint(0, CLASSES, (B,), generator=self.rng)
            else:
                ids = torch.randint(0, VOCAB, (B, T + 1), generator=self.rng)
                x, y = ids[:, :-1], ids[:, 1:]
            t0 = time.perf_counter()
            self.opt.zero_grad(set_to_none=True)
            logits = self.fwd(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            loss.backward()
            self.opt.step()
            if s >= WARMUP:
                times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)


def merak_build(args, name, model, flags):
    """Exports and compiles the model: the executable, its data and the
    number of fused attentions."""
    onnx_path = os.path.join(args.workdir, name + ".onnx")
    images = name == "resnet50"
    example = torch.zeros(B, 3, IMAGE, IMAGE) if images else torch.zeros(B, T, dtype=torch.int64)
    torch.onnx.export(model, (example,), onnx_path, opset_version=17, dynamo=False,
                      input_names=["pixel_values" if images else "input_ids"],
                      output_names=["logits"], training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    exe = os.path.join(args.workdir, "train-" + name)
    subprocess.run([os.path.join(args.bin, "merak-compile"), onnx_path, "--optimizer", "adamw",
                    "--opt", "lr=3e-4", "-o", exe] + flags, check=True, capture_output=True)
    step_cpp = os.path.join(args.workdir, name + "-step.cpp")
    subprocess.run([os.path.join(args.bin, "merak-compile"), onnx_path, "--compile-to=emit",
                    "-o", step_cpp] + flags, check=True, capture_output=True)
    fused = open(step_cpp).read().count(" attention(")
    tokens = os.path.join(args.workdir, "tokens.bin")
    np.random.default_rng(0).integers(0, VOCAB, 200000).astype(np.uint16).tofile(tokens)
    if images:  # a directory of arrays: DIR/pixel_values.npy and DIR/labels.npy
        tokens = os.path.join(args.workdir, "images")
        os.makedirs(tokens, exist_ok=True)
        rng = np.random.default_rng(0)
        np.save(os.path.join(tokens, "pixel_values.npy"),
                rng.standard_normal((64, 3, IMAGE, IMAGE)).astype(np.float32))
        np.save(os.path.join(tokens, "labels.npy"), rng.integers(0, CLASSES, 64))
    return exe, tokens, fused


def merak_step_ms(args, name, exe, tokens):
    """The median step time of one ./train run (WARMUP + steps steps)."""
    metrics = os.path.join(args.workdir, name + ".jsonl")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    subprocess.run([exe, "--data", tokens, "--steps", str(WARMUP + args.steps), "--metrics",
                    metrics, "--log-every", "1000"], check=True, env=env, capture_output=True)
    with open(metrics) as f:
        times = [json.loads(line)["time_ms"] for line in f][WARMUP:]
    return statistics.median(times)


def measure(args, name, model, flags):
    """merak, eager and torch.compile timed in --rounds interleaved rounds
    (one of each per round, so that a slower period of a shared machine
    falls on all three): the median over rounds of each, and the range of
    the per-round merak / compile ratios."""
    exe, tokens, fused = merak_build(args, name, model, flags)
    images = name == "resnet50"
    eager = TorchRunner(build(name)[0], False, images)
    compiled = TorchRunner(build(name)[0], True, images)
    rounds = [(merak_step_ms(args, name, exe, tokens), eager.step_ms(args.steps),
               compiled.step_ms(args.steps)) for _ in range(args.rounds)]
    med = [statistics.median(r[i] for r in rounds) for i in range(3)]
    ratios = [r[0] / r[2] for r in rounds]
    return med, fused, (min(ratios), max(ratios))


def sgemm_peak():
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    for _ in range(3):
        torch.mm(a, b)
    best = min(timeit(lambda: torch.mm(a, b)) for _ in range(5))
    return 2 * 1024 ** 3 / best


def timeit(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--models", default="gpt2,llama,encoder")
    ap.add_argument("--dropout", type=float, default=None)
    args = ap.parse_args()
    global DROPOUT
    DROPOUT = args.dropout
    os.makedirs(args.workdir, exist_ok=True)
    torch.set_num_threads(1)
    peak = sgemm_peak()
    print("torch %s, one thread; single-core SGEMM peak %.1f GFLOP/s" % (torch.__version__,
                                                                         peak / 1e9))
    for name in args.models.split(","):
        model, flags = build(name)
        params = sum(p.numel() for p in model.parameters())
        flops = 6 * params * B * T
        if name not in ("lstm", "gru", "mamba", "mamba2"):
            flops += 12 * LAYERS * B * T * T * D
        (merak_ms, eager_ms, compiled_ms), fused, (lo, hi) = measure(args, name, model, flags)
        spread = "; per round %.2f-%.2f" % (lo, hi) if args.rounds > 1 else ""
        if name == "resnet50":
            print("%-8s %5.1fM params | merak %7.1f ms | eager %7.1f ms | compile %7.1f ms | "
                  "merak/eager %.2f | merak/compile %.2f%s"
                  % (name, params / 1e6, merak_ms, eager_ms, compiled_ms, merak_ms / eager_ms,
                     merak_ms / compiled_ms, spread))
            sys.stdout.flush()
            continue
        print("%-8s %5.1fM params | merak %7.1f ms (%d attention fused, %.1f GFLOP/s = %.0f%% "
              "of peak) | eager %7.1f ms | compile %7.1f ms | merak/eager %.2f | "
              "merak/compile %.2f%s (goal <= 0.8)"
              % (name, params / 1e6, merak_ms, fused, flops / merak_ms / 1e6,
                 100 * flops / merak_ms * 1e3 / peak, eager_ms, compiled_ms,
                 merak_ms / eager_ms, merak_ms / compiled_ms, spread))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
