"""--grad-reduce bf16 (merak-grad-reduce-precision) on CPUs with mpirun.

    /usr/bin/python3 test/parallel/grad_reduce_check.py --bin BUILD/bin --workdir DIR [CHECK...]

The parallel checks' GPT-2-style decoder (parallel_check.py: 4 layers, 64
wide, batch 4 x 16 tokens) compiled with --grad-reduce bf16. Checks:
  step-<mesh>   one SGD step with lr = 1 (the checkpoint then holds
                p - g, g the reduced gradient) at dp 2 with the default
                started buckets, blocking buckets (--dp-overlap off),
                --zero 1, --tp 2 and a pipeline (--pp 2, 2 micro-batches):
                g must be the bf16 policy computed independently in float64
                torch, bf16(bf16(g0) + bf16(g1)) / 2 with g_r the gradient
                of data-parallel rank r's rows, to 5e-4 (relative norm per
                tensor; an occasional rounding-boundary flip from float32
                vs float64 gradients), and at least 5x further from the
                float64 mean (g0 + g1) / 2, i.e. the reduction really was
                bf16. In the pipeline the tied embedding's two halves (the
                input embedding on the first stage, the LM head on the
                last) are reduced on their stages and summed over pp in
                float32, so the policy rounds each half;
  adamw-dp2     20 AdamW steps: losses fall and stay within 1e-3 relative
                of the serial float32 program's (and differ from them), the
                final weights within 5e-2 (norm-wise; a bias whose gradient
                is tiny moves by noise-driven lr-sized AdamW steps).
Ends with "N passed, M failed".
"""
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
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import export_models as em  # noqa: E402
import parallel_check as pc  # noqa: E402
from program_check import is_causal_mask  # noqa: E402
from check_runner import run_checks  # noqa: E402
from merak_checkpoint import read_checkpoint  # noqa: E402

SGD_LR1 = ["--optimizer", "sgd", "--opt", "lr=1", "--opt", "weight-decay=0"]
ADAMW = pc.CONFIGS["adamw"][0]
MESHES = {
    "dp2": (2, []),
    "dp2-blocking": (2, ["--dp-overlap", "off"]),
    "dp2-zero1": (2, ["--zero", "1"]),
    "dp2-tp2": (4, ["--tp", "2"]),
    "dp2-pp2-m2": (4, ["--pp", "2", "--microbatches", "2", "--schedule", "1f1b"]),
}
TIED, HEAD = "transformer.wte.weight", "lm_head.weight"


class Env(pc.Env):
    def run_program(self, name, flags, ranks, steps):
        """Compiles (once) and trains `steps`: losses and the checkpoint."""
        exe = os.path.join(self.work, "train-" + name)
        if not os.path.exists(exe):
            pc.run([os.path.join(self.bin_dir, "merak-compile"), self.onnx,
                    "--input-shape", "input_ids=%dx%d" % (pc.BATCH, pc.SEQ),
                    "--compile-to=binary", "--frozen", "*.attn.bias", "-o", exe] + flags)
        metrics = os.path.join(self.work, name + ".jsonl")
        ckpt = os.path.join(self.work, name + "-ckpt")
        for path in (metrics,):
            if os.path.exists(path):
                os.remove(path)
        cmd = [exe, "--data", self.data, "--steps", str(steps), "--sampler", "sequential",
               "--metrics", metrics, "--checkpoint-dir", ckpt]
        if ranks > 1:
            cmd = pc.MPIRUN + ["-np", str(ranks)] + cmd
        pc.run(cmd, env=self.env)
        with open(metrics) as f:
            losses = [json.loads(line)["loss"] for line in f]
        return losses, read_checkpoint(ckpt, steps)

    def model(self):
        """The float64 torch model the ONNX file was exported from."""
        torch.manual_seed(0)
        m = em.GPT2(vocab_size=self.vocab, n_embd=64, n_head=4, n_layer=4, block_size=pc.SEQ)
        return m.double()


def first_batch(env):
    tokens = np.fromfile(env.data, dtype=np.uint16).astype(np.int64)
    rows = [tokens[r * pc.SEQ:r * pc.SEQ + pc.SEQ + 1] for r in range(pc.BATCH)]
    data = torch.from_numpy(np.stack(rows))
    return data[:, :-1], data[:, 1:]


def rank_gradients(env, dp):
    """[{name: gradient}] of each data-parallel rank's rows (float64), the
    tied embedding's use by the LM head untied as HEAD."""
    ids, labels = first_batch(env)
    per = pc.BATCH // dp
    out = []
    for r in range(dp):
        model = env.model()
        model.lm_head.weight = torch.nn.Parameter(model.transformer.wte.weight.detach().clone())
        logits = model(ids[r * per:(r + 1) * per])
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)),
                               labels[r * per:(r + 1) * per].reshape(-1))
        loss.backward()
        out.append({n: p.grad.clone() for n, p in model.named_parameters()})
    return out, {n: p.detach().clone() for n, p in env.model().named_parameters()}


def rb(t):
    return t.to(torch.bfloat16).to(torch.float64)


def check_step(env, mesh):
    ranks, flags = MESHES[mesh]
    _, params = env.run_program("sgd-" + mesh, SGD_LR1 + ["--dp", "2", "--grad-reduce", "bf16"]
                                + flags, ranks, 1)
    grads, before = rank_gradients(env, 2)
    e_policy = e_exact = 0.0
    compared = 0
    split = "pp" in mesh
    for name, g0 in grads[0].items():
        if is_causal_mask(name) or name == HEAD:
            continue
        g1 = grads[1][name]
        if name == TIED and split:
            h0, h1 = grads[0][HEAD], grads[1][HEAD]
            policy = (rb(rb(g0) + rb(g1)) * 0.5 + rb(rb(h0) + rb(h1)) * 0.5).numpy()
            g0, g1 = g0 + h0, g1 + h1
        else:
            if name == TIED:
                g0, g1 = g0 + grads[0][HEAD], g1 + grads[1][HEAD]
            policy = (rb(rb(g0) + rb(g1)) * 0.5).numpy()
        exact = ((g0 + g1) * 0.5).numpy()
        mine = before[name].numpy() - params[name].astype(np.float64)
        norm = np.linalg.norm(exact)
        e_policy = max(e_policy, np.linalg.norm(mine - policy) / norm)
        e_exact = max(e_exact, np.linalg.norm(mine - exact) / norm)
        compared += 1
    ok = compared > 0 and e_policy <= 5e-4 and e_exact >= 5 * e_policy
    return ok, ("%d gradients: max rel err vs the bf16 policy %.2e (<= 5e-4), vs the float64 "
                "mean %.2e (>= 5x)" % (compared, e_policy, e_exact))


def check_adamw(env):
    serial, serial_params = env.run_program("adamw-serial", ADAMW, 1, pc.STEPS)
    got, params = env.run_program("adamw-dp2-bf16", ADAMW + ["--dp", "2", "--grad-reduce",
                                                             "bf16"], 2, pc.STEPS)
    if len(got) != pc.STEPS:
        return False, "%d metrics lines" % len(got)
    loss_err = max(abs(a - b) / abs(b) for a, b in zip(got, serial))
    weights = {n: v for n, v in serial_params.items() if not n.startswith("optimizer.")}
    param_err = pc.max_param_err(params, weights)
    ok = loss_err <= 1e-3 and param_err <= 5e-2 and got[-1] < got[0] and loss_err > 0
    return ok, ("losses %.4f -> %.4f (serial fp32 %.4f -> %.4f), max rel err %.2e (<= 1e-3); "
                "weights %.2e (<= 5e-2: AdamW turns a small gradient's bf16 noise into lr-sized "
                "steps)" % (got[0], got[-1], serial[0], serial[-1], loss_err, param_err))


CHECKS = dict({"step-" + m: (lambda e, m=m: check_step(e, m)) for m in MESHES},
              **{"adamw-dp2": check_adamw})


def main():
    return run_checks(Env, lambda env, name: CHECKS[name](env), CHECKS)


if __name__ == "__main__":
    sys.exit(main())
