#!/usr/bin/env python3
"""The paper's four GPT models on 64 GPUs: merak's automatic plan against the
Megatron-LM-style hand plan, both simulated with the same cost model.

    /usr/bin/python3 bench/paper/plan_paper.py [--bin build/bin]
        [--profile profiles/h100-node.json] [--devices 64] [--models 1.5b,2.5b]
        [--precision fp32|bf16] [--attention fused|decomposed] [--onnx 1.5b=FILE]

For each model: bench/paper/gpt_mlir.py writes it in merak IR with splat
weights (nothing is materialised); `merak-compile --devices N` plans it
three times: `--planner-space=auto` (every schedule, recomputation policy,
overlap and ZeRO-1 the planner models), `--planner-space=megatron` (the fixed
Megatron-LM policy: 1F1B, full recomputation, layers split uniformly, no
overlap) and `--planner-space=megatron-best` (Megatron-LM as an expert
configures it: 1F1B or interleaved, no/selective/full recomputation,
overlapped gradient reduction, the distributed optimizer, layers split
uniformly); every dp x tp x pp and micro-batch count is tried in each, the
best kept. Prints the plans, their simulated step times, the ratios and the
planner's search time.
See bench/paper/README.md.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, HERE)
import gpt_mlir  # noqa: E402

# name: (layers, hidden, heads); seq 1024, vocab 50257 padded to 50304.
MODELS = {
    "1.5b": (48, 1600, 32),
    "2.5b": (54, 1920, 20),
    "8.3b": (72, 3072, 32),
    "20b": (44, 6144, 64),
}


def plan(compiler, model, devices, profile, space, precision, work, extra=()):
    """merak-compile --devices: the planner's JSON, (wall, CPU) seconds, the
    log and the peak RSS in MiB."""
    report = os.path.join(work, os.path.basename(model) + "." + space + ".json")
    rss_file = report + ".rss"
    cmd = ["/usr/bin/time", "-f", "%M", "-o", rss_file,
           compiler, model, "--devices", str(devices), "--device-profile", profile,
           "--planner-space", space, "--precision", precision,
           "--report=json", "--report-file", report] + list(extra)
    t = time.time()
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = (time.time() - t, after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime)
    if p.returncode:
        sys.exit("merak-compile failed:\n" + p.stdout.decode()[-4000:])
    with open(report) as f, open(rss_file) as r:
        return json.load(f)["planner"], wall, p.stdout.decode(), int(r.read().split()[-1]) / 1024


def simulate_compiled(compiler, model, c, profile, precision, extra, uniform_stages=0):
    """The plan `c` compiled (to the training phase) and simulated op by op
    (`--simulate`): the step of the program merak builds for it. With
    `uniform_stages` (the planner's fine stages), the pipeline is cut as
    Megatron-LM cuts it, the same number of fine stages (half-layers) per
    stage, instead of merak-pipeline's balancing cuts."""
    cmd = [compiler, model, "--dp", str(c["dp"]), "--tp", str(c["tp"]), "--pp", str(c["pp"]),
           "--microbatches", str(c["microbatches"]), "--schedule", c["schedule"],
           "--recompute", c["recompute"], "--zero", "1" if c.get("zero") else "0",
           "--dp-overlap", "on" if c["overlap"] else "off", "--precision", precision,
           "--simulate", "--device-profile", profile, "--report=json",
           "--compile-to=training", "--emit-bytecode", "-o", "/dev/null"]
    cmd += [x for x in extra if x not in ("--compile-to=training", "--emit-bytecode", "-o",
                                          "/dev/null")]
    if c["virtual_stages"] > 1:
        cmd += ["--virtual-stages", str(c["virtual_stages"])]
    if c["overlap"] and c["tp"] > 1:
        cmd += ["--tp-overlap", "sub-pipeline"]
    if c["recompute"] == "stage-aware":
        with open(profile) as f:
            cmd += ["--memory-per-device", "%d" % json.load(f)["memory_bytes"]]
    if c.get("stage_boundaries"):
        # Where the planner cut its stages (merak's: balanced busy time;
        # the Megatron spaces': the same number of half-layers per stage).
        cmd += ["--stage-boundaries", ",".join(str(b) for b in c["stage_boundaries"])]
    elif uniform_stages and c["pp"] > 1 and c["virtual_stages"] == 1:
        n, pp = uniform_stages, c["pp"]
        cmd += ["--stage-boundaries",
                ",".join(str((k * n + pp // 2) // pp - 1) for k in range(1, pp))]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode:
        sys.exit("merak-compile failed:\n" + p.stderr.decode()[-4000:])
    return json.loads(p.stdout)["simulated"]["step_time_s"]


def describe(c):
    s = "dp %d tp %d pp %d mb %d %s" % (c["dp"], c["tp"], c["pp"], c["microbatches"],
                                       c["schedule"])
    if c["virtual_stages"] > 1:
        s += " v%d" % c["virtual_stages"]
    return s + " recompute %s%s%s%s" % (c["recompute"], " +overlap" if c["overlap"] else "",
                                        " +zero" if c.get("zero") else "",
                                        " +sp" if c.get("sequence_parallel") else "")


def busy(c):
    """A plan's mean busy time per device (seconds): its step less the idle
    share (the bubble fraction is idle / (stages x step); the busy time
    counts the stages' compute, their exposed communication and the
    optimizer update)."""
    return c["step_time_s"] * (1.0 - c["bubble_fraction"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--profile", default=os.path.join(ROOT, "profiles", "h100-node.json"))
    ap.add_argument("--devices", type=int, default=64)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"],
                    help="merak-compile --precision: bf16 GEMMs (float32 master weights)")
    ap.add_argument("--attention", default="fused", choices=["fused", "decomposed"],
                    help="fused: merak.attention (flash attention, as Megatron-LM runs it); "
                    "decomposed: the [T, T] scores in memory (these head dims, 50 and 96, are "
                    "not ones merak-fuse-attention fuses)")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--onnx", action="append", default=[], metavar="NAME=FILE",
                    help="plan model NAME from this ONNX export (bench/gpt2_compile.py "
                    "--phases ''), compiled to the training phase, instead of gpt_mlir.py's IR")
    ap.add_argument("--compiled", action="store_true",
                    help="also compile merak's and the expert-configured plan and simulate "
                    "the programs op by op (--simulate), the expert's cut as Megatron-LM "
                    "cuts it (the same number of half-layers per stage)")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    compiler = os.path.join(a.bin, "merak-compile")
    work = tempfile.mkdtemp(prefix="merak-paper-")
    rows, compiled = [], []
    for name in a.models.split(","):
        layers, hidden, heads = MODELS[name]
        onnx = dict(o.split("=", 1) for o in a.onnx).get(name)
        extra = []
        if onnx:
            # The export's own file; the plan is compiled to training (its IR
            # as bytecode, thrown away) so that the time and memory include
            # one real compile of the chosen plan.
            path = os.path.abspath(onnx)  # its external data lies next to it
            extra = ["--input-shape", "input_ids=%dx%d" % (a.batch, a.seq),
                     "--compile-to=training", "--emit-bytecode", "-o", "/dev/null"]
            what = "ONNX " + onnx
        else:
            path = os.path.join(work, "gpt-%s.mlir" % name)
            with open(path, "w") as f:
                f.write(gpt_mlir.generate(layers, hidden, heads, a.seq, 50304, a.batch, "f32",
                                          attention=a.attention))
            what = "%s attention" % a.attention
        auto, auto_wall, log, rss = plan(compiler, path, a.devices, a.profile, "auto",
                                         a.precision, work, extra)
        mega, mega_wall, _, _ = plan(compiler, path, a.devices, a.profile, "megatron",
                                     a.precision, work, extra)
        best, best_wall, _, _ = plan(compiler, path, a.devices, a.profile, "megatron-best",
                                     a.precision, work, extra)
        if a.verbose:
            print(log)
        ca, cm, cb = auto["chosen"], mega["chosen"], best["chosen"]
        ratio = cm["step_time_s"] / ca["step_time_s"]
        ratio_best = cb["step_time_s"] / ca["step_time_s"]
        # No schedule of the same kernels can make the expert's plan faster
        # than its devices' mean busy time, nor merak's: the work per device
        # is the model's (no recomputation in either) over the devices.
        ceiling = cb["step_time_s"] / min(busy(ca), busy(cb))
        rows.append((name, ca, cm, ratio, cb, ratio_best, auto_wall, best_wall, ceiling))
        shape = "the model of %s" % what if onnx else \
            "%d layers, hidden %d, %d heads, %s" % (layers, hidden, heads, what)
        print("GPT-%s (%s, seq %d, global batch %d, %s):"
              % (name, shape, a.seq, a.batch, a.precision))
        print("  merak plan:    %-62s step %.3f s, bubble %.3f, peak %.1f GB"
              % (describe(ca), ca["step_time_s"], ca["bubble_fraction"],
                 ca["peak_memory_bytes"] / 1e9))
        print("  Megatron plan: %-62s step %.3f s, bubble %.3f, peak %.1f GB"
              % (describe(cm), cm["step_time_s"], cm["bubble_fraction"],
                 cm["peak_memory_bytes"] / 1e9))
        print("  Megatron best: %-62s step %.3f s, bubble %.3f, peak %.1f GB"
              % (describe(cb), cb["step_time_s"], cb["bubble_fraction"],
                 cb["peak_memory_bytes"] / 1e9))
        print("  speedup %.2fx over the fixed policy, %.2fx over the expert's; planner search %.2f s wall (%.2f s compiling cost tables of %d "
              "fine stages, %d plans); merak-compile %.2f s wall, %.2f s CPU, peak RSS %.0f MiB"
              % (ratio, ratio_best, auto["search_time_s"], auto["probe_time_s"], auto["fine_stages"],
                 auto["plans_evaluated"], auto_wall[0], auto_wall[1], rss))
        print("  mean busy time per device: merak %.3f s, expert %.3f s; the expert's step over "
              "the smaller (the most any schedule gains): %.2fx" % (busy(ca), busy(cb), ceiling))
        if a.compiled:
            sa = simulate_compiled(compiler, path, ca, a.profile, a.precision, extra)
            sb = simulate_compiled(compiler, path, cb, a.profile, a.precision, extra,
                                   uniform_stages=best["fine_stages"])
            compiled.append((name, ca, sa, cb, sb))
            print("  compiled and simulated: merak %.3f s (planned %.3f), expert %.3f s "
                  "(planned %.3f): %.2fx" % (sa, ca["step_time_s"], sb, cb["step_time_s"],
                                             sb / sa))
        sys.stdout.flush()
    print()
    print("| model | merak plan | step (s) | Megatron fixed policy | step (s) | speedup "
          "| Megatron expert-configured | step (s) | speedup | planner wall / CPU (s) "
          "| megatron-best wall / CPU (s) | expert's step / busy time |")
    print("|---|---|---:|---|---:|---:|---|---:|---:|---:|---:|---:|")
    for name, ca, cm, ratio, cb, ratio_best, wall, best_wall, ceiling in rows:
        print("| GPT-%s | %s | %.3f | %s | %.3f | %.2fx | %s | %.3f | %.2fx | %.2f / %.2f "
              "| %.2f / %.2f | %.2fx |"
              % (name, describe(ca), ca["step_time_s"], describe(cm), cm["step_time_s"], ratio,
                 describe(cb), cb["step_time_s"], ratio_best, wall[0], wall[1], best_wall[0],
                 best_wall[1], ceiling))
    if compiled:
        print()
        print("| model | merak plan, planned (s) | compiled (s) | expert plan, planned (s) "
              "| compiled, Megatron's cuts (s) | speedup planned | compiled |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for name, ca, sa, cb, sb in compiled:
            print("| GPT-%s | %.3f | %.3f | %.3f | %.3f | %.2fx | %.2fx |"
                  % (name, ca["step_time_s"], sa, cb["step_time_s"], sb,
                     cb["step_time_s"] / ca["step_time_s"], sb / sa))


if __name__ == "__main__":
    main()
