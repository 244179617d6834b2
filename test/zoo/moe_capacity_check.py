"""Expert capacity with token dropping (merak-compile --moe-capacity-factor
C [--moe-drop-policy probs|position]) against PyTorch and the serial program.

    $(scripts/venv-path.sh)/bin/python test/zoo/moe_capacity_check.py --bin build/bin \\
        --workdir DIR [CHECK...]

The models are test/zoo/zoo.py's scaled-down Hugging Face MoE models (4
experts, top-2), exported with TorchScript at opset 17 with a batch of 8.
In every layer each expert keeps at most ceil(C x S / E) of the S rows (a
token's top-k choice) of one part of the batch: the rows of the highest
routing weight (probs; the lower row among equal ones) or its first rows
(position). A dropped row adds nothing and gets no gradient.
  mixtral    C = 1.0, probs: merak's 20 AdamW steps equal PyTorch's float64
             training of the same module whose experts see the dropped rows'
             routing weights zeroed (per-step loss rel err <= 1e-4); they
             differ from the dropless PyTorch run by more than 10x that, and
             the metrics show rows dropped (moe_dropped, moe_drop_fraction)
  gpt-oss    C = 1.25, position (experts with biases: a dropped row's bias
             must not leak into the output)
  qwen2-moe  C = 1.0, probs (a shared expert beside the routed ones)
  parallel   Mixtral at C = 1.0, position: each part of the batch has its
             own capacity, so --dp 2 --ep 2 equals the serial program with
             --microbatches 2, and --dp 4 --ep 4 (two-level all-to-all on
             nodes of 2), --dp 2 --ep 2 --moe-dispatcher allgather,
             --dp 2 --ep 2 --pp 2 --microbatches 2 and --dp 2 --ep 2 --tp 2
             (every tp rank drops the same rows) equal theirs (<= 1e-5
             over 20 steps, AdamW with clip-norm 1.0), and the dp 2 ep 2
             program's exchanges carry compact rows (half the positional
             ones). The probs policy's
             decisions flip on last-bit differences of the routing weights
             (another summation order), after which the runs part: at
             --dp 2 --ep 2 it stays bitwise for 17 steps, then 3e-4; the
             position policy depends on the top-k choices only
  dynamic    the same with chunked all-to-alls (--moe-chunks 2), and at C =
             1.5 (loads uneven enough to act on) with shadowing (--moe-shadow
             1) and dynamic placement (--moe-rebalance-every 2), which must
             shadow and move experts: the dropped rows are routed by none
             of them. Every parallel run must drop rows in every step
  recompute  --pp 2 --microbatches 2 with --recompute full against
             --recompute none: the same losses and the same moe_dropped in
             every step (the backward's recomputed routing is not counted
             again)
  errors     a capacity factor <= 0 or not a number, an unknown drop policy,
             a drop policy without a capacity, and a capacity on a model
             without expert GEMMs are errors naming the cause
Ends with "N passed, M failed".
"""
import math
import os
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
import zoo  # noqa: E402
from check_runner import run_checks  # noqa: E402
from expert_parallel_check import Env, rel_err  # noqa: E402
from moe_aux_check import reference  # noqa: E402

TOL_TORCH, TOL = 1e-4, 1e-5


def keep_mask(index, weights, factor, policy):
    """1 for the (token, choice) rows each expert keeps, 0 for the dropped."""
    ids, probs = index.reshape(-1).tolist(), weights.reshape(-1).tolist()
    experts = 4
    capacity = max(1, math.ceil(len(ids) * factor / experts))
    keep = [0.0] * len(ids)
    for e in range(experts):
        rows = [s for s, i in enumerate(ids) if i == e]
        if policy == "probs":
            rows.sort(key=lambda s: (-probs[s], s))
        for s in rows[:capacity]:
            keep[s] = 1.0
    return torch.tensor(keep, dtype=weights.dtype).reshape(weights.shape)


def with_capacity(factor, policy):
    """Patches every experts module of a transformers model so that the
    dropped rows' routing weights are zero."""
    def prepare(hf):
        for m in hf.modules():
            if type(m).__name__.endswith("Experts"):
                def forward(h, index, weights, _orig=m.forward):
                    return _orig(h, index, weights * keep_mask(index, weights, factor, policy))
                m.forward = forward
    return prepare


def check_torch(env, name, factor, policy):
    module, _ = zoo.build(name)
    path, frozen = env.model(name)  # the export, made once per model
    exe = os.path.join(env.work, name, "train-capacity")
    cmd = [os.path.join(env.bin_dir, "merak-compile"), path, "--input-shape",
           "input_ids=%dx%d" % (zoo.B, zoo.T), "--optimizer", "adamw", "--opt", "lr=3e-3",
           "--moe-capacity-factor", str(factor), "--moe-drop-policy", policy, "-o", exe]
    for f in frozen:
        cmd += ["--frozen", f]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    metrics = env.metrics(exe, zoo.STEPS)
    got = [m["loss"] for m in metrics]
    tokens = zoo.Zoo(env.bin_dir, os.path.join(env.work, "data")).tokens
    # zoo.build seeds its weights, so this module equals the exported one.
    want = reference(module, False, tokens, with_capacity(factor, policy))
    dropless = reference(module, False, tokens)
    err, err_dropless = rel_err(got, want), rel_err(got, dropless)
    dropped = [m.get("moe_dropped", 0) for m in metrics]
    fraction = sum(m.get("moe_drop_fraction", 0) for m in metrics) / len(metrics)
    ok = len(got) == zoo.STEPS and err <= TOL_TORCH and err_dropless > 10 * TOL_TORCH and \
        all(d > 0 for d in dropped)
    return ok, ("C=%g %s: losses %.5f -> %.5f (torch %.5f -> %.5f); max rel err %.1e, "
                "%.1e against dropless torch; %.0f%% of the rows dropped on average" % (
                    factor, policy, got[0], got[-1], want[0], want[-1], err, err_dropless,
                    100 * fraction))


def versus_microbatched(env, flags, ranks, parts, factor="1.0", nodes=None, run=(),
                        shows=()):
    """The parallel program against the serial one with one micro-batch per
    data-parallel part; the metrics named in `shows` must be positive in
    some step, and rows must be dropped in every step."""
    cap = ["--moe-capacity-factor", factor, "--moe-drop-policy", "position"]
    serial = env.serial_losses("mixtral", cap + ["--microbatches", str(parts)])
    tag = "cap" + "".join(f.strip("-") for f in cap + flags)
    metrics = env.metrics(env.compile("mixtral", tag, cap + flags), zoo.STEPS, ranks, run,
                          nodes)
    err = rel_err([m["loss"] for m in metrics], serial)
    dropped = all(m.get("moe_dropped", 0) > 0 for m in metrics)
    seen = {k: sum(m.get(k, 0) for m in metrics) for k in shows}
    ok = err <= TOL and dropped and all(seen.values())
    return ok, "C=%s %s: max rel err %.1e vs serial m%d%s%s" % (
        factor, " ".join(flags), err, parts, "" if dropped else ", a step dropped no row",
        "".join(", %s %d" % kv for kv in seen.items()))


def check_parallel(env, cases, compact=False):
    results = [versus_microbatched(env, *case[:3], **(case[3] if len(case) > 3 else {}))
               for case in cases]
    if compact:
        # The capacity bounds a rank's rows: 2 experts x 2 ranks x ceil(128 /
        # 4) = 128 compact rows of the group's 256 (dp 2 ep 2, 4 experts).
        ir = env.compile("mixtral", "compact-ir",
                         ["--dp", "2", "--ep", "2", "--moe-capacity-factor", "1.0",
                          "--compile-to=overlap"])
        text = open(ir).read()
        exchanges, lists = text.count("compact = 128 :"), text.count("merak.expert_compact")
        results.append((exchanges > 0 and lists > 0,
                        "%d compact all-to-alls, %d merak.expert_compact in the dp 2 ep 2 IR" % (
                            exchanges, lists)))
    return all(ok for ok, _ in results), "; ".join(msg for _, msg in results)


PARALLEL = [
    (["--dp", "2", "--ep", "2"], 2, 2),
    (["--dp", "4", "--ep", "4", "--moe-all-to-all", "hierarchical"], 4, 4,
     {"nodes": {"MERAK_RANKS_PER_NODE": "2"}}),
    (["--dp", "2", "--ep", "2", "--moe-dispatcher", "allgather"], 2, 2),
    (["--dp", "2", "--ep", "2", "--pp", "2", "--microbatches", "2"], 4, 4),
    (["--dp", "2", "--ep", "2", "--tp", "2"], 4, 2),
]
# A capacity of 1.5 leaves the experts' loads uneven enough to shadow and
# move experts.
DYNAMIC = [
    (["--dp", "2", "--ep", "2", "--moe-chunks", "2"], 2, 2),
    (["--dp", "4", "--ep", "4", "--moe-shadow", "1", "--moe-shadow-min-rows", "1"], 4, 4,
     {"factor": "1.5", "shows": ["moe_shadowed"]}),
    (["--dp", "2", "--ep", "2", "--moe-rebalance-every", "2"], 2, 2,
     {"factor": "1.5", "run": ["--moe-rebalance-min-rows", "0"], "shows": ["moe_moved"]}),
]


def check_recompute(env):
    cap = ["--moe-capacity-factor", "1.0", "--moe-drop-policy", "position", "--pp", "2",
           "--microbatches", "2"]
    runs = {}
    for mode in ("none", "full"):
        exe = env.compile("mixtral", "recompute-" + mode, cap + ["--recompute", mode])
        runs[mode] = env.metrics(exe, zoo.STEPS, 2)
    dropped = {k: [m.get("moe_dropped", 0) for m in v] for k, v in runs.items()}
    err = rel_err([m["loss"] for m in runs["full"]], [m["loss"] for m in runs["none"]])
    ok = err <= TOL and dropped["full"] == dropped["none"] and all(d > 0 for d in dropped["none"])
    return ok, "pp 2: losses max rel err %.1e; rows dropped per step, recompute none %s, " \
        "full %s" % (err, dropped["none"][:4], dropped["full"][:4])


def check_errors(env):
    cases = [
        (["--moe-capacity-factor", "0", "--moe-drop-policy", "probs"], "mixtral",
         "--moe-drop-policy needs --moe-capacity-factor"),
        (["--moe-capacity-factor", "-1"], "mixtral", "--moe-capacity-factor must be a finite"),
        (["--moe-capacity-factor", "nan"], "mixtral", "--moe-capacity-factor must be a finite"),
        (["--moe-capacity-factor", "1", "--moe-drop-policy", "random"], "mixtral",
         "--moe-drop-policy must be probs or position"),
        (["--moe-capacity-factor", "1"], "dense-moe", "needs a Mixture-of-Experts model"),
    ]
    bad = []
    for flags, model, want in cases:
        p = env.compile(model, "error", flags, check=False)
        if p.returncode == 0 or want not in p.stdout or "Assertion" in p.stdout:
            bad.append("%s: exit %d, %r" % (" ".join(flags), p.returncode, p.stdout[-300:]))
    return not bad, "; ".join(bad) if bad else "%d bad inputs refused with their cause" % len(
        cases)


CHECKS = {
    "mixtral": lambda env: check_torch(env, "mixtral", 1.0, "probs"),
    "gpt-oss": lambda env: check_torch(env, "gpt-oss", 1.25, "position"),
    "qwen2-moe": lambda env: check_torch(env, "qwen2-moe", 1.0, "probs"),
    "parallel": lambda env: check_parallel(env, PARALLEL, compact=True),
    "dynamic": lambda env: check_parallel(env, DYNAMIC),
    "recompute": check_recompute,
    "errors": check_errors,
}


def main():
    return run_checks(Env, lambda env, name: CHECKS[name](env), list(CHECKS))


if __name__ == "__main__":
    sys.exit(main())
