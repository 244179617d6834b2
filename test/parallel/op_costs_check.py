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
            equal to the roofline's, bit for bit;
  planner   merak-compile --devices 2 --op-costs: the planner's best plans
            that fit are compiled and re-ranked by their simulation with
            the measured costs (each profiled: all of their ops measured,
            ranked by the measured-cost step, the chosen one's equal to
            --simulate --op-costs of its program); a 10 MB budget makes the
            plans pipelines (a plan without a schedule keeps its estimate).
Ends with "N passed, M failed".
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
from check_runner import run_checks  # noqa: E402
from program_check import corpus_tokens, export_gpt2, tool_output as run  # noqa: E402

VOCAB, BATCH, SEQ = 97, 4, 16
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]
CHECKS = ["keys", "sum", "scale", "fallback", "planner"]
# Compute, memory and links that cost (next to) nothing: only measured op
# seconds remain in the simulated step.
FREE = {"name": "free", "flops": {"f32": 1e30}, "memory_bandwidth": 1e30,
        "memory_bytes": 1e12, "devices_per_node": 64,
        "intra_node": {"bandwidth": 1e30, "latency": 0},
        "inter_node": {"bandwidth": 1e30, "latency": 0}}


class Env:
    def __init__(self, bin_dir, work):
        self.bin_dir, self.work = bin_dir, work
        _, self.data = corpus_tokens(work, VOCAB)
        self.env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        self.onnx = os.path.join(work, "gpt.onnx")
        export_gpt2(self.onnx, VOCAB, BATCH, SEQ, dynamic_batch=True)
        # A cost file an earlier build wrote may lack this build's op keys.
        stale = os.path.join(work, "costs.json")
        if os.path.exists(stale):
            os.remove(stale)
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


# A CPU-like profile for the planner check (numbers of this machine's order).
CPU = {"name": "cpu-like", "flops": {"f32": 1e11}, "memory_bandwidth": 2e10,
       "memory_bytes": 8e9, "devices_per_node": 64,
       "intra_node": {"bandwidth": 5e9, "latency": 1e-6},
       "inter_node": {"bandwidth": 5e9, "latency": 1e-6}}


def plan(env, extra):
    """The planner's JSON ("planner") for 2 devices."""
    profile = os.path.join(env.work, "cpu-like.json")
    with open(profile, "w") as f:
        json.dump(CPU, f)
    report = os.path.join(env.work, "plan.json")
    run([os.path.join(env.bin_dir, "merak-compile")] + env.flags(["--devices", "2"]) +
        ["--device-profile", profile, "--compile-to=schedule", "-o", os.devnull,
         "--report=json", "--report-file", report] + extra)
    return json.load(open(report))["planner"]


def mesh_of(c):
    return ["--dp", str(c["dp"]), "--tp", str(c["tp"]), "--pp", str(c["pp"]),
            "--microbatches", str(c["microbatches"]), "--schedule", c["schedule"],
            "--recompute", c["recompute"]]


def pipelined(c):
    return c["pp"] > 1 or c["microbatches"] > 1


def check_planner(env):
    # 10 MB per device: data parallelism (every rank holding the whole
    # model and its state) does not fit, the plans are pipelines.
    budget = ["--memory-per-device", "10MB"]
    estimated = plan(env, budget)
    first = estimated["chosen"]
    candidates = [c for c in [first] + estimated["runners_up"]
                  if "rejected" not in c and pipelined(c)]
    if not pipelined(first):
        return False, "the planner's first choice is not pipelined: %s" % first
    # Every candidate the refinement compiles, profiled into one file.
    costs = os.path.join(env.work, "planner-costs.json")
    if os.path.exists(costs):
        os.remove(costs)
    for i, c in enumerate(candidates):
        env.profile("plan%d" % i, mesh_of(c) + budget, c["dp"] * c["tp"] * c["pp"], costs)
    refined = plan(env, budget + ["--op-costs", costs])
    ranked = [c for c in [refined["chosen"]] + refined["runners_up"] if "measured_op_costs" in c]
    steps = [c["measured_op_costs"]["step_time_s"] for c in ranked]
    full = all(c["measured_op_costs"]["measured_ops"] == c["measured_op_costs"]["costed_ops"] > 0
               for c in ranked)
    # The chosen plan's step is what --simulate --op-costs gives its program.
    sim, _ = env.simulate(mesh_of(refined["chosen"]) + budget,
                          ["--op-costs", costs, "--device-profile",
                           os.path.join(env.work, "cpu-like.json")])
    direct = sim["step_time_s"]
    ok = len(ranked) == len(candidates) and full and steps == sorted(steps) and \
        abs(direct - steps[0]) <= 1e-12 * direct
    return ok, ("estimated first choice %s; %d candidates re-ranked by measured costs "
                "(%s); chosen %s, its program simulated directly: %.4f ms" % (
                    " ".join(mesh_of(first)), len(ranked),
                    ", ".join("%.4f ms" % (1e3 * t) for t in steps),
                    " ".join(mesh_of(refined["chosen"])), 1e3 * direct))


CHECK_FUNCS = {"keys": check_keys, "sum": check_sum, "scale": check_scale,
               "fallback": check_fallback, "planner": check_planner}


def main():
    return run_checks(Env, lambda env, name: CHECK_FUNCS[name](env), CHECKS)


if __name__ == "__main__":
    sys.exit(main())
