#!/usr/bin/env python3
"""Feeds damaged copies of a model to a tool and checks it never crashes.

    mangle.py prefixes TOOL MODEL WORKDIR
        proper prefixes of MODEL (all of the first 64, then every 5th
        length): the tool must exit 1 with "error:"
    mangle.py bytes TOOL MODEL WORKDIR COUNT
        COUNT copies with 1-4 bytes overwritten (seeded): exit 0 or 1,
        and "error:" whenever it is 1

Prints one line per failure (crash signal, other exit code, silent
failure) and a summary line "<mode>: N runs, F failures".
"""
import os
import random
import subprocess
import sys


def run(tool, path):
    r = subprocess.run([tool, path, "--compile-to=import", "-o", os.devnull], capture_output=True, timeout=120)
    return r.returncode, r.stderr.decode(errors="replace")


def main():
    mode, tool, model, work = sys.argv[1:5]
    data = open(model, "rb").read()
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "damaged.onnx")
    cases = []
    if mode == "prefixes":
        cases = [(f"prefix of {n} bytes", data[:n], {1})
                 for n in range(len(data)) if n < 64 or n % 5 == 0]
    elif mode == "bytes":
        rnd = random.Random(20240229)
        for i in range(int(sys.argv[5])):
            b = bytearray(data)
            for _ in range(rnd.randint(1, 4)):
                b[rnd.randrange(len(b))] = rnd.randrange(256)
            cases.append((f"mutation {i}", bytes(b), {0, 1}))
    else:
        sys.exit("unknown mode " + mode)
    failures = 0
    for what, contents, allowed in cases:
        with open(path, "wb") as f:
            f.write(contents)
        rc, err = run(tool, path)
        if rc not in allowed or (rc == 1 and "error:" not in err):
            failures += 1
            keep = os.path.join(work, f"failure-{failures}.onnx")
            os.replace(path, keep)
            last = err.strip().splitlines()[-1:] if err.strip() else ["(no output)"]
            print(f"FAILURE {what}: exit {rc}, kept as {keep}: {last[0][:200]}")
    print(f"{mode}: {len(cases)} runs, {failures} failures")


if __name__ == "__main__":
    main()
