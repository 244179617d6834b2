"""Run merak-run on PyTorch-exported models (see export_models.py).

Usage:
    /usr/bin/python3 test/torch/run_torch_tests.py --merak-run PATH \\
        --workdir DIR [--only SUBSTR]

Exports (or reuses cached) models under DIR, then runs
    merak-run DIR/<case>/model.onnx --test-data DIR/<case> --rtol R --atol A
for every case, prints PASS/FAIL per case and a final line
    N passed, M failed
Exits 1 if any case failed or no case ran.
"""

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree

STDERR_TAIL_LINES = 15


def _tail(text, n):
    lines = text.rstrip("\n").splitlines()
    return lines[-n:]


def run_case(merak_run, case_dir, rtol, atol, timeout, model=None):
    """Returns (ok, detail_lines, seconds)."""
    model = model or os.path.join(case_dir, "model.onnx")
    cmd = [merak_run, model,
           "--test-data", case_dir, "--rtol", str(rtol), "--atol", str(atol)]
    return run_cmd(cmd, timeout)


def run_cmd(cmd, timeout):
    """Runs a tool; returns (ok, detail_lines, seconds)."""
    start = time.time()
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, ["timeout after %d s" % timeout], time.time() - start
    except OSError as e:
        return False, ["cannot run %s: %s" % (cmd[0], e)], \
            time.time() - start
    elapsed = time.time() - start
    if proc.returncode == 0:
        return True, [], elapsed
    stderr = proc.stderr.decode("utf-8", "replace")
    detail = ["exit code %d" % proc.returncode]
    tail = _tail(stderr, STDERR_TAIL_LINES)
    if not tail:
        tail = _tail(proc.stdout.decode("utf-8", "replace"),
                     STDERR_TAIL_LINES)
    detail.extend(tail)
    return False, detail, elapsed


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--merak-run", required=True, help="path to merak-run")
    ap.add_argument("--merak-compile", default=None,
                    help="also compile each model with merak-compile "
                         "(import + clean-up passes) and check the resulting "
                         "IR with merak-run: the passes must keep the numbers")
    ap.add_argument("--workdir", required=True,
                    help="directory for the exported models (cached)")
    ap.add_argument("--only", default=None,
                    help="only cases whose name contains this substring")
    ap.add_argument("--rtol", default="1e-5")
    ap.add_argument("--atol", default="1e-6")
    ap.add_argument("--timeout", type=int, default=300,
                    help="seconds per case (default 300)")
    args = ap.parse_args(argv)

    merak_run = os.path.abspath(args.merak_run)
    if not os.path.isfile(merak_run):
        print("error: merak-run not found: %s" % args.merak_run,
              file=sys.stderr)
        print("0 passed, 0 failed")
        return 1

    # Import lazily so that --help works without torch.
    import export_models

    cases = [c[0] for c in export_models.all_cases(args.only)]
    if not cases:
        print("error: no cases match --only %r" % args.only, file=sys.stderr)
        print("0 passed, 0 failed")
        return 1

    # Export each case separately so that one broken export does not hide
    # the results of the others; a failed export counts as a failed case.
    os.makedirs(args.workdir, exist_ok=True)
    export_errors = {}
    for name, model_name, opset, mode in export_models.all_cases(args.only):
        try:
            export_models.export_case(args.workdir, model_name, opset, mode)
        except Exception as e:  # reported as FAIL below
            export_errors[name] = "%s: %s" % (type(e).__name__, e)
    sys.stdout.flush()

    passed, failed = [], []
    for name in cases:
        if name in export_errors:
            print("FAIL %s" % name)
            print("    export failed: %s" % export_errors[name])
            failed.append(name)
            continue
        case_dir = os.path.join(args.workdir, name)
        checks = [(name, lambda: run_case(merak_run, case_dir, args.rtol,
                                          args.atol, args.timeout))]
        if args.merak_compile:
            mlir = os.path.join(case_dir, "model.mlir")

            def compiled(case_dir=case_dir, mlir=mlir):
                ok, detail, secs = run_cmd(
                    [os.path.abspath(args.merak_compile),
                     os.path.join(case_dir, "model.onnx"), "--compile-to=import", "-o", mlir],
                    args.timeout)
                if not ok:
                    return ok, ["merak-compile failed"] + detail, secs
                return run_case(merak_run, case_dir, args.rtol, args.atol,
                                args.timeout, model=mlir)
            checks.append((name + " [compiled]", compiled))
        for label, check in checks:
            ok, detail, secs = check()
            if ok:
                print("PASS %s" % label)
                passed.append(label)
            else:
                print("FAIL %s" % label)
                print("    after %.1f s" % secs)
                for line in detail:
                    print("    " + line)
                failed.append(label)
            sys.stdout.flush()

    if failed:
        print("failed: %s" % " ".join(failed))
    print("%d passed, %d failed" % (len(passed), len(failed)))
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
