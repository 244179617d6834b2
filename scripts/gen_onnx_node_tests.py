#!/usr/bin/env python3
"""Writes the ONNX backend node tests (opsets up to the wheel's) to a folder.

The onnx wheels on PyPI ship the node test *generators*
(onnx/backend/test/case/node) but not their data. This runs them and writes
OUT/node/<test>/{model.onnx,test_data_set_*} in the layout of
libonnx-testdata, for test/onnx-node/run_node_tests.py --data-root OUT:

    <venv>/bin/python scripts/gen_onnx_node_tests.py OUT
"""
import argparse
import sys

from onnx.backend.test import cmd_tools
from onnx.backend.test.case import node


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("output")
    args = p.parse_args()
    # cmd_tools.generate_data writes what model_test collects; give it the
    # node cases instead (same layout, kind "node").
    cmd_tools.model_test.collect_testcases = lambda: node.collect_testcases(None)
    cmd_tools.generate_data(argparse.Namespace(output=args.output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
