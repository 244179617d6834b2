"""Compile time and plan of the GPT-2-124M shape on a parallel mesh.

    /usr/bin/python3 bench/parallel_compile.py --bin build/bin --workdir /tmp/bench-par \
        [--mesh 2,2,2 --microbatches 4] [--mesh 2,1,2 ...] [--phase lower|binary]

GPT-2 shape: 12 layers, d=768, 12 heads, vocab 50304, sequence 1024, exported
by PyTorch in training mode (opset 17) with a dynamic batch axis and compiled
for a batch of 8 (--input-shape input_ids=8x1024), so that --dp splits it.
For each mesh (dp,tp,pp), times merak-compile up to --phase (default lower:
the memory-planned program, written as bytecode to /dev/null) with
--report=json, and prints wall seconds, peak RSS and the report's per-stage
parameter, optimizer-state and activation bytes, FLOPs per step and
communication. A mesh the compiler rejects is printed as "unsupported" with
its message. A benchmark, not a test: it prints numbers.
"""
import argparse
import json
import os
import subprocess
import sys
import time

from gpt_onnx import export_gpt

BATCH, SEQ = 8, 1024



def timed(cmd):
    """(returncode, wall seconds, peak RSS in MB, stderr) of one tool run."""
    start = time.time()
    p = subprocess.run(["/usr/bin/time", "-f", "maxrss_kb=%M"] + cmd,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    secs = time.time() - start
    err = p.stderr.decode()
    lines = err.strip().splitlines()
    rss = int(lines[-1].split("=")[1]) / 1024 if lines and lines[-1].startswith("maxrss_kb=") else 0
    return p.returncode, secs, rss, err


def mb(b):
    return "%.1f MB" % (b / 1e6)


def gflop(f):
    return "%.1f" % (f / 1e9)


def report(r):
    print("  mesh dp %d x tp %d x pp %d = %d ranks, %d micro-batches (%s), batch %d = %d per dp rank"
          % (r["mesh"]["dp"], r["mesh"]["tp"], r["mesh"]["pp"], r["mesh"]["world"],
             r["microbatches"], r["schedule"] or "no pipeline", r["batch"]["global"],
             r["batch"]["per_dp_rank"]))
    print("  parameter storage mapped per rank %s (all parameters and state; a rank "
          "touches only its stage's: param bytes + optimizer state below)"
          % mb(r["memory"]["param_storage_bytes"]))
    print("  | stage | ranks | ONNX nodes | params | param bytes | optimizer state | arena peak "
          "| stash | GFLOP/step fwd | bwd (recompute) | update | total | all_reduce tp | "
          "all_reduce dp | p2p send |")
    print("  |" + "---:|" * 15)
    for s in r["stages"]:
        c = s["collectives"]
        ar = c.get("all_reduce", {})
        tp = ar.get("tp", {"count": 0, "bytes": 0})
        dp = ar.get("dp", {"count": 0, "bytes": 0})
        rs = c.get("reduce_scatter", {}).get("dp")
        dps = "%d x, %s" % (dp["count"], mb(dp["bytes"]))
        if rs:
            dps += " (+ reduce_scatter %d x, %s)" % (rs["count"], mb(rs["bytes"]))
        f = s["flops"]
        print("  | %d | %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %d x, %s | %s | %s |"
              % (s["stage"], "%d-%d" % (s["ranks"][0], s["ranks"][-1]), s["node_count"],
                 s["param_count"], mb(s["param_bytes"]), mb(s["optimizer_state_bytes"]),
                 mb(s["activations"]["arena_peak_bytes"]), mb(s["activations"]["stash_bytes"]),
                 gflop(f["forward"]), gflop(f["backward"]), gflop(f["update"]), gflop(f["total"]),
                 tp["count"], mb(tp["bytes"]), dps,
                 mb(c["send"]["next"] + c["send"]["prev"] + c["send"]["tied"])))
    t = r["tensor_parallel"]
    kinds = {}
    for p in t["sharded"]:
        kinds[p["kind"]] = kinds.get(p["kind"], 0) + 1
    print("  tensor parallel: %d sharded parameters %s" % (len(t["sharded"]), kinds))
    d = r["data_parallel"]
    print("  data parallel: %d buckets, %s" % (d["bucket_count"], mb(d["bucket_bytes"])))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--mesh", action="append", help="dp,tp,pp (repeatable; default 2,2,2)")
    ap.add_argument("--microbatches", type=int, default=4)
    ap.add_argument("--phase", default="lower", choices=["training", "lower", "binary"])
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    onnx_path = os.path.join(args.workdir, "gpt2_124m_dynbatch.onnx")
    t0 = time.time()
    export_gpt(onnx_path, 50304, 768, 12, 12, SEQ)
    print("GPT-2 124M shape (12 layers, d=768, vocab 50304, seq %d), batch %d; exported in %.1f s"
          % (SEQ, BATCH, time.time() - t0))
    compile_ = os.path.join(os.path.abspath(args.bin), "merak-compile")
    for mesh in args.mesh or ["2,2,2"]:
        dp, tp, pp = (int(x) for x in mesh.split(","))
        m = args.microbatches if pp > 1 else 1
        name = "dp%d-tp%d-pp%d-mb%d" % (dp, tp, pp, m)
        rep = os.path.join(args.workdir, name + ".json")
        out = os.path.join(args.workdir, name + "-train") if args.phase == "binary" else "/dev/null"
        cmd = [compile_, onnx_path, "--input-shape", "input_ids=%dx%d" % (BATCH, SEQ),
               "--frozen", "*.attn.bias", "--compile-to=" + args.phase, "-o", out,
               "--dp", str(dp), "--tp", str(tp), "--pp", str(pp), "--microbatches", str(m),
               "--report=json", "--report-file", rep]
        if args.phase != "binary":
            cmd.append("--emit-bytecode")
        if os.path.exists(rep):
            os.remove(rep)
        rc, secs, rss, err = timed(cmd)
        print("(dp, tp, pp) = (%d, %d, %d), %d micro-batches, --compile-to=%s:" % (dp, tp, pp, m,
                                                                                   args.phase))
        if rc:
            msg = [l for l in err.splitlines() if "error" in l][:1] or err.splitlines()[-2:]
            print("  unsupported: %s" % " ".join(msg).strip())
            continue
        print("  %.1f s, peak RSS %.0f MB" % (secs, rss))
        with open(rep) as f:
            report(json.load(f))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
