"""Profile-guided costs: ./train --profile-ops and merak-compile --op-costs.

    /usr/bin/python3 test/parallel/op_costs_check.py --bin BUILD/bin --workdir DIR [CHECK...]

A training program run with --profile-ops FILE times its ops and merges the
medians by op shape key into FILE; --simulate --op-costs FILE charges those
seconds instead of the roofline (merak/Dialect/Merak/Analysis/OpCosts.h).
The model: the test suite's GPT-2 (4 layers, width 128, vocabulary 97).
  keys      the keys a program writes are the keys the simulator looks up:
            after profiling a --pp 2 --microbatches 2 program (2 ranks) and a
            --tp 2 --microbatches 2 one into one file, the simulation of each
            finds measured seconds for every op it costs (N of N), and so
            does the serial --microbatches 2 program, whose ops have the
            pp2 program's shapes;
  sum       with every op set to 1 ms and a profile where nothing else costs
            anything, each fragment of the simulated --microbatches 2 step
            lasts a whole number of ms, the step is 2 F + 2 B + update, and
            F + B + update (ms) is the number of measured ops;
  scale     the same with 2 ms per op: every fragment and the step double;
  fallback  a file with none of the program's keys leaves the simulation
            equal to the roofline's, bit for bit.
Ends with "N passed, M failed".
"""
import json
import os
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
import export_models as em  # noqa: E402
from check_runner import run_checks  # noqa: E402
from program_check import corpus_tokens  # noqa: E402

VOCAB, BATCH, SEQ = 97, 4, 16
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]
CHECKS = ["keys", "sum", "scale", "fallback"]
# Compute, memory and links that cost (next to) nothing: only measured op
# seconds remain in the simulated step.
FREE = {"name": "free", "flops": {"f32": 1e30}, "memory_bandwidth": 1e30,
        "memory_bytes": 1e12, "devices_per_node": 64,
        "intra_node": {"bandwidth": 1e30, "latency": 0},
        "inter_node": {"bandwidth": 1e30, "latency": 0}}


def run(cmd, env=None):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                       timeout=600)
    if p.returncode:
        raise RuntimeError("%s failed (%d):\n%s" % (os.path.basename(cmd[0]), p.returncode,
                                                  p.stdout.decode()[-3000:]))
    return p.stdout.decode()


class Env:
    def __init__(self, bin_dir, work):
        self.bin_dir, self.work = bin_dir, work
        _, self.data = corpus_tokens(work, VOCAB)
        self.env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        torch.manual_seed(0)
        self.onnx = os.path.join(work, "gpt.onnx")
        torch.onnx.export(em.GPT2(vocab_size=VOCAB, n_embd=128, n_head=4, n_layer=4,
                                  block_size=SEQ),
                          (torch.zeros(BATCH, SEQ, dtype=torch.int64),), self.onnx,
                          opset_version=17, input_names=["input_ids"],
                          output_names=["logits"], training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, dynamic_axes={"input_ids": {0: "batch"}})
        self.free = os.path.join(work, "free.json")
        with open(self.free, "w") as f:
            json.dump(FREE, f)

    def flags(self, mesh):
        return [self.onnx, "--input-shape", "input_ids=%dx%d" % (BATCH, SEQ), "--frozen",
                "*.attn.bias", "--optimizer", "adamw"] + mesh

    def profile(self, name, mesh, ranks, costs):
        exe = os.path.join(self.work, "train-" + name)
        run([os.path.join(self.bin_dir, "merak-compile")] + self.flags(mesh) + ["-o", exe])
        cmd = [exe, "--data", self.data, "--steps", "3", "--profile-ops", costs]
        run((MPIRUN + ["-np", str(ranks)] if ranks > 1 else []) + cmd, env=self.env)

    def simulate(self, mesh, extra):
        """(report JSON's "simulated", {(stage, event): ms})."""
        trace = os.path.join(self.work, "sim-trace.json")
        out = run([os.path.join(self.bin_dir, "merak-compile")] + self.flags(mesh) +
                  ["--compile-to=schedule", "-o", os.devnull, "--simulate", "--report=json",
                   "--simulate-trace", trace] + extra)
        sim = json.loads(out[out.index("{"):])["simulated"]
        events = {}
        for e in json.load(open(trace))["traceEvents"]:
            if e.get("ph") == "X":
                events[(e["tid"], e["name"])] = e["dur"] / 1e3
        return sim, events


def write_costs(path, ops):
    with open(path, "w") as f:
        json.dump({"format": "merak-op-costs", "version": 1, "target": "cpu", "threads": 1,
                   "ops": {k: {"seconds": s, "samples": 1} for k, s in ops.items()}}, f)


def profiled(env):
    """The op-cost file of the pp2 and tp2 programs (made once)."""
    costs = os.path.join(env.work, "costs.json")
    if not os.path.exists(costs):
        env.profile("pp2", ["--pp", "2", "--microbatches", "2"], 2, costs)
        env.profile("tp2", ["--tp", "2", "--microbatches", "2"], 2, costs)
    with open(costs) as f:
        return costs, json.load(f)["ops"]


def check_keys(env):
    costs, ops = profiled(env)
    notes, ok = [], len(ops) > 0
    for mesh in (["--pp", "2", "--microbatches", "2"], ["--tp", "2", "--microbatches", "2"],
                 ["--microbatches", "2"]):
        sim, _ = env.simulate(mesh, ["--op-costs", costs])
        c = sim["op_costs"]
        ok = ok and c["measured_ops"] == c["costed_ops"] > 0
        notes.append("%s: %d of %d" % (" ".join(mesh), c["measured_ops"], c["costed_ops"]))
    samples = all(v["samples"] >= 2 and v["seconds"] >= 0 for v in ops.values())
    return ok and samples, "%d keys; measured ops: %s" % (len(ops), "; ".join(notes))


def uniform(env, seconds):
    _, ops = profiled(env)
    path = os.path.join(env.work, "uniform-%g.json" % seconds)
    write_costs(path, {k: seconds for k in ops})
    return env.simulate(["--microbatches", "2"], ["--op-costs", path, "--device-profile",
                                                 env.free])


def check_sum(env):
    sim, ev = uniform(env, 1e-3)
    f, b, u = ev[(0, "F0")], ev[(0, "B0")], ev[(0, "update")]
    whole = all(abs(v - round(v)) < 1e-6 and v >= 1 for v in ev.values())
    same = ev[(0, "F1")] == f and ev[(0, "B1")] == b
    step = sim["step_time_s"] * 1e3
    n = sim["op_costs"]["measured_ops"]
    ok = whole and same and abs(step - (2 * f + 2 * b + u)) < 1e-6 and \
        abs(f + b + u - n) < 1e-6 and sim["op_costs"]["costed_ops"] == n
    return ok, "F %.3f ms, B %.3f ms, update %.3f ms, step %.3f ms, %d measured ops" % (
        f, b, u, step, n)


def check_scale(env):
    one, e1 = uniform(env, 1e-3)
    two, e2 = uniform(env, 2e-3)
    ok = all(abs(e2[k] - 2 * e1[k]) < 1e-6 for k in e1) and \
        abs(two["step_time_s"] - 2 * one["step_time_s"]) < 1e-12
    return ok, "step %.6f s -> %.6f s" % (one["step_time_s"], two["step_time_s"])


def check_fallback(env):
    path = os.path.join(env.work, "other.json")
    write_costs(path, {"merak.other() -> ()": 1.0})
    mesh = ["--pp", "2", "--microbatches", "2"]
    plain, _ = env.simulate(mesh, [])
    other, _ = env.simulate(mesh, ["--op-costs", path])
    ok = other["step_time_s"] == plain["step_time_s"] and other["op_costs"]["measured_ops"] == 0
    return ok, "roofline %.6e s, with an unrelated file %.6e s" % (plain["step_time_s"],
                                                                  other["step_time_s"])


CHECK_FUNCS = {"keys": check_keys, "sum": check_sum, "scale": check_scale,
               "fallback": check_fallback}


def main():
    return run_checks(Env, lambda env, name: CHECK_FUNCS[name](env), CHECKS)


if __name__ == "__main__":
    sys.exit(main())
