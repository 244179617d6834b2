"""PyTorch reference for the GPU check: GPT-2 training steps, timed, with losses.

    python3 bench/gpu/torch_ref.py --device cuda --dtype bf16 --modes eager,compile \
        --layers 12 --embd 768 --heads 12 --vocab 50304 --seq 1024 --batch 16 \
        --steps 10 --json OUT.json [--tokens FILE] [--state FILE.pt]

The model is the test suite's GPT-2 (test/torch/export_models.py: pre-LN,
tied LM head, exact GELU) -- the one bench/gpu/e2e.py exports for
merak-compile -- with its attention computed by
F.scaled_dot_product_attention (flash attention on the GPU) when torch has
it, so the baseline is PyTorch at its best, not the exported
materialised-softmax graph. AdamW with PyTorch's defaults (lr 1e-3, betas
0.9/0.999, eps 1e-8, weight decay 0.01) in float32 master weights;
--dtype bf16 runs forward/backward under torch.autocast(bfloat16), as
merak's bf16 policy (bf16 GEMM inputs and activations, fp32 weights,
optimizer state and loss).

Batches: with --tokens (a uint16 token file, as ./train --data) row r of
step s starts at ((s*B + r)*T) mod (N - T - 1) and labels are the next
tokens: ./train's `--sampler sequential`, so per-step losses compare with
the generated program's. Without --tokens, random tokens from --seed.
--state loads a state_dict saved by e2e.py (the exported initial weights).

For each mode (eager, compile) prints and records: per-step losses, the
median step time after --warmup steps, tokens/s, and MFU =
tokens/s * flops_per_token / peak, flops_per_token = 6*N + 6*L*C*T (N the
parameter count with the tied embedding once; 6*L*C*T the causal attention
matmuls, forward + backward; as nanoGPT's estimate with causal halving),
peak --peak-tflops (default 790). Runs on CPU too (tiny models; torch.compile
and bf16 autocast are skipped where this torch lacks them).
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "test", "torch"))
import export_models as em  # noqa: E402


def sdpa_forward(self, x):
    """CausalSelfAttention.forward with F.scaled_dot_product_attention."""
    b, t, c = x.size()
    q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
    hd = self.n_embd // self.n_head
    q = q.view(b, t, self.n_head, hd).transpose(1, 2)
    k = k.view(b, t, self.n_head, hd).transpose(1, 2)
    v = v.view(b, t, self.n_head, hd).transpose(1, 2)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    y = y.transpose(1, 2).contiguous().view(b, t, c)
    return self.resid_dropout(self.c_proj(y))


def build_model(args):
    torch.manual_seed(args.seed)
    model = em.GPT2(vocab_size=args.vocab, n_embd=args.embd, n_head=args.heads,
                    n_layer=args.layers, block_size=args.seq)
    if args.state:
        model.load_state_dict(torch.load(args.state, map_location="cpu"))
    return model


def param_count(model):
    return sum(p.numel() for p in model.parameters())  # tied weight once


def flops_per_token(args, n_params):
    return 6.0 * n_params + 6.0 * args.layers * args.embd * args.seq


class Batches:
    def __init__(self, args):
        self.args = args
        self.tokens = None
        if args.tokens:
            self.tokens = np.fromfile(args.tokens, dtype=np.uint16).astype(np.int64)
        self.gen = torch.Generator().manual_seed(args.seed + 1)

    def get(self, step):
        a = self.args
        if self.tokens is None:
            x = torch.randint(0, a.vocab, (a.batch, a.seq + 1), generator=self.gen)
            return x[:, :-1], x[:, 1:]
        n = len(self.tokens)
        rows = []
        for r in range(a.batch):
            start = ((step * a.batch + r) * a.seq) % (n - a.seq - 1)
            rows.append(self.tokens[start:start + a.seq + 1])
        x = torch.from_numpy(np.stack(rows))
        return x[:, :-1].contiguous(), x[:, 1:].contiguous()


def run_mode(args, mode, device):
    model = build_model(args)
    if args.sdpa and hasattr(F, "scaled_dot_product_attention"):
        for blk in model.transformer.h:
            blk.attn.forward = sdpa_forward.__get__(blk.attn)
    model.to(device).train()
    n_params = param_count(model)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    step_fn_model = model
    if mode == "compile":
        if not hasattr(torch, "compile"):
            return {"mode": mode, "skipped": "torch %s has no torch.compile" % torch.__version__}
        step_fn_model = torch.compile(model)
    use_autocast = args.dtype == "bf16"
    if use_autocast and device.type == "cpu" and not hasattr(torch, "autocast"):
        return {"mode": mode, "skipped": "no torch.autocast"}
    batches = Batches(args)
    losses, times = [], []
    sync = (lambda: torch.cuda.synchronize()) if device.type == "cuda" else (lambda: None)
    for step in range(args.steps):
        x, y = batches.get(step)
        x, y = x.to(device), y.to(device)
        sync()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        if use_autocast:
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
                logits = step_fn_model(x)
        else:
            logits = step_fn_model(x)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1))
        loss.backward()
        opt.step()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
        losses.append(float(loss.item()))
    timed = times[args.warmup:] if len(times) > args.warmup else times
    ms = statistics.median(timed)
    tok_s = args.batch * args.seq / (ms * 1e-3)
    fpt = flops_per_token(args, n_params)
    mfu = tok_s * fpt / (args.peak_tflops * 1e12)
    return {"mode": mode, "dtype": args.dtype, "device": str(device),
            "params": n_params, "losses": losses, "step_ms": ms,
            "tokens_per_s": tok_s, "flops_per_token": fpt, "mfu": mfu}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    ap.add_argument("--modes", default="eager,compile")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--embd", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=50304)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokens", default=None)
    ap.add_argument("--state", default=None)
    ap.add_argument("--peak-tflops", type=float, default=790.0)
    ap.add_argument("--no-sdpa", dest="sdpa", action="store_false")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            print("torch_ref: no CUDA device visible to torch %s" % torch.__version__)
            return 77
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    out = {"torch": torch.__version__, "config": vars(args), "runs": []}
    for mode in [m for m in args.modes.split(",") if m]:
        try:
            r = run_mode(args, mode, device)
        except Exception as e:  # a failed mode must not hide the others
            r = {"mode": mode, "error": "%s: %s" % (type(e).__name__, e)}
        out["runs"].append(r)
        if "step_ms" in r:
            print("torch %-7s %s L=%d C=%d T=%d B=%d: step %.1f ms, %.0f tokens/s, MFU %.1f%% "
                  "(losses %s)" % (mode, args.dtype, args.layers, args.embd, args.seq,
                                   args.batch, r["step_ms"], r["tokens_per_s"], 100 * r["mfu"],
                                   " ".join("%.4f" % x for x in r["losses"])))
        else:
            print("torch %-7s: %s" % (mode, r.get("skipped") or r.get("error")))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    ok = any("step_ms" in r for r in out["runs"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
