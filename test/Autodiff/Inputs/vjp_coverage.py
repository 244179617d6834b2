#!/usr/bin/env python3
"""Checks that every op with a VJP rule (MERAK_VJP_OPS in VJPRules.h) is
used in at least one finite-difference test of this directory (a file whose
RUN line runs gradcheck.py).

    vjp_coverage.py VJPRules.h TEST_DIR
"""
import glob
import os
import re
import sys


def mnemonic(op):
    name = op[:-2]  # strip "Op"
    special = {"CumSum": "cumsum"}
    if name in special:
        return special[name]
    # CamelCase to snake_case, keeping "2D" together (Conv2D -> conv2d).
    name = name.replace("2D", "2d")
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def main():
    header, test_dir = sys.argv[1], sys.argv[2]
    text = open(header).read()
    m = re.search(r"#define MERAK_VJP_OPS\(X\)(.*?)\n\s*\n", text, re.S)
    if not m:
        sys.exit("vjp_coverage: MERAK_VJP_OPS not found in " + header)
    ops = re.findall(r"X\((\w+Op)\)", m.group(1))
    used = ""
    for path in sorted(glob.glob(os.path.join(test_dir, "*.mlir"))):
        body = open(path).read()
        if "gradcheck.py" in body.split("\n", 1)[0]:
            # Drop comment lines: an op must really be used.
            used += "\n".join(l for l in body.splitlines() if not l.lstrip().startswith("//"))
    missing = [op for op in ops
               if not re.search(r"\bmerak\.%s\b" % re.escape(mnemonic(op)), used)]
    for op in missing:
        print("no gradcheck test uses merak.%s (%s)" % (mnemonic(op), op))
    if missing:
        print("vjp coverage: %d of %d ops untested" % (len(missing), len(ops)))
        return 1
    print("vjp coverage: all %d ops with a rule are gradchecked" % len(ops))
    return 0


if __name__ == "__main__":
    sys.exit(main())
