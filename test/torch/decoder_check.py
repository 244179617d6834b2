"""Decoders beyond the test suite's GPT-2, trained by the generated
executable against PyTorch (float64), 20 AdamW steps, rel. err <= 1e-4.

    /usr/bin/python3 test/torch/decoder_check.py --bin BUILD/bin --workdir DIR [CHECK...]

interleaved-rotary: a Llama-style decoder. The model (2 layers, width 32, 4 query heads over 2 key/value heads) has
what Meta's reference Llama and GPT-J do and GPT-2 does not: RMSNorm,
rotary embeddings applied to interleaved pairs (x[..., ::2], x[..., 1::2]:
strided slices, recombined by stack + flatten), grouped-query attention
(the key/value heads repeated), a SwiGLU MLP and no biases. It is exported
by the TorchScript exporter at opset 17 in training mode.

mha-fused: a causal LM on PyTorch's own nn.TransformerEncoder (width 64, 4
heads of 16, pre-norm, a causal mask): nn.MultiheadAttention's export
(q divided by sqrt(d) before the product, heads folded into the batch) must
become merak.attention -- the emitted step calls the attention kernel -- and
train as PyTorch does.

upsample: a token model that halves its hidden sequence and brings it back
(F.interpolate: linear with align_corners and without, nearest: ONNX
Resize; and a strided Conv1d undone by a grouped ConvTranspose1d), trained
through the interpolation weights and the transposed convolution's.
Ends with "N passed, M failed".
"""
import json
import re
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from check_runner import run_checks  # noqa: E402
from grad_check import run  # noqa: E402
from program_check import B, STEPS, T, TOLERANCE, VOCAB, Env, reference  # noqa: E402

DIM, HEADS, KV_HEADS, LAYERS, HIDDEN = 32, 4, 2, 2, 64


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_interleaved(x, cos, sin):
    """GPT-J's rotate_every_two: pairs (x0, x1) at even and odd positions."""
    x0, x1 = x[..., ::2], x[..., 1::2]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)


class Attention(nn.Module):
    def __init__(self, dim, heads, kv_heads):
        super().__init__()
        self.dim, self.heads, self.kv_heads = dim, heads, kv_heads
        self.head_dim = dim // heads
        self.wq = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(heads * self.head_dim, dim, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.wq(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = rotate_interleaved(q, cos, sin), rotate_interleaved(k, cos, sin)
        rep = self.heads // self.kv_heads  # grouped-query attention: repeat the kv heads
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        return self.wo((att @ v).transpose(1, 2).reshape(b, t, self.dim))


class Block(nn.Module):
    def __init__(self, dim, heads, kv_heads, hidden):
        super().__init__()
        self.attention_norm = RMSNorm(dim)
        self.attention = Attention(dim, heads, kv_heads)
        self.ffn_norm = RMSNorm(dim)
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x, cos, sin):
        x = x + self.attention(self.attention_norm(x), cos, sin)
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Llama(nn.Module):
    def __init__(self, vocab=VOCAB, seq=T, dim=DIM, heads=HEADS, kv_heads=KV_HEADS,
                 layers=LAYERS, hidden=HIDDEN):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(Block(dim, heads, kv_heads, hidden) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)
        half = dim // heads // 2
        inv = 1.0 / (10000 ** (torch.arange(half, dtype=torch.float32) / half))
        angles = torch.arange(seq, dtype=torch.float32)[:, None] * inv[None, :]
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, ids):
        x = self.tok_embeddings(ids)
        for layer in self.layers:
            x = layer(x, self.cos, self.sin)
        return self.output(self.norm(x))


def export_and_train(env, name, model):
    """Exports `model` (TorchScript, opset 17, training mode), compiles it
    (AdamW, lr 3e-3), trains 20 steps and compares every loss with PyTorch's
    float64 training of the same initial module. Returns (ok, message, the
    ONNX path)."""
    torch.manual_seed(0)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    onnx_path = os.path.join(env.work, name + ".onnx")
    torch.onnx.export(model, (torch.zeros(B, T, dtype=torch.int64),), onnx_path,
                      opset_version=17, input_names=["input_ids"], output_names=["logits"],
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    exe = os.path.join(env.work, "train-" + name)
    run([os.path.join(env.bin_dir, "merak-compile"), onnx_path, "--optimizer", "adamw",
         "--opt", "lr=3e-3", "-o", exe])
    metrics = os.path.join(env.work, name + ".jsonl")
    run([exe, "--data", env.data, "--steps", str(STEPS), "--sampler", "sequential",
         "--metrics", metrics])
    with open(metrics) as f:
        got = [json.loads(line)["loss"] for line in f]
    model.load_state_dict(state)
    want, _ = reference(model, env.tokens, dict(optimizer="adamw", lr=3e-3))
    errs = [abs(g - w) / abs(w) for g, w in zip(got, want)]
    ok = len(got) == STEPS and max(errs) <= TOLERANCE and want[-1] < want[0]
    return ok, "losses %.4f -> %.4f (torch %.4f -> %.4f), max rel err %.2e" % (
        got[0], got[-1], want[0], want[-1], max(errs)), onnx_path


def check_interleaved_rotary(env):
    torch.manual_seed(0)
    ok, message, _ = export_and_train(env, "llama", Llama())
    return ok, message


class EncoderLM(nn.Module):
    """Token embedding + learned positions, nn.TransformerEncoder with a
    causal mask, a linear head."""

    def __init__(self, vocab=VOCAB, seq=T, width=64, heads=4, layers=2):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Parameter(torch.randn(seq, width) * 0.02)
        layer = nn.TransformerEncoderLayer(width, heads, dim_feedforward=2 * width, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, vocab)
        self.register_buffer("mask", torch.triu(torch.full((seq, seq), float("-inf")), 1),
                             persistent=False)

    def forward(self, ids):
        return self.head(self.encoder(self.tok(ids) + self.pos, mask=self.mask))


def check_mha_fused(env):
    torch.manual_seed(0)
    ok, message, onnx_path = export_and_train(env, "encoder", EncoderLM())
    step_cpp = os.path.join(env.work, "encoder-step.cpp")
    run([os.path.join(env.bin_dir, "merak-compile"), onnx_path, "--compile-to=emit",
         "-o", step_cpp])
    with open(step_cpp) as f:
        fused = len(re.findall(r"\battention\(", f.read()))
    return ok and fused == 2, "%d fused attention calls (2 layers); %s" % (fused, message)


class UpsampleLM(nn.Module):
    """Embedding; the hidden sequence [B, D, T] is halved (linear,
    half-pixel; a stride-2 Conv1d) and brought back (linear with corners
    aligned, nearest; a grouped stride-2 ConvTranspose1d), each added to
    the residual stream; a linear head."""

    def __init__(self, vocab=VOCAB, width=DIM):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.down = nn.Conv1d(width, width, 3, stride=2, padding=1)
        self.up = nn.ConvTranspose1d(width, width, 4, stride=2, padding=1, groups=2)
        self.mix = nn.Linear(width, width)
        self.head = nn.Linear(width, vocab)

    def forward(self, ids):
        h = self.tok(ids).transpose(1, 2)  # [B, D, T]
        half = F.interpolate(h, scale_factor=0.5, mode="linear", align_corners=False)
        up = F.interpolate(half, size=h.shape[-1], mode="linear", align_corners=True)
        h = h + torch.tanh(up) + F.interpolate(half, scale_factor=2.0, mode="nearest")
        h = h + torch.tanh(self.up(torch.tanh(self.down(h))))
        return self.head(torch.tanh(self.mix(h.transpose(1, 2))))


def check_upsample(env):
    torch.manual_seed(0)
    ok, message, _ = export_and_train(env, "upsample", UpsampleLM())
    return ok, message


CHECKS = {"interleaved-rotary": check_interleaved_rotary, "mha-fused": check_mha_fused,
          "upsample": check_upsample}


def main():
    return run_checks(Env, lambda env, name: CHECKS[name](env), CHECKS)


if __name__ == "__main__":
    sys.exit(main())
