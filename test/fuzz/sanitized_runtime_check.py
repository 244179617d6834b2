#!/usr/bin/env python3
"""The runtime's program tests against its sanitized build.

  sanitized_runtime_check.py --src . --instrumented build-fuzz --workdir DIR \\
      [--mpiexec mpiexec] --train-checks "metrics;resume;..." --comm-checks "layout;..."

Runs runtime/test/train_test.py (./train's behaviour: data, checkpoints,
resume and its errors, metrics, traces) over the instrumented build's
merak_fake_train, and runtime/test/comm_test.py (the MPI collectives, a
dead rank, a timeout) over its merak_comm_test: the same checks as the
runtime.train.* and runtime.comm.* ctests, with ASan+UBSan. Many of those
checks expect a program to fail, so a report is found by the sanitizers'
log files (log_path), not by exit codes: any report fails the test.
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", required=True)
    ap.add_argument("--instrumented", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--mpiexec", default="")
    ap.add_argument("--train-checks", default="")
    ap.add_argument("--comm-checks", default="")
    args = ap.parse_args()
    shutil.rmtree(args.workdir, ignore_errors=True)
    reports = os.path.join(args.workdir, "reports")
    os.makedirs(reports)
    env = dict(os.environ,
               ASAN_OPTIONS="detect_leaks=1:fast_unwind_on_malloc=0:log_path=%s/asan" % reports,
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=%s/ubsan" % reports,
               LSAN_OPTIONS="suppressions=" + os.path.join(HERE, "lsan.supp"),
               OMPI_MCA_mca_base_component_disable_dlclose="1")
    rt = os.path.join(args.instrumented, "runtime")
    tests = os.path.join(args.src, "runtime", "test")
    runs = []
    for check in filter(None, args.train_checks.split(";")):
        runs.append(("train." + check, [
            sys.executable, os.path.join(tests, "train_test.py"),
            os.path.join(rt, "merak_fake_train"), os.path.join(rt, "merak_fake_train_bad_manifest"),
            os.path.join(args.workdir, "train_" + check), check]))
    if args.mpiexec:
        for check in filter(None, args.comm_checks.split(";")):
            runs.append(("comm." + check, [
                sys.executable, os.path.join(tests, "comm_test.py"), args.mpiexec,
                os.path.join(rt, "merak_comm_test"), check]))
    failed = []
    for name, cmd in runs:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
        print("sanitized_runtime_check: %s: %s" % (name, "ok" if r.returncode == 0 else "FAILED"))
        if r.returncode != 0:
            failed.append(name)
            print(r.stdout[-3000:] + r.stderr[-3000:])
    # LeakSanitizer writes its list of used suppressions to the log too.
    found = []
    for path in sorted(glob.glob(os.path.join(reports, "*"))):
        with open(path, errors="replace") as f:
            text = f.read()
        if "ERROR:" in text or "runtime error:" in text:
            found.append(path)
            print("sanitized_runtime_check: report in %s:\n%s" % (path, text[:8000]))
    if failed or found:
        print("sanitized_runtime_check: FAILED: %d checks failed, %d sanitizer reports"
              % (len(failed), len(found)))
        return 1
    print("sanitized_runtime_check: PASS (%d checks, no sanitizer report)" % len(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
