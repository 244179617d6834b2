"""Expert parallelism (merak-compile --ep N) against the serial program.

    $(scripts/venv-path.sh)/bin/python test/zoo/expert_parallel_check.py --bin build/bin \\
        --workdir DIR [CHECK...]

The models are test/zoo/zoo.py's scaled-down Hugging Face MoE models (4
experts, top-2), exported with TorchScript at opset 17 with a batch of 8.
Every parallel program trains 20 steps of AdamW (clip-norm 1.0, so the
experts' squares are summed over the ep group) on the same sequential
batches as the serial program; per-step loss relative error <= 1e-5, and
each parameter's first-step gradient (AdamW's exp_avg in a checkpoint
after one step) within 1e-5 of the serial one's (zoo.compare_first_step):
  ep2        Mixtral, --dp 2 --ep 2 (2 ranks, one ep group)
  ep4        Mixtral, --dp 4 --ep 4 (4 ranks, one expert per rank)
  ep2-dp4    Mixtral, --dp 4 --ep 2 (two ep groups; each expert's gradient
             is averaged over its expert-data-parallel pair)
  ep2-tp2    Mixtral, --dp 2 --ep 2 --tp 2 (attention tensor-parallel, the
             experts replicated over tp, each tp rank computing its half of
             the expert rows: the --report's all-to-all bytes per rank are
             half of --dp 2 --ep 2's, and tp all-gathers rejoin the rows)
  ep2-pp2    Mixtral, --dp 2 --ep 2 --pp 2 --microbatches 2 (a MoE layer
             in each stage; 1F1B)
  ep2-schedules  Mixtral at --dp 2 --ep 2 --pp 2 (4 ranks) with zb-h1 (the
             weight gradients split off), interleaved (2 virtual stages) and
             full recomputation (the dispatch recomputed)
  ep2-zero   Mixtral, --dp 4 --ep 2 --zero 1 (the experts' optimizer state
             split over their expert-data-parallel pair, the rest over dp)
  ep2-pp2-zero  Mixtral, --dp 4 --ep 2 --pp 2 --microbatches 2 --zero 1 (8 ranks)
  gpt-oss    GPT-OSS (experts [E, in, out] with per-expert biases), --dp 2 --ep 2
  families   the zoo's other MoE families at --dp 2 --ep 2: Qwen2-MoE (a gated
             shared expert), DeepSeek-V3 (sigmoid group-limited routing, a
             shared expert, a dense first layer), Jamba (MoE beside Mamba
             layers) and JetMoE (dynamo 20: rows sorted across the batch by
             expert, each expert on its segment, in the MLP and attention)
  eager      Mixtral with transformers' eager experts (the traced per-expert
             loop, batched by the importer): --dp 2 --ep 2 --tp 2 and --dp 4
             --ep 4 --zero 1
  aux        Mixtral with --moe-aux-loss 0.02: --dp 2 --ep 2 equals the
             serial program with --microbatches 2 (each part of the batch
             computes the aux loss over its own tokens)
  allgather  --moe-dispatcher allgather (every rank gathers the group's
             tokens) gives bitwise the losses of the default alltoall
             dispatcher (merak.all_to_all), at --dp 4 --ep 2 and --ep 4
  resume     --dp 2 --ep 2: 10 steps with a checkpoint, resumed to 20, are
             bitwise the uninterrupted run; the serial program (ep 1)
             resumed from that checkpoint stays within 1e-6 of it
  shadow     dynamic shadowing (--moe-shadow, every step's hottest experts
             copied to every ep rank; --moe-shadow-min-rows 1 so that the
             small batch shadows some): --dp 2 --ep 2 with one slot, --dp 4
             --ep 4 --zero 1 with two, and one slot with --pp 2 (zb-h1, full
             recomputation: the plan recomputed) and with --tp 2 stay within
             1e-6 of plain expert parallelism and 1e-5 of serial, and the
             metrics show experts
             shadowed in at least 3 of the 20 steps (the plan shadows only
             when it lowers the busiest rank's rows, which the random
             router's routing does not always allow)
  hierarchical  --moe-all-to-all hierarchical (two exchanges: within nodes,
             then across; nodes of 2 ranks faked by MERAK_RANKS_PER_NODE=2)
             gives bitwise the flat all-to-all's losses at --dp 4 --ep 4,
             with shadowing, and with --pp 2 (8 ranks)
  rebalance  dynamic placement (--moe-rebalance-every 2, and
             --moe-rebalance-min-rows 0 so that any better balance moves
             experts): --dp 2 --ep 2, --dp 4 --ep 2 (two ep groups agree),
             the same with --zero 1 (the moments gathered over each expert's
             edp pair to move), --pp 2 (a table per stage), --tp 2 and with
             --moe-shadow stay
             within 1e-6 of plain expert parallelism and 1e-5 of serial, with
             experts moved at least once; a resume at step 10 is bitwise the
             uninterrupted run, one under --dp 4 --ep 4 within 1e-6, and the
             serial program (no tables) refuses the moved checkpoint
  chunked    --moe-chunks K (every expert GEMM's rows and all-to-alls in K
             chunks, started early and waited late so that a chunk's
             exchange runs under another's GEMM): --dp 2 --ep 2 with 2,
             --dp 4 --ep 4 with 4, --pp 2 with 2, and with rebalancing stay
             within 1e-6 of plain expert parallelism and 1e-5 of serial, and
             the program's IR has the started all-to-alls
  histogram  ./train --moe-histogram counts the rows each expert got (4
             dispatches per layer and step), and merak-compile --simulate
             --moe-histogram gives the busiest rank's share computed from
             the file by hand
  sp         --sequence-parallel on with MoE layers: --tp 2 (the experts
             split over tp; each layer's combine on this rank's rows, after
             a reduce-scatter of the expert rows), --dp 2 --ep 2 --tp 2 and
             with --pp 2 --microbatches 2 equal the serial program, and at
             --tp 2 the tp all-reduces left move under 5 % of plain tensor
             parallelism's bytes (--report=json)
  errors     --ep not dividing --dp, --ep on a dense model, rebalancing with
             --target cuda, an unknown --moe-dispatcher, placement or shadowing without
             ep, chunks with shadowing or not dividing the rows are errors
             naming the cause
The checks can fail: "ep2" also compares against a serial run with another
learning rate, which must differ by more than the tolerance.
Ends with "N passed, M failed".
"""
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
import zoo  # noqa: E402
from check_runner import run_checks  # noqa: E402

STEPS, TOL, BATCH = 20, 1e-5, 8
OPT = ["--optimizer", "adamw", "--opt", "lr=3e-3", "--opt", "clip-norm=1.0"]


# JetMoE's TorchScript export bakes the example's expert counts into its
# split (docs/models.md, gap 4): its dynamo export instead.
EXPORTERS = {"jetmoe": "dynamo20"}


def rel_err(a, b):
    if len(a) != len(b):
        return float("inf")
    return max(abs(x - y) / abs(y) for x, y in zip(a, b))


class Env:
    def __init__(self, bin_dir, work):
        self.bin_dir, self.work = bin_dir, work
        self.data = zoo.Zoo(bin_dir, os.path.join(work, "data")).tokens_file
        self.models, self.serial = {}, {}

    def model(self, name):
        """The model's ONNX export (batch 8 bound at compile time)."""
        if name not in self.models:
            d = os.path.join(self.work, name)
            os.makedirs(d, exist_ok=True)
            module, example = zoo.build(name)
            path = os.path.join(d, "model.onnx")
            zoo.export(module, example, path, EXPORTERS.get(name, "ts17"))
            self.models[name] = (path, zoo.non_parameter_initializers(path, module))
        return self.models[name]

    def compile(self, name, tag, flags, check=True):
        path, frozen = self.model(name)
        exe = os.path.join(self.work, name, "train-" + tag)
        cmd = [os.path.join(self.bin_dir, "merak-compile"), path, "--input-shape",
               "input_ids=%dx%d" % (BATCH, zoo.T)] + OPT + flags + ["-o", exe]
        for f in frozen:
            cmd += ["--frozen", f]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if check and p.returncode != 0:
            raise RuntimeError("merak-compile %s failed:\n%s" % (" ".join(flags), p.stdout))
        return exe if check else p

    def train(self, exe, steps, ranks=1, extra=(), env=None):
        return [m["loss"] for m in self.metrics(exe, steps, ranks, extra, env)]

    def metrics(self, exe, steps, ranks=1, extra=(), env=None):
        metrics = exe + ".jsonl"
        if os.path.exists(metrics):
            os.remove(metrics)
        cmd = [exe, "--data", self.data, "--steps", str(steps), "--sampler", "sequential",
               "--metrics", metrics] + list(extra)
        if ranks > 1:
            cmd = zoo.MPIRUN + ["-np", str(ranks)] + cmd
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL,
                       env=dict(os.environ, OMP_NUM_THREADS="1", **(env or {})))
        return [json.loads(line) for line in open(metrics)]

    def serial_losses(self, name, flags=()):
        key = (name, tuple(flags))
        if key not in self.serial:
            tag = "serial" + "".join(f.strip("-") for f in flags)
            self.serial[key] = self.train(self.compile(name, tag, list(flags)), STEPS)
        return self.serial[key]


def versus_serial(env, name, flags, ranks, serial_flags=()):
    """The losses of 20 steps, then every parameter's first-step gradient
    (AdamW's exp_avg after one step), against the serial program's."""
    want = env.serial_losses(name, serial_flags)
    tag = "".join(f.strip("-") for f in flags)
    exe = env.compile(name, tag, flags)
    got = env.train(exe, STEPS, ranks)
    err = rel_err(got, want)
    msg = "%s on %d ranks: losses %.5f -> %.5f, max rel err %.1e vs serial" % (
        " ".join(flags), ranks, got[0], got[-1], err)
    serial = os.path.join(env.work, name, "train-serial" + "".join(
        f.strip("-") for f in serial_flags))
    state = "optimizer.adamw.exp_avg."
    note, same = zoo.compare_first_step(
        zoo.first_step_state(serial, env.data, 1, state, dict(os.environ, OMP_NUM_THREADS="1")),
        zoo.first_step_state(exe, env.data, ranks, state, dict(os.environ, OMP_NUM_THREADS="1")),
        TOL)
    return err <= TOL and same, msg + "; first-step gradients " + note


def check_ep2(env):
    ok, msg = versus_serial(env, "mixtral", ["--dp", "2", "--ep", "2"], 2)
    other = env.train(env.compile("mixtral", "serial-lr", ["--opt", "lr=2e-3"]), STEPS)
    got = env.train(os.path.join(env.work, "mixtral", "train-dp2ep2"), STEPS, 2)
    sensitive = rel_err(got, other) > 10 * TOL
    return ok and sensitive, msg + ("; a serial run at lr 2e-3 differs by %.1e" %
                                    rel_err(got, other))


def check_families(env):
    names = ("qwen2-moe", "deepseek-v3", "jamba", "jetmoe")
    results = [versus_serial(env, name, ["--dp", "2", "--ep", "2"], 2) for name in names]
    return all(ok for ok, _ in results), "; ".join(
        name + ": " + msg for name, (_, msg) in zip(names, results))


def check_resume(env):
    exe = env.compile("mixtral", "resume", ["--dp", "2", "--ep", "2"])
    whole = env.train(exe, STEPS, 2)
    ckpt = os.path.join(env.work, "mixtral", "ckpt")
    shutil.rmtree(ckpt, ignore_errors=True)
    first = env.train(exe, STEPS // 2, 2, ["--checkpoint-dir", ckpt])
    shutil.rmtree(ckpt + "-serial", ignore_errors=True)
    shutil.copytree(ckpt, ckpt + "-serial")
    second = env.train(exe, STEPS, 2, ["--checkpoint-dir", ckpt, "--resume"])
    same = first + second == whole
    # The serial program (ep 1) from the ep-2 checkpoint: the sums run in
    # another order, so within 1e-6, not bitwise.
    serial = env.compile("mixtral", "serial-resume", [])
    later = env.train(serial, STEPS, 1, ["--checkpoint-dir", ckpt + "-serial", "--resume"])
    err = rel_err(later, whole[STEPS // 2:])
    return same and err <= 1e-6, (
        "ep2 resume %s the uninterrupted run; serial (ep 1) resumed from the ep-2 "
        "checkpoint: max rel err %.1e" % ("bitwise equals" if same else "DIFFERS from", err))


def check_schedules(env):
    base = ["--dp", "2", "--ep", "2", "--pp", "2"]
    results = [versus_serial(env, "mixtral", base + extra, 4) for extra in (
        ["--microbatches", "4", "--schedule", "zb-h1"],
        ["--microbatches", "4", "--schedule", "interleaved", "--virtual-stages", "2"],
        ["--microbatches", "2", "--recompute", "full"])]
    return all(ok for ok, _ in results), "; ".join(msg for _, msg in results)


def check_eager(env):
    results = [versus_serial(env, "mixtral-sparse", flags, 4) for flags in (
        ["--dp", "2", "--ep", "2", "--tp", "2"], ["--dp", "4", "--ep", "4", "--zero", "1"])]
    return all(ok for ok, _ in results), "; ".join(msg for _, msg in results)


def check_allgather(env):
    results = []
    for ep in ("2", "4"):
        flags = ["--dp", "4", "--ep", ep]
        a2a = env.train(env.compile("mixtral", "a2a-ep" + ep, flags), STEPS, 4)
        ag = env.train(env.compile("mixtral", "ag-ep" + ep, flags + ["--moe-dispatcher",
                                                                      "allgather"]), STEPS, 4)
        results.append((ep, a2a == ag and len(a2a) == STEPS, rel_err(ag, a2a)))
    return all(ok for _, ok, _ in results), "; ".join(
        "ep %s: allgather %s alltoall (max rel err %.1e)" % (
            ep, "bitwise equals" if ok else "DIFFERS from", err) for ep, ok, err in results)


def check_shadow(env):
    results, ok = [], True
    for flags, ranks, slots in ((["--dp", "2", "--ep", "2"], 2, "1"),
                                (["--dp", "4", "--ep", "4", "--zero", "1"], 4, "2"),
                                (["--dp", "2", "--ep", "2", "--pp", "2", "--microbatches", "4",
                                  "--schedule", "zb-h1", "--recompute", "full"], 4, "1"),
                                (["--dp", "2", "--ep", "2", "--tp", "2"], 4, "1")):
        tag = "".join(f.strip("-") for f in flags)
        plain = env.train(env.compile("mixtral", tag, flags), STEPS, ranks)
        shadow = env.metrics(env.compile("mixtral", tag + "-shadow", flags + [
            "--moe-shadow", slots, "--moe-shadow-min-rows", "1"]), STEPS, ranks)
        got = [m["loss"] for m in shadow]
        shadowed = [m.get("moe_shadowed", 0) for m in shadow]
        err, serial = rel_err(got, plain), rel_err(got, env.serial_losses("mixtral"))
        steps = sum(1 for n in shadowed if n > 0)
        ok &= err <= 1e-6 and serial <= TOL and steps >= 3
        results.append("%s --moe-shadow %s: experts shadowed in %d of %d steps (up to %d), max "
                       "rel err %.1e vs plain ep, %.1e vs serial" % (
                           " ".join(flags), slots, steps, len(shadowed), max(shadowed), err,
                           serial))
    return ok, "; ".join(results)


REBALANCE = ["--moe-rebalance-every", "2"]


def check_rebalance(env):
    results, ok = [], True
    for flags, ranks in ((["--dp", "2", "--ep", "2"], 2),
                         (["--dp", "4", "--ep", "2"], 4),
                         (["--dp", "4", "--ep", "2", "--zero", "1"], 4),
                         (["--dp", "2", "--ep", "2", "--pp", "2", "--microbatches", "2"], 4),
                         (["--dp", "2", "--ep", "2", "--tp", "2"], 4),
                         (["--dp", "2", "--ep", "2", "--moe-shadow", "1",
                           "--moe-shadow-min-rows", "1"], 2)):
        tag = "".join(f.strip("-") for f in flags)
        plain = env.train(env.compile("mixtral", tag, flags), STEPS, ranks)
        placed = env.metrics(env.compile("mixtral", tag + "-rebalance", flags + REBALANCE),
                             STEPS, ranks, ["--moe-rebalance-min-rows", "0"])
        got = [m["loss"] for m in placed]
        moved = sum(m.get("moe_moved", 0) for m in placed)
        err, serial = rel_err(got, plain), rel_err(got, env.serial_losses("mixtral"))
        ok &= err <= 1e-6 and serial <= TOL and moved >= 1
        results.append("%s: %d experts moved, max rel err %.1e vs plain ep, %.1e vs serial" % (
            " ".join(flags), moved, err, serial))
    return ok and check_rebalance_resume(env, results), "; ".join(results)


def check_rebalance_resume(env, results):
    run = ["--moe-rebalance-min-rows", "0"]
    exe = env.compile("mixtral", "dp2ep2-rebalance", ["--dp", "2", "--ep", "2"] + REBALANCE)
    whole = env.train(exe, STEPS, 2, run)
    ckpt = os.path.join(env.work, "mixtral", "ckpt-rebalance")
    shutil.rmtree(ckpt, ignore_errors=True)
    first = env.train(exe, STEPS // 2, 2, run + ["--checkpoint-dir", ckpt])
    shutil.rmtree(ckpt + "-ep4", ignore_errors=True)
    shutil.copytree(ckpt, ckpt + "-ep4")
    second = env.train(exe, STEPS, 2, run + ["--checkpoint-dir", ckpt, "--resume"])
    same = first + second == whole
    ep4 = env.compile("mixtral", "dp4ep4-rebalance", ["--dp", "4", "--ep", "4"] + REBALANCE)
    later = env.train(ep4, STEPS, 4, run + ["--checkpoint-dir", ckpt + "-ep4", "--resume"])
    err = rel_err(later, whole[STEPS // 2:])
    serial = env.compile("mixtral", "serial", [])
    p = subprocess.run([serial, "--data", env.data, "--steps", str(STEPS), "--checkpoint-dir",
                        ckpt + "-ep4", "--resume", "--allow-partial-resume"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    refused = p.returncode != 0 and "compiled with --moe-rebalance-every" in p.stdout
    results.append("resume %s the uninterrupted run; under --ep 4 max rel err %.1e; the serial "
                   "program %s the moved checkpoint" % (
                       "bitwise equals" if same else "DIFFERS from", err,
                       "refuses" if refused else "DID NOT REFUSE"))
    return same and err <= 1e-6 and refused


def check_chunked(env):
    results, ok = [], True
    for flags, ranks, k in ((["--dp", "2", "--ep", "2"], 2, "2"),
                            (["--dp", "4", "--ep", "4"], 4, "4"),
                            (["--dp", "2", "--ep", "2", "--pp", "2", "--microbatches", "2"], 4,
                             "2"),
                            (["--dp", "2", "--ep", "2"] + REBALANCE, 2, "2")):
        tag = "".join(f.strip("-") for f in flags)
        plain = env.train(env.compile("mixtral", tag, flags), STEPS, ranks)
        chunked = env.train(env.compile("mixtral", tag + "-chunks" + k,
                                        flags + ["--moe-chunks", k]), STEPS, ranks)
        err, serial = rel_err(chunked, plain), rel_err(chunked, env.serial_losses("mixtral"))
        ok &= err <= 1e-6 and serial <= TOL
        results.append("%s --moe-chunks %s: max rel err %.1e vs plain ep, %.1e vs serial" % (
            " ".join(flags), k, err, serial))
    # The exchanges are started (merak-overlap's ep-overlap), two per chunk
    # and GEMM forward, more in the backward.
    p = env.compile("mixtral", "chunks-ir", ["--dp", "2", "--ep", "2", "--moe-chunks", "2",
                                              "--compile-to=overlap"], check=False)
    exe = os.path.join(env.work, "mixtral", "train-chunks-ir")
    text = open(exe).read() if os.path.exists(exe) else p.stdout
    started = text.count("merak.all_to_all_start")
    ok &= started >= 8 and " merak.all_to_all %" not in text
    results.append("%d started all-to-alls in the overlapped IR" % started)
    return ok, "; ".join(results)


def check_hierarchical(env):
    # Nodes of 2 ranks (MERAK_RANKS_PER_NODE), so that the ep group of 4
    # spans 2 nodes and every all-to-all runs in two exchanges.
    nodes = {"MERAK_RANKS_PER_NODE": "2"}
    results, ok = [], True
    for flags in (["--dp", "4", "--ep", "4"],
                  ["--dp", "4", "--ep", "4", "--moe-shadow", "2", "--moe-shadow-min-rows", "1"],
                  ["--dp", "4", "--ep", "4", "--pp", "2", "--microbatches", "2"]):
        ranks = 8 if "--pp" in flags else 4
        tag = "".join(f.strip("-") for f in flags)
        flat = env.train(env.compile("mixtral", tag, flags), STEPS, ranks, env=nodes)
        two = env.train(env.compile("mixtral", tag + "-hier",
                                    flags + ["--moe-all-to-all", "hierarchical"]),
                        STEPS, ranks, env=nodes)
        same = flat == two and len(two) == STEPS
        ok &= same
        results.append("%s: hierarchical %s flat (losses %.5f -> %.5f)" % (
            " ".join(flags), "bitwise equals" if same else "DIFFERS from", two[0], two[-1]))
    return ok, "; ".join(results)


def check_histogram(env):
    """./train --moe-histogram records the rows routed to each expert; the
    simulator's --moe-histogram takes its shares."""
    steps, hist = 3, os.path.join(env.work, "mixtral", "histogram.json")
    exe = env.compile("mixtral", "dp2ep2", ["--dp", "2", "--ep", "2"])
    env.train(exe, steps, 2, ["--moe-histogram", hist])
    h = json.load(open(hist))
    # Every step dispatches each layer's rows 4 times (the gate/up and down
    # inputs, and the gradients of both combines): 2 layers x 8 x 16 tokens
    # x top-2.
    want = steps * 4 * zoo.LAYERS * BATCH * zoo.T * 2
    total = sum(h["rows"])
    ok = h["experts"] == 4 and len(h["rows"]) == 4 and total == want
    # Under ep 2, rank 0 holds experts 0-1: the busiest rank's share x 2.
    shares = [r / total for r in h["rows"]]
    expect = max(sum(shares[:2]), sum(shares[2:])) * 2
    p = env.compile("mixtral", "sim", ["--dp", "2", "--ep", "2", "--microbatches", "2",
                                       "--simulate", "--moe-histogram", hist,
                                       "--compile-to=schedule"], check=False)
    line = [l for l in p.stdout.splitlines() if "simulated expert load" in l]
    got = float(line[0].split("gets ")[1].split("x")[0]) if line else float("nan")
    ok &= p.returncode == 0 and abs(got - expect) <= 1e-3
    # A program without expert parallelism has nothing to count: refused
    # before training.
    serial = env.compile("mixtral", "serial", [])
    q = subprocess.run([serial, "--data", env.data, "--steps", "1", "--moe-histogram", hist],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ok &= q.returncode != 0 and "--moe-histogram needs a program compiled with --ep" in q.stdout
    return ok, "rows per expert %s (total %d, expected %d); simulated imbalance %.3f, from the " \
               "file %.3f" % (h["rows"], total, want, got, expect)


def check_errors(env):
    cases = [
        (["--dp", "2", "--ep", "3"], "mixtral", "--ep 3 must divide --dp 2"),
        (["--dp", "2", "--ep", "2"], "llama", "needs a Mixture-of-Experts model"),
        (["--dp", "2", "--ep", "2", "--moe-rebalance-every", "2", "--target", "cuda"], "mixtral",
         "--moe-rebalance-every is supported on --target cpu only"),
        (["--dp", "2", "--ep", "2", "--moe-dispatcher", "ring"], "mixtral",
         "--moe-dispatcher must be alltoall or allgather"),
        (["--dp", "2", "--moe-shadow", "1"], "mixtral", "--moe-shadow needs expert parallelism"),
        (["--dp", "2", "--ep", "2", "--moe-shadow", "1", "--moe-dispatcher", "allgather"],
         "mixtral", "--moe-shadow needs --moe-dispatcher alltoall"),
        (["--dp", "2", "--ep", "2", "--moe-all-to-all", "ring"], "mixtral",
         "--moe-all-to-all must be flat or hierarchical"),
        (["--dp", "2", "--moe-rebalance-every", "2"], "mixtral",
         "--moe-rebalance-every needs expert parallelism"),
        (["--dp", "2", "--ep", "2", "--moe-chunks", "2", "--moe-shadow", "1"], "mixtral",
         "--moe-chunks needs expert parallelism (--ep 2 or more) with the alltoall dispatcher "
         "and without --moe-shadow"),
        (["--dp", "2", "--ep", "2", "--moe-chunks", "7"], "mixtral",
         "rows do not split into 7 chunks"),
    ]
    bad = []
    for flags, name, want in cases:
        p = env.compile(name, "err", flags, check=False)
        if p.returncode == 0 or want not in p.stdout or "error" not in p.stdout:
            bad.append("%s: exit %d, %r" % (" ".join(flags), p.returncode, p.stdout[-300:]))
    return not bad, "; ".join(bad) if bad else "%d bad meshes refused, naming the cause" % len(
        cases)


def tp_report(env, flags):
    path, _ = env.model("mixtral")
    out = subprocess.run(
        [os.path.join(env.bin_dir, "merak-compile"), path, "--input-shape",
         "input_ids=%dx%d" % (BATCH, zoo.T), "--tp", "2", "--report=json"] + flags,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=True).stdout
    return json.loads(out)["tensor_parallel"]


def stage_collectives(env, flags):
    path, _ = env.model("mixtral")
    out = subprocess.run(
        [os.path.join(env.bin_dir, "merak-compile"), path, "--input-shape",
         "input_ids=%dx%d" % (BATCH, zoo.T), "--report=json"] + flags,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=True).stdout
    return json.loads(out)["stages"][0]["collectives"]


def check_ep2_tp2(env):
    ok, msg = versus_serial(env, "mixtral", ["--dp", "2", "--ep", "2", "--tp", "2"], 4)
    whole = stage_collectives(env, ["--dp", "2", "--ep", "2"])
    split = stage_collectives(env, ["--dp", "2", "--ep", "2", "--tp", "2"])
    share = split["all_to_all"]["ep"]["bytes"] / whole["all_to_all"]["ep"]["bytes"]
    gathers = split["all_gather"].get("tp", {}).get("count", 0)
    return ok and share == 0.5 and gathers > 0, msg + (
        "; all-to-all bytes per rank at tp 2: %.2f of tp 1's, %d tp all-gathers" % (share, gathers))


def check_sequence_parallel(env):
    sp = ["--sequence-parallel", "on"]
    results = [versus_serial(env, "mixtral", flags + sp, ranks) for flags, ranks in (
        (["--tp", "2"], 2),
        (["--dp", "2", "--ep", "2", "--tp", "2"], 4),
        (["--dp", "2", "--ep", "2", "--tp", "2", "--pp", "2", "--microbatches", "2"], 8))]
    plain, split = tp_report(env, []), tp_report(env, sp)
    share = split["all_reduce"]["bytes"] / plain["all_reduce"]["bytes"]
    scattered = split["sequence_parallel"]["reduce_scatter"]["count"]
    results.append((share < 0.05 and scattered > 0,
                    "tp all-reduce bytes with sequence parallelism %d of %d (%.1f %%), %d "
                    "reduce-scatters" % (split["all_reduce"]["bytes"],
                                         plain["all_reduce"]["bytes"], 100 * share, scattered)))
    return all(ok for ok, _ in results), "; ".join(msg for _, msg in results)


CHECKS = {
    "ep2": check_ep2,
    "ep4": lambda env: versus_serial(env, "mixtral", ["--dp", "4", "--ep", "4"], 4),
    "ep2-dp4": lambda env: versus_serial(env, "mixtral", ["--dp", "4", "--ep", "2"], 4),
    "ep2-tp2": check_ep2_tp2,
    "ep2-pp2": lambda env: versus_serial(
        env, "mixtral", ["--dp", "2", "--ep", "2", "--pp", "2", "--microbatches", "2"], 4),
    "ep2-schedules": check_schedules,
    "ep2-zero": lambda env: versus_serial(
        env, "mixtral", ["--dp", "4", "--ep", "2", "--zero", "1"], 4),
    "ep2-pp2-zero": lambda env: versus_serial(
        env, "mixtral",
        ["--dp", "4", "--ep", "2", "--pp", "2", "--microbatches", "2", "--zero", "1"], 8),
    "gpt-oss": lambda env: versus_serial(env, "gpt-oss", ["--dp", "2", "--ep", "2"], 2),
    "families": check_families,
    "eager": check_eager,
    "aux": lambda env: versus_serial(env, "mixtral",
                                     ["--dp", "2", "--ep", "2", "--moe-aux-loss", "0.02"], 2,
                                     ["--microbatches", "2", "--moe-aux-loss", "0.02"]),
    "allgather": check_allgather,
    "resume": check_resume,
    "shadow": check_shadow,
    "rebalance": check_rebalance,
    "chunked": check_chunked,
    "hierarchical": check_hierarchical,
    "histogram": check_histogram,
    "sp": check_sequence_parallel,
    "errors": check_errors,
}


def main():
    return run_checks(Env, lambda env, name: CHECKS[name](env), list(CHECKS))


if __name__ == "__main__":
    sys.exit(main())
