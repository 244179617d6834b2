"""The command line and summary shared by the end-to-end check scripts
(program_check.py, parallel/*_check.py):

    SCRIPT --bin BUILD/bin --workdir DIR [CHECK...]

runs each named check (all by default) as check(env, name) -> (ok, message),
prints "PASS|FAIL name: message" lines and ends with "N passed, M failed";
exits non-zero when anything failed or nothing ran.
"""
import argparse
import os
import sys


def run_checks(make_env, check, default_checks):
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("checks", nargs="*", default=list(default_checks))
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    env = make_env(os.path.abspath(args.bin), os.path.abspath(args.workdir))
    passed = failed = 0
    for name in args.checks:
        try:
            ok, msg = check(env, name)
        except Exception as e:  # noqa: BLE001  (a failing tool or file fails the check)
            ok, msg = False, str(e)
        print("%s %s: %s" % ("PASS" if ok else "FAIL", name, msg))
        sys.stdout.flush()
        passed += ok
        failed += not ok
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed or not passed else 0
