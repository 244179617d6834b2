"""The Mixture-of-Experts load-balancing loss (merak-compile --moe-aux-loss)
against transformers' own (router_aux_loss_coef x load_balancing_loss_func).

    $(scripts/venv-path.sh)/bin/python test/zoo/moe_aux_check.py --bin build/bin \\
        --workdir DIR [MODEL...]

For each model of test/zoo/zoo.py (default: mixtral, whose router takes the
top-k of its softmax, and gpt-oss, which takes the top-k of the logits and
softmaxes them after), exported with TorchScript at opset 17:
  - merak's 20 AdamW steps with --moe-aux-loss 0.02 equal PyTorch's float64
    training of the same module with loss = cross-entropy + 0.02 x the
    module's aux_loss (output_router_logits=True): per-step loss relative
    error <= 1e-4;
  - the check can fail: the same run differs from PyTorch without the aux
    loss by more than that, and merak's step-0 loss exceeds the plain
    cross-entropy by 0.02 x aux (about 0.02 x k at a balanced start).
Check "parallel" (Mixtral): each part of the batch computes the aux loss
over its own tokens, so --dp 2 --tp 2 --pp 2 --microbatches 2 (8 ranks;
the routers of both stages feed the last stage's loss) equals the serial
program with --microbatches 4 (the same four parts of the batch of 8): 10
SGD steps, per-step loss relative error <= 1e-5.
Ends with "N passed, M failed".
"""
import copy
import json
import os
import subprocess
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
import zoo  # noqa: E402
from check_runner import run_checks  # noqa: E402

COEF = 0.02


def reference(wrapper, with_aux, tokens, prepare=None):
    """PyTorch float64 AdamW (zoo.reference's settings), loss CE (+ COEF x
    the model's aux_loss); `prepare` may change the float64 copy first."""
    hf = copy.deepcopy(wrapper.model).double().train()
    if prepare:
        prepare(hf)
    opt = torch.optim.AdamW(hf.parameters(), lr=3e-3, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.01)
    losses = []
    for x, y in zoo.token_batches(tokens, zoo.B, zoo.STEPS):
        opt.zero_grad()
        out = hf(input_ids=x, attention_mask=torch.ones_like(x), use_cache=False,
                 output_router_logits=True, return_dict=True)
        loss = F.cross_entropy(out.logits.reshape(-1, out.logits.size(-1)), y.reshape(-1))
        if with_aux:
            loss = loss + COEF * out.aux_loss
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def rel_err(a, b):
    return max(abs(x - y) / abs(y) for x, y in zip(a, b))


def check(name, bin_dir, work, data):
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    module, example = zoo.build(name)
    state = copy.deepcopy(module.state_dict())
    onnx_path = os.path.join(d, "model.onnx")
    zoo.export(module, example, onnx_path, "ts17")
    module.load_state_dict(state)
    frozen = zoo.non_parameter_initializers(onnx_path, module)
    exe = os.path.join(d, "train")
    cmd = [os.path.join(bin_dir, "merak-compile"), onnx_path, "--input-shape",
           "input_ids=%dx%d" % (zoo.B, zoo.T), "--optimizer", "adamw", "--opt", "lr=3e-3",
           "--moe-aux-loss", str(COEF), "-o", exe]
    for f in frozen:
        cmd += ["--frozen", f]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    got = train(exe, data, zoo.STEPS)
    tokens = zoo.Zoo(bin_dir, os.path.join(work, "data")).tokens
    want = reference(module, True, tokens)
    plain = reference(module, False, tokens)
    err, err_plain = rel_err(got, want), rel_err(got, plain)
    ok = len(got) == zoo.STEPS and err <= zoo.TOLERANCE and err_plain > 10 * zoo.TOLERANCE \
        and got[0] > plain[0]
    return ok, ("losses %.5f -> %.5f (torch with aux %.5f -> %.5f, without %.5f -> %.5f); "
                "max rel err %.1e with the aux loss, %.1e without" % (
                    got[0], got[-1], want[0], want[-1], plain[0], plain[-1], err, err_plain))


def train(exe, data, steps, ranks=1):
    metrics = exe + ".jsonl"
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = [exe, "--data", data, "--steps", str(steps), "--sampler", "sequential", "--metrics",
           metrics]
    if ranks > 1:
        cmd = zoo.MPIRUN + ["-np", str(ranks)] + cmd
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL,
                   env=dict(os.environ, OMP_NUM_THREADS="1"))
    return [json.loads(line)["loss"] for line in open(metrics)]


def check_parallel(bin_dir, work, data):
    d = os.path.join(work, "parallel")
    os.makedirs(d, exist_ok=True)
    module, example = zoo.build("mixtral")
    onnx_path = os.path.join(d, "model.onnx")
    zoo.export(module, example, onnx_path, "ts17")
    base = [os.path.join(bin_dir, "merak-compile"), onnx_path, "--input-shape",
            "input_ids=8x%d" % zoo.T, "--optimizer", "sgd", "--opt", "lr=0.02",
            "--moe-aux-loss", str(COEF)]
    losses = {}
    for tag, mesh, ranks in [("m4", ["--microbatches", "4"], 1),
                             ("d2t2p2m2", ["--dp", "2", "--tp", "2", "--pp", "2",
                                           "--microbatches", "2"], 8)]:
        exe = os.path.join(d, "train-" + tag)
        subprocess.run(base + mesh + ["-o", exe], check=True, stdout=subprocess.DEVNULL)
        losses[tag] = train(exe, data, 10, ranks)
    err = rel_err(losses["d2t2p2m2"], losses["m4"])
    return err <= 1e-5 and len(losses["m4"]) == 10, (
        "losses %.5f -> %.5f; dp2 tp2 pp2 m2 vs serial m4: max rel err %.1e" % (
            losses["m4"][0], losses["m4"][-1], err))


class Env:
    def __init__(self, bin_dir, work):
        self.bin_dir, self.work = bin_dir, work
        self.data = zoo.Zoo(bin_dir, os.path.join(work, "data")).tokens_file


def main():
    def one(env, name):
        if name == "parallel":
            return check_parallel(env.bin_dir, env.work, env.data)
        return check(name, env.bin_dir, env.work, env.data)
    return run_checks(Env, one, ["mixtral", "gpt-oss", "parallel"])


if __name__ == "__main__":
    sys.exit(main())
