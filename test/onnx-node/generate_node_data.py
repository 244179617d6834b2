"""Writes the ONNX backend node tests of the installed onnx package (its
opsets, up to 23 and beyond) in the layout run_node_tests.py reads:

    VENV/bin/python test/onnx-node/generate_node_data.py OUT_DIR

OUT_DIR/node/<test>/model.onnx and test_data_set_<i>/{input,output}_<j>.pb.
The onnx wheel ships the cases as Python (onnx.backend.test.case.node), not
as files, so they are generated here; the data are the package's own
expected values. Idempotent: an existing OUT_DIR/node is replaced whole only
when the onnx version written in OUT_DIR/node/VERSION differs.
"""
import os
import shutil
import sys
import warnings

import onnx
from onnx import numpy_helper
from onnx.backend.test.case import node


def tensor_file(path, value, name):
    proto = value if isinstance(value, onnx.TensorProto) else numpy_helper.from_array(value, name)
    with open(path, "wb") as f:
        f.write(proto.SerializeToString())


def write_case(case, root):
    out = os.path.join(root, case.name)
    os.makedirs(out)
    with open(os.path.join(out, "model.onnx"), "wb") as f:
        f.write(case.model.SerializeToString())
    graph = case.model.graph
    for i, (inputs, outputs) in enumerate(case.data_sets):
        data = os.path.join(out, "test_data_set_%d" % i)
        os.makedirs(data)
        for j, value in enumerate(inputs):
            if not graph.input[j].type.HasField("tensor_type"):
                return False  # sequences, maps, optionals: outside merak's scope
            tensor_file(os.path.join(data, "input_%d.pb" % j), value, graph.input[j].name)
        for j, value in enumerate(outputs):
            if not graph.output[j].type.HasField("tensor_type"):
                return False
            tensor_file(os.path.join(data, "output_%d.pb" % j), value, graph.output[j].name)
    return True


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = os.path.join(sys.argv[1], "node")
    stamp = os.path.join(root, "VERSION")
    if os.path.exists(stamp) and open(stamp).read().strip() == onnx.__version__:
        return 0
    shutil.rmtree(root, ignore_errors=True)
    partial = root + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    os.makedirs(partial)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the cases divide by zero on purpose
        cases = node.collect_testcases(None)
    written = skipped = 0
    for case in cases:
        if write_case(case, partial):
            written += 1
        else:
            shutil.rmtree(os.path.join(partial, case.name))
            skipped += 1
    with open(os.path.join(partial, "VERSION"), "w") as f:
        f.write(onnx.__version__ + "\n")
    os.rename(partial, root)
    print("generate_node_data: onnx %s: %d node tests written, %d with non-tensor inputs "
          "or outputs left out" % (onnx.__version__, written, skipped))
    return 0


if __name__ == "__main__":
    sys.exit(main())
