#!/usr/bin/env python3
"""Collects the seed corpus of the importer's fuzz targets.

  make_corpus.py OUT

OUT/onnxtxt: every .onnxtxt under test/ and examples/ (the lit inputs),
             without their comment lines (RUN and CHECK lines).
OUT/onnx:    those same models parsed by onnx and serialized, every small
             .onnx under test/ and examples/, the binary models the lit
             tests write (test/Import/Inputs/make_model.py's valid kinds:
             torch's dynamo metadata among them, which no text model can
             carry), and the small model.onnx files of the ONNX backend node
             tests (Debian's libonnx-testdata, and each --node-tests DIR:
             the onnx wheel's, opsets up to 28).
Files are named by the hash of their contents, so reruns add nothing twice.
Inputs over --max-bytes are left out (the fuzzers run with -max_len).
"""
import argparse
import hashlib
import os
import sys

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NODE_TESTS = "/usr/share/libonnx-testdata/data"


def put(out_dir, data):
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, hashlib.sha1(data).hexdigest())
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.write(data)


def files_under(root, suffix):
    for dirpath, dirnames, files in os.walk(root):
        # test/fuzz holds the regression inputs, which fuzz_check.py passes itself.
        dirnames[:] = [d for d in dirnames if not d.startswith("build") and d != "fuzz"]
        for name in sorted(files):
            if name.endswith(suffix):
                yield os.path.join(dirpath, name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--max-bytes", type=int, default=65536)
    ap.add_argument("--node-tests", action="append", default=[],
                    help="another directory of node tests (skipped when absent)")
    args = ap.parse_args()
    roots = [os.path.join(SRC, "test"), os.path.join(SRC, "examples")]
    try:
        import onnx
        import onnx.parser
    except ImportError:
        onnx = None
        print("make_corpus: python3-onnx missing; no binary seeds from the text models",
              file=sys.stderr)
    counts = {"onnxtxt": 0, "onnx": 0}
    for root in roots:
        for path in files_under(root, ".onnxtxt"):
            with open(path, "rb") as f:
                text = b"".join(line for line in f if not line.lstrip().startswith(b"#"))
            if len(text) > args.max_bytes:
                continue
            put(os.path.join(args.out, "onnxtxt"), text)
            counts["onnxtxt"] += 1
            if onnx is None:
                continue
            try:
                model = onnx.parser.parse_model(text.decode())
            except Exception:  # the lit tests of parse errors
                continue
            data = model.SerializeToString()
            if len(data) <= args.max_bytes:
                put(os.path.join(args.out, "onnx"), data)
                counts["onnx"] += 1
        for path in files_under(root, ".onnx"):
            if os.path.getsize(path) <= args.max_bytes:
                with open(path, "rb") as f:
                    put(os.path.join(args.out, "onnx"), f.read())
                counts["onnx"] += 1
    if onnx is not None:
        sys.path.insert(0, os.path.join(SRC, "test", "Import", "Inputs"))
        import make_model
        for name in sorted(dir(make_model)):
            if not (name.startswith("k_") and ("dynamo" in name or name in ("k_relu", "k_params"))):
                continue
            data = getattr(make_model, name)(None).SerializeToString()
            if len(data) <= args.max_bytes:
                put(os.path.join(args.out, "onnx"), data)
                counts["onnx"] += 1
    for node_root in [NODE_TESTS] + args.node_tests:
        if not os.path.isdir(node_root):
            continue
        for path in files_under(node_root, "model.onnx"):
            if os.path.getsize(path) <= args.max_bytes:
                with open(path, "rb") as f:
                    put(os.path.join(args.out, "onnx"), f.read())
                counts["onnx"] += 1
    print("make_corpus: %d text and %d binary seeds in %s"
          % (counts["onnxtxt"], counts["onnx"], args.out))


if __name__ == "__main__":
    main()
