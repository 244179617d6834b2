#!/usr/bin/env python3
"""Runs one of the importer's fuzz targets over its corpus, then fuzzes.

  fuzz_check.py --fuzzer build-fuzz/bin/merak-fuzz-onnx --kind onnx \\
                --workdir DIR [--seconds 60] [--corpus DIR]

Every seed (make_corpus.py) and every input under regressions/KIND (the
inputs of bugs found and fixed) runs first; then libFuzzer mutates them for
the rest of --seconds. Fails on any crash, sanitizer report, timeout or
out-of-memory, and names the input it saved (DIR/artifacts/) and the command
that replays it. New interesting inputs go to --corpus (default DIR/corpus,
emptied first, so that a run depends only on the tree).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_corpus  # noqa: E402

# libFuzzer's limits: inputs up to 64 KiB (the seeds are smaller), 2 GiB of
# RSS (a model whose header asks for more must be refused with an error, not
# allocated), 60 s per input; one over 20 s is saved as a slow unit, which
# fails too (the seeds import in milliseconds).
FLAGS = ["-max_len=65536", "-rss_limit_mb=2048", "-malloc_limit_mb=2048", "-timeout=60",
         "-report_slow_units=20", "-print_final_stats=1", "-detect_leaks=1"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fuzzer", required=True)
    ap.add_argument("--kind", choices=["onnx", "onnxtxt"], required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--corpus", help="where new inputs go (kept between runs)")
    ap.add_argument("--seed", type=int, default=0, help="libFuzzer -seed (0: random)")
    ap.add_argument("--node-tests", action="append", default=[],
                    help="more node-test models as seeds (make_corpus.py)")
    args = ap.parse_args()

    if not os.access(args.fuzzer, os.X_OK):
        sys.exit("fuzz_check: no fuzz target at %s (test/fuzz/build_instrumented.sh builds it)"
                 % args.fuzzer)
    os.makedirs(args.workdir, exist_ok=True)
    seeds = os.path.join(args.workdir, "seeds")
    sys.argv = ["make_corpus.py", seeds] + ["--node-tests=" + d for d in args.node_tests]
    make_corpus.main()
    corpus = args.corpus or os.path.join(args.workdir, "corpus")
    if not args.corpus and os.path.isdir(corpus):
        shutil.rmtree(corpus)
    os.makedirs(corpus, exist_ok=True)
    artifacts = os.path.join(args.workdir, "artifacts")
    shutil.rmtree(artifacts, ignore_errors=True)
    os.makedirs(artifacts)
    regressions = os.path.join(HERE, "regressions", args.kind)
    dirs = [corpus, os.path.join(seeds, args.kind)]
    if os.path.isdir(regressions) and os.listdir(regressions):
        dirs.append(regressions)
    cmd = [args.fuzzer] + FLAGS + ["-max_total_time=%d" % args.seconds,
                                   "-artifact_prefix=" + artifacts + "/"]
    if args.seed:
        cmd.append("-seed=%d" % args.seed)
    dictionary = os.path.join(HERE, "onnx.dict")
    if os.path.exists(dictionary):
        cmd.append("-dict=" + dictionary)
    cmd += dirs
    print("fuzz_check: " + " ".join(cmd), flush=True)
    log_path = os.path.join(args.workdir, "fuzz.log")
    # UBSan's reports name the line only; the stack says how it got there.
    env = dict(os.environ, UBSAN_OPTIONS="print_stacktrace=1:" + os.environ.get("UBSAN_OPTIONS", ""))
    began = time.time()
    with open(log_path, "w") as log:
        rc = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    wall = time.time() - began
    with open(log_path, errors="replace") as f:
        log = f.read()

    stats = dict(re.findall(r"^stat::(\w+):\s+(\d+)", log, re.M))
    cov = re.findall(r"cov: (\d+) ft: (\d+)", log)
    seed = re.search(r"INFO: Seed: (\d+)", log)
    print("fuzz_check: %s: %s runs in %d s (%s/s, seed %s), %s inputs in the corpus, "
          "coverage %s edges, %s features, peak RSS %s MB"
          % (args.kind, stats.get("number_of_executed_units", "?"), wall,
             stats.get("average_exec_per_sec", "?"), seed.group(1) if seed else "?",
             len(os.listdir(corpus)), cov[-1][0] if cov else "?", cov[-1][1] if cov else "?",
             stats.get("peak_rss_mb", "?")))
    found = sorted(os.listdir(artifacts))
    if rc == 0 and not found:
        return 0
    # The report: the sanitizer's or libFuzzer's own lines, then the input.
    marks = [log.find(m) for m in ("==ERROR", "runtime error:", "merak import fuzzer:",
                                   "==WARNING", "ERROR: libFuzzer", "Slowest unit:")]
    start = min([m for m in marks if m >= 0], default=0)
    print(log[max(start - 2000, 0):][:12000])
    for name in found:
        path = os.path.join(artifacts, name)
        print("fuzz_check: saved input %s; replay: %s %s" % (path, args.fuzzer, path))
    print("fuzz_check: FAILED (exit %d). Fix the importer, then add the input under %s/"
          % (rc, regressions))
    return 1


if __name__ == "__main__":
    sys.exit(main())
