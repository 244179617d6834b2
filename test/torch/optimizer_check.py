"""Per-step losses of merak's training step vs PyTorch, 20 steps.

    /usr/bin/python3 test/torch/optimizer_check.py --bin BUILD/bin --workdir DIR

The GPT-2-style decoder of the export tests is exported (logits only, training
mode); merak-compile --compile-to=training (with --optimizer and --opt flags)
attaches the next-token cross-entropy, differentiates it and adds the
update, and merak-run --steps 20 runs @train_step on a fixed batch. The reference runs
the same 20 steps in float64 with torch.optim.AdamW / torch.optim.SGD, and
for Adan (not in PyTorch) with the update written here from Xie et al.,
Algorithm 1. Per-step losses must agree to rel. err <= 1e-4. Ends with
"N passed, M failed".
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export_models as em  # noqa: E402
from grad_check import run  # noqa: E402  (runs a tool, raises on failure)

STEPS = 20
TOLERANCE = 1e-4

CONFIGS = [
    ("adamw", dict(optimizer="adamw", lr=3e-3)),
    ("adamw-clip-cosine", dict(optimizer="adamw", lr=1e-2, **{"weight-decay": 0.1,
                               "clip-norm": 0.5, "schedule": "cosine",
                               "warmup-steps": 5, "total-steps": 20, "min-lr": 1e-3})),
    ("adan", dict(optimizer="adan", lr=3e-3, **{"weight-decay": 0.02})),
    ("sgd-nesterov-warmup", dict(optimizer="sgd", lr=0.1, momentum=0.9, nesterov=True,
                                 **{"weight-decay": 1e-3, "schedule": "linear-warmup",
                                    "warmup-steps": 4})),
]


def lr_at(cfg, step):
    lr, sched = cfg["lr"], cfg.get("schedule", "constant")
    warm = cfg.get("warmup-steps", 0)
    t = step + 1
    if sched == "constant":
        return lr
    w = min(1.0, t / warm) if warm > 0 else 1.0
    if sched == "linear-warmup":
        return lr * w
    total, min_lr = cfg["total-steps"], cfg.get("min-lr", 0.0)
    if step < warm:
        return lr * w
    p = min(1.0, max(0.0, (step - warm) / (total - warm)))
    return min_lr + 0.5 * (lr - min_lr) * (1 + math.cos(math.pi * p))


def adan_step(params, state, step, cfg):
    b1, b2, b3 = 0.02, 0.08, 0.01
    eps, wd, lr = 1e-8, cfg.get("weight-decay", 0.0), lr_at(cfg, step)
    for p in params:
        g = p.grad
        st = state.setdefault(p, {})
        if step == 0:
            m, v, n = g.clone(), torch.zeros_like(g), g * g
        else:
            diff = g - st["prev"]
            m = (1 - b1) * st["m"] + b1 * g
            v = (1 - b2) * st["v"] + b2 * diff
            n = (1 - b3) * st["n"] + b3 * (g + (1 - b2) * diff) ** 2
        eta = lr / (n.sqrt() + eps)
        with torch.no_grad():
            p.copy_((p - eta * (m + (1 - b2) * v)) / (1 + wd * lr))
        st.update(m=m, v=v, n=n, prev=g.clone())


def reference(model, ids, labels, cfg):
    model = model.double()
    params = list(model.parameters())
    name = cfg["optimizer"]
    if name == "adamw":
        opt = torch.optim.AdamW(params, lr=cfg["lr"], betas=(0.9, 0.999), eps=1e-8,
                                weight_decay=cfg.get("weight-decay", 0.01))
    elif name == "sgd":
        opt = torch.optim.SGD(params, lr=cfg["lr"], momentum=cfg.get("momentum", 0),
                              nesterov=cfg.get("nesterov", False),
                              weight_decay=cfg.get("weight-decay", 0))
    losses, state = [], {}
    for step in range(STEPS):
        for p in params:
            p.grad = None
        logits = model(ids)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1))
        loss.backward()
        losses.append(loss.item())
        if cfg.get("clip-norm"):
            torch.nn.utils.clip_grad_norm_(params, cfg["clip-norm"])
        if name == "adan":
            adan_step(params, state, step, cfg)
        else:
            for group in opt.param_groups:
                group["lr"] = lr_at(cfg, step)
            opt.step()
    return losses


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    bin_dir = os.path.abspath(args.bin)
    os.makedirs(args.workdir, exist_ok=True)
    torch.manual_seed(0)
    model, (ids,), in_names, out_names = em.build_gpt2("train")
    labels = torch.randint(0, 97, ids.shape, dtype=torch.int64)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    onnx_path = os.path.join(args.workdir, "model.onnx")
    torch.onnx.export(model, (ids,), onnx_path, opset_version=17,
                      input_names=in_names, output_names=out_names,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    np.save(os.path.join(args.workdir, "ids.npy"), ids.numpy())
    np.save(os.path.join(args.workdir, "labels.npy"), labels.numpy())
    passed = failed = 0
    for label, cfg in CONFIGS:
        try:
            flags = ["--optimizer", cfg["optimizer"]]
            for k, v in cfg.items():
                if k != "optimizer":
                    flags += ["--opt", "%s=%s" % (k, str(v).lower() if isinstance(v, bool) else v)]
            step_mlir = os.path.join(args.workdir, label + ".mlir")
            run([os.path.join(bin_dir, "merak-compile"), onnx_path, "--compile-to=training",
                 "--frozen", "*.attn.bias", "-o", step_mlir] + flags)
            out = run([os.path.join(bin_dir, "merak-run"), step_mlir, "--entry", "train_step",
                       "--input", os.path.join(args.workdir, "ids.npy"),
                       "--input", os.path.join(args.workdir, "labels.npy"),
                       "--steps", str(STEPS)])
            got = [json.loads(line)["loss"] for line in out.splitlines()]
            model.load_state_dict(state)
            want = reference(model, ids, labels, cfg)
            model.float()
            errs = [abs(g - w) / abs(w) for g, w in zip(got, want)]
            ok = len(got) == STEPS and max(errs) <= TOLERANCE and want[-1] < want[0]
            print("%s %s: losses %.4f -> %.4f (torch %.4f -> %.4f), max rel err %.2e"
                  % ("PASS" if ok else "FAIL", label, got[0], got[-1], want[0], want[-1],
                     max(errs)))
        except Exception as e:
            print("FAIL %s: %s" % (label, e))
            ok = False
        passed += ok
        failed += not ok
        sys.stdout.flush()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
