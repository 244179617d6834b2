"""BatchNorm's running statistics, updated by training as PyTorch updates them.

    /usr/bin/python3 test/parallel/batchnorm_check.py --bin BUILD/bin --workdir DIR [CHECK...]

A small CNN with three BatchNorm layers (two BatchNorm2d, one with
momentum 0.3, and a BatchNorm1d on the features), exported in training
mode (TorchScript, opset 17, dynamic batch), trained 12 AdamW steps on 37
images, 16 a step (--sampler sequential: row r of step s is sample
(s*16 + r) mod 37).
The reference is PyTorch in float64 training the module itself, its
buffers updated by nn.BatchNorm (momentum, the unbiased batch variance):
  serial     the per-step losses (rel. err <= 1e-4) and every running
             mean / variance of the final checkpoint (max abs err over the
             tensor <= 1e-4 of its largest value), and the parameters; the
             checkpoint's model tensors are the module's whole state_dict
             (a strict load_state_dict accepts them), each
             num_batches_tracked the number of training forwards (torch's
             count less its value after the export);
  m2         --pp 1 --microbatches 2: PyTorch with gradient accumulation
             over two micro-batches of 8, BatchNorm updated by each in turn;
  dp2        --dp 2: DistributedDataParallel without SyncBatchNorm, each
             rank normalising its own 8 rows, the buffers rank 0's (DDP
             broadcasts rank 0's before each forward);
  pp2-m2-recompute  --pp 2 --microbatches 2 --recompute full: the
             backward's recomputation does not update them a second time;
  dp2-zero1, tp2 (stem -> bn1 -> conv and fc1 -> bn3 -> head split by
             channels and features: BatchNorm2d and BatchNorm1d statistics
             and both convolutions' weights in shards), and
  dp2-pp2-m2-interleaved (two virtual stages per rank): the same;
  dp2-sync, dp2-pp2-m2-sync  --sync-batchnorm (nn.SyncBatchNorm): each
             micro-batch normalises both ranks' parts together, so PyTorch
             runs one forward of their union (dp2: the serial program), the
             running statistics included; the second with --pp 2 and full
             recomputation;
  dp2-pp2-m2 --dp 2 --pp 2 --microbatches 2 (rank 0's two micro-batches
             of 4 images in turn; fewer rows make BatchNorm1d's gradient
             ill-conditioned: 2 rows normalise to +-1 whatever fc1 does);
  resume     6 steps, then resumed to 12 from the checkpoint: equal to the
             uninterrupted run (the buffers are saved and restored);
  trainable  merak-compile counts the running statistics and the counters
             as buffers, not as trainable parameters (before, AdamW's
             weight decay moved them);
  too-small  --dp 2 --microbatches 8 with a batch of 16 leaves the
             BatchNorm1d one value per channel: a compile error naming its
             running mean.
With torch 2.x (the project venv's Python; not in the default list), the
same module exported by the dynamo exporter (opset 20, optimize=False),
which writes training-mode BatchNorm as ONNX's inference mode (no
training_mode) and records the FX node it came from in each node's
metadata; merak reads the metadata and trains it as the module trains:
  dynamo-serial, dynamo-dp2-pp2-m2-sync  as serial and dp2-pp2-m2-sync;
  dynamo-optimized-refused  exported with optimize=True (torch's default),
             whose optimizer folds the batch norms into the convolutions
             with the running statistics: refused at import, naming them
             and the way to export.
Ends with "N passed, M failed".
"""
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
from merak_checkpoint import read_checkpoint  # noqa: E402
from check_runner import run_checks  # noqa: E402
from program_check import tool_output  # noqa: E402

STEPS, BATCH, SAMPLES, CLASSES, LR = 12, 16, 37, 10, 3e-3
LOSS_TOL, PARAM_TOL = 1e-4, 1e-4
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]
CONFIGS = {
    "serial": dict(),
    "m2": dict(m=2),
    "dp2": dict(dp=2),
    "pp2-m2-recompute": dict(pp=2, m=2, extra=("--recompute", "full")),
    "dp2-pp2-m2": dict(dp=2, pp=2, m=2),
    "dp2-zero1": dict(dp=2, extra=("--zero", "1")),
    "tp2": dict(tp=2),
    "dp2-pp2-m2-interleaved": dict(dp=2, pp=2, m=2,
                                   extra=("--schedule", "interleaved", "--virtual-stages", "2")),
    # --sync-batchnorm: each micro-batch's statistics over both ranks' rows.
    "dp2-sync": dict(dp=2, extra=("--sync-batchnorm",), sync=True),
    "dp2-pp2-m2-sync": dict(dp=2, pp=2, m=2, extra=("--sync-batchnorm", "--recompute", "full"),
                            sync=True),
    # torch 2.x's dynamo exporter (the venv's Python).
    "dynamo-serial": dict(exporter="dynamo20"),
    "dynamo-dp2-pp2-m2-sync": dict(dp=2, pp=2, m=2, extra=("--sync-batchnorm",), sync=True,
                                   exporter="dynamo20"),
}
CHECKS = [c for c in CONFIGS if not c.startswith("dynamo")] + ["resume", "trainable",
                                                                 "too-small"]
DYNAMO_CHECKS = [c for c in CONFIGS if c.startswith("dynamo")] + ["dynamo-optimized-refused"]


class BnCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(8, momentum=0.3)
        self.fc1 = nn.Linear(8 * 4 * 4, 16, bias=False)  # a bias before BN has no gradient
        self.bn3 = nn.BatchNorm1d(16)
        self.head = nn.Linear(16, CLASSES)

    def forward(self, x):
        x = F.relu(self.bn1(self.stem(x)))
        x = F.relu(self.bn2(self.conv(x)))
        x = F.avg_pool2d(x, 2).flatten(1)
        return self.head(F.relu(self.bn3(self.fc1(x))))


class Env:
    def __init__(self, bin_dir, work):
        self.bin_dir, self.work = bin_dir, work
        self.env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        torch.manual_seed(0)
        self.model = BnCnn()
        # Running statistics away from (0, 1), as a trained model has them.
        for bn in (self.model.bn1, self.model.bn2, self.model.bn3):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
        self.onnx = os.path.join(work, "bn-cnn.onnx")
        torch.onnx.export(self.model, (torch.zeros(BATCH, 3, 8, 8),), self.onnx,
                          opset_version=17, input_names=["image"], output_names=["logits"],
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          dynamic_axes={"image": {0: "batch"}})
        # The export's trace ran the module in training mode, which updated
        # its buffers; the file holds those (the state after the export).
        self.state = {k: v.clone() for k, v in self.model.state_dict().items()}
        self.data = os.path.join(work, "data")
        os.makedirs(self.data, exist_ok=True)
        rng = np.random.default_rng(5)
        self.images = rng.standard_normal((SAMPLES, 3, 8, 8)).astype(np.float32) * 1.5 + 0.3
        self.labels = rng.integers(0, CLASSES, SAMPLES).astype(np.int64)
        np.save(os.path.join(self.data, "image.npy"), self.images)
        np.save(os.path.join(self.data, "labels.npy"), self.labels)
        self.runs, self.references = {}, {}
        self.files = {"ts17": self.onnx}

    def export(self, exporter):
        """The module exported by `exporter` (ts17 in __init__; dynamo20,
        or dynamo20-optimized with torch's graph optimizer), written once;
        the module keeps the exported state."""
        if exporter not in self.files:
            path = os.path.join(self.work, exporter, "bn-cnn.onnx")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            torch.onnx.export(self.model, (torch.zeros(BATCH, 3, 8, 8),), path, dynamo=True,
                              optimize=exporter.endswith("-optimized"), opset_version=20,
                              input_names=["image"], output_names=["logits"],
                              dynamic_shapes=({0: torch.export.Dim("batch")},))
            self.model.load_state_dict(self.state)
            self.files[exporter] = path
        return self.files[exporter]

    def compile(self, dp=1, tp=1, pp=1, m=1, extra=(), check=True, exporter="ts17"):
        tag = "dp%d-tp%d-pp%d-m%d%s%s" % (dp, tp, pp, m, "".join(extra),
                                        "" if exporter == "ts17" else "-" + exporter)
        exe = os.path.join(self.work, "train-" + re.sub(r"\W", "", tag))
        cmd = [os.path.join(self.bin_dir, "merak-compile"), self.export(exporter), "-o", exe,
               "--input-shape", "image=%dx3x8x8" % BATCH,
               "--optimizer", "adamw", "--opt", "lr=%g" % LR] + list(extra)
        for flag, value in (("--dp", dp), ("--tp", tp), ("--pp", pp), ("--microbatches", m)):
            if value > 1:
                cmd += [flag, str(value)]
        if check:
            return tag, exe, 0, tool_output(cmd)
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        return tag, exe, p.returncode, p.stdout.decode()

    def train(self, dp=1, tp=1, pp=1, m=1, extra=(), steps=STEPS, ckpt=None, resume=False,
              exporter="ts17"):
        tag, exe, _, _ = self.compile(dp, tp, pp, m, extra, exporter=exporter)
        key = (tag, steps, ckpt, resume)
        if key in self.runs:
            return self.runs[key]
        metrics = os.path.join(self.work, os.path.basename(exe) + "-%d.jsonl" % steps)
        if os.path.exists(metrics):
            os.remove(metrics)
        if ckpt is None:
            ckpt = os.path.join(self.work, os.path.basename(exe) + "-ckpt")
            shutil.rmtree(ckpt, ignore_errors=True)
        cmd = [exe, "--data", self.data, "--steps", str(steps), "--sampler", "sequential",
               "--metrics", metrics, "--checkpoint-dir", ckpt] + (["--resume"] if resume else [])
        if dp * tp * pp > 1:
            cmd = MPIRUN + ["-np", str(dp * tp * pp)] + cmd
        tool_output(cmd, env=self.env)
        with open(metrics) as f:
            losses = [json.loads(line)["loss"] for line in f]
        self.runs[key] = losses, read_checkpoint(ckpt, steps)
        return self.runs[key]

    def fresh(self):
        """The module in float64 from the exported state, in training mode,
        its AdamW, and the images and labels as tensors."""
        model = BnCnn().double()
        model.load_state_dict(self.state)
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.999), eps=1e-8,
                                weight_decay=0.01)
        return model, opt, torch.from_numpy(self.images).double(), torch.from_numpy(self.labels)

    def reference(self, dp=1, m=1, sync=False):
        """PyTorch float64: per-step losses and the final state_dict, each
        data-parallel rank normalising its rows, rank 0's buffers kept; with
        `sync` (nn.SyncBatchNorm) each micro-batch normalises the rows of
        every rank's part together (one forward of their union)."""
        if sync:
            return self.sync_reference(dp, m)
        if (dp, m) in self.references:
            return self.references[(dp, m)]
        model, opt, x, y = self.fresh()
        part = BATCH // (dp * m)
        losses = []
        for step in range(STEPS):
            rows = [(step * BATCH + r) % SAMPLES for r in range(BATCH)]
            opt.zero_grad()
            start = {k: v.clone() for k, v in model.named_buffers()}
            kept, total = None, 0.0
            for d in reversed(range(dp)):  # rank 0 last: its buffers stay
                for k, v in model.named_buffers():
                    v.copy_(start[k])
                for mb in range(m):
                    idx = rows[d * BATCH // dp + mb * part:][:part]
                    loss = F.cross_entropy(model(x[idx]), y[idx]) / (dp * m)
                    loss.backward()
                    total += loss.item()
                kept = {k: v.clone() for k, v in model.named_buffers()}
            for k, v in model.named_buffers():
                v.copy_(kept[k])
            opt.step()
            losses.append(total)
        result = (losses, {k: v.numpy() for k, v in model.state_dict().items()})
        self.references[(dp, m)] = result
        return result

    def sync_reference(self, dp, m):
        """reference(dp, m, sync=True): micro-batch mb is the union of the dp
        ranks' mb-th parts (rank d's part: rows d * BATCH / dp + mb * part on),
        its loss the mean over the union (each rank's mean over its part,
        averaged over the ranks)."""
        model, opt, x, y = self.fresh()
        part = BATCH // (dp * m)
        losses = []
        for step in range(STEPS):
            rows = [(step * BATCH + r) % SAMPLES for r in range(BATCH)]
            opt.zero_grad()
            total = 0.0
            for mb in range(m):
                idx = [r for d in range(dp) for r in rows[d * BATCH // dp + mb * part:][:part]]
                loss = F.cross_entropy(model(x[idx]), y[idx]) / m
                loss.backward()
                total += loss.item()
            opt.step()
            losses.append(total)
        result = (losses, {k: v.numpy() for k, v in model.state_dict().items()})
        return result


def compare(got, ckpt, want, want_state, initial):
    """(ok, message): losses, running statistics and parameters."""
    loss_err = max(abs(a - b) / abs(b) for a, b in zip(got, want))
    ok = len(got) == len(want) and loss_err <= LOSS_TOL
    stats_err = param_err = 0.0
    missing = []
    counted = []
    for name, ref in want_state.items():
        if name not in ckpt:
            missing.append(name)
            continue
        if name.endswith("num_batches_tracked"):
            # Not in the ONNX file (torch's export drops the counter): merak
            # counts its own forwards from 0, torch's module from its value
            # after the export (whose trace ran one forward).
            counted.append(int(ckpt[name]) == int(ref) - int(initial[name]))
            continue
        err = float(np.max(np.abs(ckpt[name].astype(np.float64) - ref)) / np.max(np.abs(ref)))
        if "running" in name:
            stats_err = max(stats_err, err)
        else:
            param_err = max(param_err, err)
    ok = ok and not missing and stats_err <= PARAM_TOL and param_err <= PARAM_TOL
    ok = ok and len(counted) == 3 and all(counted)
    moved = max(float(np.max(np.abs(want_state[k] - initial[k].numpy())))
                for k in want_state if "running" in k)
    return ok, ("losses %.4f -> %.4f (torch %.4f -> %.4f) rel err %.2e; running stats "
                "err %.2e (they moved %.3f from the initial ones), params %.2e; "
                "num_batches_tracked %d of 3 equal%s" % (
                    got[0], got[-1], want[0], want[-1], loss_err, stats_err, moved, param_err,
                    sum(counted), "; missing " + ", ".join(missing) if missing else ""))


def check(env, name):
    if name in CONFIGS:
        cfg = dict(CONFIGS[name])
        sync = cfg.pop("sync", False)
        got, ckpt = env.train(**cfg)
        for key in ("extra", "pp", "tp", "exporter"):
            cfg.pop(key, None)
        cfg["sync"] = sync
        ok, msg = compare(got, ckpt, *env.reference(**cfg), env.state)
        if name.endswith("serial"):  # the checkpoint is the module's whole state_dict
            try:
                BnCnn().load_state_dict({k: torch.from_numpy(np.asarray(v))
                                         for k, v in ckpt.items()
                                         if not k.startswith("optimizer.")}, strict=True)
                msg += "; load_state_dict(strict=True) accepts it"
            except RuntimeError as e:
                ok, msg = False, msg + "; load_state_dict(strict=True): " + str(e)[:300]
        return ok, msg
    if name == "resume":
        full, full_ckpt = env.train()
        ckpt = os.path.join(env.work, "resume-ckpt")
        shutil.rmtree(ckpt, ignore_errors=True)
        first, _ = env.train(steps=STEPS // 2, ckpt=ckpt)
        rest, resumed = env.train(steps=STEPS, ckpt=ckpt, resume=True)
        loss_err = max(abs(a - b) / abs(b) for a, b in zip(first + rest, full))
        stats_err = max(float(np.max(np.abs(resumed[k] - full_ckpt[k])))
                        for k in full_ckpt if "running" in k or "num_batches" in k)
        ok = len(first + rest) == STEPS and loss_err <= 1e-6 and stats_err <= 1e-6
        return ok, "%d + %d steps: losses rel err %.2e, running stats abs err %.2e vs one run (counters included)" % (
            len(first), len(rest), loss_err, stats_err)
    if name == "trainable":
        _, _, _, out = env.compile()
        line = next((l for l in out.splitlines() if "trainable parameters" in l), out.strip())
        counts = re.search(r"(\d+) trainable parameters .*?(\d+) frozen \((\d+) of them buffers",
                           line)
        trainable = len(list(env.model.parameters()))
        ok = counts is not None and counts.groups() == (str(trainable), "9", "9")
        return ok, line
    if name == "dynamo-optimized-refused":
        _, _, rc, out = env.compile(exporter="dynamo20-optimized", check=False)
        ok = (rc == 1 and "the training-mode batch norms 'bn1', 'bn2', 'bn3' folded" in out and
              "optimize=False" in out)
        return ok, "exit %d: %s" % (rc, (out.strip().splitlines() or ["no output"])[-1][:400])
    if name == "too-small":
        _, _, rc, out = env.compile(dp=2, m=8, check=False)
        ok = rc != 0 and re.search(r"batch normalisation of 'bn3.running_mean' trains over 1 "
                                   r"value per channel", out) is not None
        return ok, (out.strip().splitlines() or ["no output"])[0]
    raise ValueError("unknown check " + name)


def main():
    return run_checks(Env, check, CHECKS)


if __name__ == "__main__":
    sys.exit(main())
