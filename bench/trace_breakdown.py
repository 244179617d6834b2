"""Step-time breakdown of a training program's Chrome trace (`./train --trace`).

    python3 bench/trace_breakdown.py TRACE.json [--json OUT]

The trace holds one step (the second of the run) with one event per op of
the generated step (cat "op"; on a GPU each op is synchronised before the
next starts, so the durations are the ops' own, and their sum is longer than
an untraced step). Ops are grouped into GEMMs (matmul, matmul_t, conv2d),
attention (attention, attention_grad), the optimizer (the fused
adamw/adan/sgd updates), collectives (all-reduce, reduce-scatter, all-gather,
their starts and waits) and the rest; prints each group's milliseconds and
share of the ops' total, and the rest's largest ops.
"""
import argparse
import collections
import json
import sys

GROUPS = (
    ("gemm", ("matmul", "matmul_t", "conv2d", "conv2d_grad_input", "conv2d_grad_weight")),
    ("attention", ("attention", "attention_grad")),
    ("optimizer", ("adamw_update", "adan_update", "sgd_update")),
    ("collectives", ("all_reduce", "reduce_scatter", "all_gather", "all_reduce_start",
                     "reduce_scatter_start", "all_gather_start", "wait", "send", "recv")),
)


def group_of(name):
    for group, names in GROUPS:
        if name in names:
            return group
    return "rest"


def breakdown(trace_path):
    """{"groups": {group: ms}, "rest_top": [(op, ms)], "ops_ms", "step_ms", "ops"}."""
    with open(trace_path) as f:
        t = json.load(f)
    events = t["traceEvents"] if isinstance(t, dict) else t
    by_group, by_op = collections.Counter(), collections.Counter()
    step_ms, count = 0.0, 0
    for e in events:
        if e.get("ph") != "X":
            continue
        if e.get("cat") == "step":
            step_ms = e["dur"] / 1e3
        elif e.get("cat") == "op":
            ms = e["dur"] / 1e3
            by_group[group_of(e["name"])] += ms
            by_op[e["name"]] += ms
            count += 1
    rest = [(op, ms) for op, ms in by_op.most_common() if group_of(op) == "rest"]
    return {"groups": {g: by_group.get(g, 0.0) for g, _ in GROUPS + (("rest", ()),)},
            "rest_top": rest[:6], "ops_ms": sum(by_group.values()), "step_ms": step_ms,
            "ops": count}


def describe(b):
    total = b["ops_ms"] or 1.0
    parts = ["%s %.1f ms (%.0f%%)" % (g, ms, 100 * ms / total) for g, ms in b["groups"].items()]
    top = ", ".join("%s %.1f" % (op, ms) for op, ms in b["rest_top"])
    return "%d ops, %.1f ms traced (step %.1f ms): %s; largest of the rest: %s" % (
        b["ops"], b["ops_ms"], b["step_ms"], "; ".join(parts), top)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    b = breakdown(args.trace)
    if not b["ops"]:
        print("trace_breakdown: no op events in %s" % args.trace, file=sys.stderr)
        return 1
    print(describe(b))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(b, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
